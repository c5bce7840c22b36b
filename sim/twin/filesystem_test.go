package twin

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ballast-io/ballast/models"
)

// fsUsed reads size − avail of every exported filesystem of the scratch
// pool's data servers (scr*) from their rendered exposition, checking
// that every filesystem series is consistent on the way: 0 ≤ avail ≤ free
// ≤ size, size equal to the drive's capacity, and used equal to what the
// drive's SMART view says its stripes hold.
func fsUsed(t *testing.T, tw *Twin) (used float64, filesystems int) {
	t.Helper()
	for _, n := range tw.Nodes() {
		if n.Role != RoleDS {
			continue
		}
		ser := series(t, render(t, tw, n.Name))
		sm, err := tw.Smart(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range sm {
			l := fmt.Sprintf(`{device=%q,fstype="xfs",mountpoint="/export/%s"}`, h.Namespace, h.Namespace)
			get := func(name string) (float64, bool) {
				v, ok := ser[name+l]
				if !ok {
					return 0, false
				}
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %s%s = %q", n.Name, name, l, v)
				}
				return f, true
			}
			size, ok := get(models.MetricFilesystemSize)
			if !ok {
				continue // a spare: no filesystem
			}
			free, _ := get(models.MetricFilesystemFree)
			avail, ok := get(models.MetricFilesystemAvail)
			if !ok {
				t.Fatalf("%s: %s has a size but no avail series", n.Name, h.Namespace)
			}
			if !(avail >= 0 && avail <= free && free <= size) {
				t.Errorf("%s/%s: size %v free %v avail %v; want 0 <= avail <= free <= size", n.Name, h.Namespace, size, free, avail)
			}
			if size != h.CapacityBytes {
				t.Errorf("%s/%s: size %v, drive capacity %v", n.Name, h.Namespace, size, h.CapacityBytes)
			}
			if d := size - avail - h.UsedBytes; d > 1 || d < -1 {
				t.Errorf("%s/%s: size − avail = %v, the drive holds %v", n.Name, h.Namespace, size-avail, h.UsedBytes)
			}
			if strings.HasPrefix(n.Name, "scr") {
				used += size - avail
				filesystems++
			}
		}
	}
	return used, filesystems
}

// TestFilesystemSeriesUnderCapacityPressure checks the filesystem series
// every data server's exposition carries, and that the scratch pool's used
// bytes (size − avail) grow once the capacity-pressure tenant starts
// writing at 4 GB/s (from minute 10).
func TestFilesystemSeriesUnderCapacityPressure(t *testing.T) {
	sc, tw := shipped(t, "capacity-pressure")
	tw.Run(int64(9 * 60 / sc.Tick.Seconds()))
	before, nfs := fsUsed(t, tw)
	if nfs != 16 {
		t.Fatalf("%d scratch filesystems, want 16 (4 data servers × 4 drives)", nfs)
	}
	tw.Run(int64(10 * 60 / sc.Tick.Seconds()))
	after, _ := fsUsed(t, tw)
	// 10 minutes at 4 GB/s from minute 10 is up to 2.4 TB; ask for a
	// quarter of it, whatever the checkpoints did meanwhile.
	t.Logf("scratch pool used (size − avail): %.3g B at 9 min, %.3g B at 19 min", before, after)
	if grew := after - before; grew < 0.6e12 {
		t.Errorf("scratch used %v at 9 min, %v at 19 min: grew %v bytes; want ≥ 0.6 TB under capacity pressure", before, after, grew)
	}
	if !strings.Contains(render(t, tw, "scr00"), `ballast_collector_success{collector="filesystem"} 1`) {
		t.Error("scr00's exposition does not report the filesystem collector")
	}
}
