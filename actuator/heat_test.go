package actuator

import (
	"math"
	"testing"
	"time"
)

// TestDeviceLoadsSumInKeyOrder: a device's load is the sum of its
// stripes' rates, and a floating-point sum depends on its order. Rates
// 1e17, 5 and 5 B/s sum to 1e17 when the large one comes first and to
// 1e17+16 when the two small ones meet first: summed in map order, the
// load changed from call to call, and devices the twin loads alike swapped
// places in the planner's orders (eval's divergent runs, docs/notes.md).
// Every call must give the sum in the order of the stripes' file handles.
func TestDeviceLoadsSumInKeyOrder(t *testing.T) {
	h := newHeatModel(time.Minute)
	rates := map[string]float64{"fh-a": 1e17, "fh-b": 5, "fh-c": 5}
	for fh, r := range rates {
		h.entries[heatKey{"d1", fh}] = &heatEntry{rate: r}
	}
	h.entries[heatKey{"d2", "fh-a"}] = &heatEntry{rate: 7}
	want := rates["fh-a"]
	want += rates["fh-b"]
	want += rates["fh-c"]
	for i := range 200 {
		got := h.deviceLoads()
		if math.Float64bits(got["d1"]) != math.Float64bits(want) || got["d2"] != 7 {
			t.Fatalf("call %d: loads %v; want d1 %v (summed in handle order), d2 7", i, got, want)
		}
	}
}
