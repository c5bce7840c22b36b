//go:build cgo && linux

package collector

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/ballast-io/ballast/internal/testkit"
	"github.com/ballast-io/ballast/models"
)

// waitResult is what one nvmlEventSetWait returns.
type waitResult struct {
	ev  nvml.EventData
	ret nvml.Return
}

// scriptedEvents is an xidEventSource that returns its script, one entry
// per Wait, then closes drained and times out from then on: by the time
// drained is closed the watcher has handled every scripted entry (it
// waits again only after handling the last).
type scriptedEvents struct {
	mu          sync.Mutex
	script      []waitResult
	next        int
	waits       int
	zeroTimeout bool // a Wait(0) would make the watcher spin
	freed       int
	waitFreed   bool // Wait called after Free
	drained     chan struct{}
}

func newScriptedEvents(script ...waitResult) *scriptedEvents {
	return &scriptedEvents{script: script, drained: make(chan struct{})}
}

func (s *scriptedEvents) Wait(ms uint32) (nvml.EventData, nvml.Return) {
	s.mu.Lock()
	s.waits++
	s.zeroTimeout = s.zeroTimeout || ms == 0
	s.waitFreed = s.waitFreed || s.freed > 0
	if s.next < len(s.script) {
		r := s.script[s.next]
		s.next++
		s.mu.Unlock()
		return r.ev, r.ret
	}
	if s.next == len(s.script) {
		s.next++
		close(s.drained)
	}
	s.mu.Unlock()
	time.Sleep(time.Millisecond) // a real wait blocks until its timeout
	return nvml.EventData{}, nvml.ERROR_TIMEOUT
}

func (s *scriptedEvents) Free() nvml.Return {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.freed++
	return nvml.SUCCESS
}

func (s *scriptedEvents) awaitDrained(t *testing.T) {
	t.Helper()
	select {
	case <-s.drained:
	case <-time.After(10 * time.Second):
		t.Fatalf("the watcher handled %d of %d scripted waits in 10 s", s.next, len(s.script))
	}
}

func xid(d nvml.Device, x uint64) waitResult {
	return waitResult{nvml.EventData{Device: d, EventType: nvml.EventTypeXidCriticalError, EventData: x}, nvml.SUCCESS}
}

// TestXIDWatcherAttributesEvents scripts XID events on three GPUs, mixed
// with timeouts, a failed wait, an event of another type, one naming an
// unwatched GPU and one naming a watched GPU by another handle, and
// checks that each GPU has its own last XID and count: none dropped, none
// on the wrong GPU.
func TestXIDWatcherAttributesEvents(t *testing.T) {
	gpus := []*mock.Device{mockGPU(0, true, true), mockGPU(1, true, true), mockGPU(2, true, true)}
	stranger := mockGPU(9, true, true)  // a GPU the watcher did not register
	gpu1Again := mockGPU(1, true, true) // GPU 1 under another handle: found by UUID
	set := newScriptedEvents(
		xid(gpus[2], 79),
		xid(gpus[0], 13),
		waitResult{ret: nvml.ERROR_TIMEOUT},
		xid(gpus[0], 31),
		waitResult{nvml.EventData{Device: gpus[1], EventType: nvml.EventTypeSingleBitEccError, EventData: 5}, nvml.SUCCESS},
		xid(stranger, 94),
		waitResult{ret: nvml.ERROR_UNKNOWN},
		xid(gpus[0], 13),
		xid(gpu1Again, 48),
		waitResult{nvml.EventData{Device: nil, EventType: nvml.EventTypeXidCriticalError, EventData: 62}, nvml.SUCCESS},
	)
	var logged testkit.LogBuffer
	log := newOnceLogger(slog.New(slog.NewTextHandler(&logged, nil)))
	w := newXIDWatcher(set, []nvml.Device{gpus[0], gpus[1], gpus[2]}, time.Millisecond, log)
	set.awaitDrained(t)
	want := []struct{ last, count uint64 }{{13, 3}, {48, 1}, {79, 1}}
	for i, x := range want {
		last, count, ok := w.read(i)
		if !ok || last != x.last || count != x.count {
			t.Errorf("GPU %d: got last XID %d, %d XIDs (watched %v); want %d, %d", i, last, count, ok, x.last, x.count)
		}
	}
	if _, _, ok := w.read(3); ok {
		t.Errorf("GPU 3 (not registered): got watched; want not")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	set.mu.Lock()
	waits := set.waits
	if set.freed != 1 || set.waitFreed || set.zeroTimeout {
		t.Errorf("Free called %d times, a wait after Free %v, a zero-timeout wait %v; want 1, false, false", set.freed, set.waitFreed, set.zeroTimeout)
	}
	set.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	set.mu.Lock()
	if set.waits != waits {
		t.Errorf("%d waits after Close returned; want the goroutine stopped", set.waits-waits)
	}
	set.mu.Unlock()
	if err := w.Close(); err != nil || set.freed != 1 {
		t.Errorf("a second Close: err %v, Free called %d times; want nil and still 1", err, set.freed)
	}
	for _, s := range []string{"xid=79", "xid=13", "xid=31", "xid=48", "ERROR_UNKNOWN", "dropped an XID event"} {
		if !strings.Contains(logged.String(), s) {
			t.Errorf("log lacks %q:\n%s", s, logged.String())
		}
	}
}

// TestNVMLXIDThroughCollector reads two GPUs through the dcgm collector on
// NVML: GPU 0 registers for XID events and one arrives; GPU 1's
// registration fails with NOT_SUPPORTED (as on some vGPU and MIG setups),
// so it has no XID series, the field is listed unavailable with NVML's
// own error as the reason, logged once over two scrapes, and an event
// naming GPU 1 is not put on GPU 0.
func TestNVMLXIDThroughCollector(t *testing.T) {
	gpus := []*mock.Device{mockGPU(0, true, true), mockGPU(1, true, true)}
	var registered []uint64
	gpus[0].RegisterEventsFunc = func(types uint64, _ nvml.EventSet) nvml.Return {
		registered = append(registered, types)
		return nvml.SUCCESS
	}
	gpus[1].RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
	set := newScriptedEvents(xid(gpus[1], 79), xid(gpus[0], 48))
	lib := mockNVML(gpus)
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{WaitFunc: set.Wait, FreeFunc: set.Free}, nvml.SUCCESS
	}
	var logged testkit.LogBuffer
	log := newOnceLogger(slog.New(slog.NewTextHandler(&logged, nil)))
	c := &dcgmCollector{src: &nvmlSource{lib: lib, log: log}, log: log}
	if _, err := c.Collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(registered) != 1 || registered[0] != nvml.EventTypeXidCriticalError {
		t.Fatalf("GPU 0 registered for event types %v; want [%d] (XidCriticalError)", registered, nvml.EventTypeXidCriticalError)
	}
	set.awaitDrained(t)
	var samples []Sample
	for range 2 {
		var err error
		if samples, err = c.Collect(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]float64{}
	var unavailable []string
	for _, s := range samples {
		switch s.Name {
		case models.MetricGPULastXID, models.MetricGPUXIDErrors:
			got[s.Name+"/"+s.Values[0]] = s.Value
		case models.MetricCollectorSkipped:
			unavailable = append(unavailable, s.Values[1])
		}
	}
	want := map[string]float64{models.MetricGPULastXID + "/0": 48, models.MetricGPUXIDErrors + "/0": 1}
	if len(got) != len(want) || got[models.MetricGPULastXID+"/0"] != 48 || got[models.MetricGPUXIDErrors+"/0"] != 1 {
		t.Errorf("XID series: got %v; want %v (GPU 1 unwatched: none)", got, want)
	}
	if !strings.Contains(strings.Join(unavailable, ","), xidField) {
		t.Errorf("unavailable fields %v; want %s listed", unavailable, xidField)
	}
	reason := "NVML nvmlDeviceRegisterEvents(XidCriticalError) on GPU 1: " + nvml.ERROR_NOT_SUPPORTED.Error()
	if n := strings.Count(logged.String(), reason); n != 1 {
		t.Errorf("the reason %q logged %d times over 3 scrapes; want once:\n%s", reason, n, logged.String())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if set.freed != 1 || len(lib.ShutdownCalls()) != 1 {
		t.Errorf("Close: event set freed %d times, NVML shut down %d times; want 1 and 1", set.freed, len(lib.ShutdownCalls()))
	}
}

// TestNVMLXIDEventSetFails: when NVML cannot create an event set (or the
// driver lacks the functions), every GPU reads as before and the XID
// field is unavailable with NVML's error.
func TestNVMLXIDEventSetFails(t *testing.T) {
	lib := mockNVML([]*mock.Device{mockGPU(0, true, true)})
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NO_PERMISSION }
	src := &nvmlSource{lib: lib}
	t.Cleanup(func() { src.Close() })
	rs, skipped, err := src.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rs[0].Fields[xidField]; ok || rs[0].XIDEvents != nil {
		t.Errorf("GPU 0 has an XID reading without an event set")
	}
	if want := "NVML nvmlEventSetCreate: " + nvml.ERROR_NO_PERMISSION.Error(); skipped[xidField] != want {
		t.Errorf("skipped[%s] = %q; want %q", xidField, skipped[xidField], want)
	}

	dev := mockGPU(0, true, true)
	dev.RegisterEventsFunc = nil // a call would panic
	old := &nvmlSource{lib: mockNVML([]*mock.Device{dev}, "nvmlDeviceRegisterEvents")}
	t.Cleanup(func() { old.Close() })
	_, skipped, err = old.Read(context.Background())
	if err != nil || !strings.Contains(skipped[xidField], "nvmlDeviceRegisterEvents") {
		t.Errorf("a driver without nvmlDeviceRegisterEvents: err %v, skipped with %q; want the missing function named", err, skipped[xidField])
	}
}

// TestNVMLLostGPUKeepsXID: XID 79 (the GPU fell off the bus) arrives, then
// every read of that GPU answers GPU_IS_LOST. The collection still
// succeeds: the lost GPU keeps its identity and serves last XID 79 with
// ballast_collector_device_up 0, and the other GPU is read as usual.
func TestNVMLLostGPUKeepsXID(t *testing.T) {
	gpus := []*mock.Device{mockGPU(0, true, true), mockGPU(1, true, true)}
	set := newScriptedEvents(xid(gpus[0], 79))
	lib := mockNVML(gpus)
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{WaitFunc: set.Wait, FreeFunc: set.Free}, nvml.SUCCESS
	}
	var logged testkit.LogBuffer
	log := newOnceLogger(slog.New(slog.NewTextHandler(&logged, nil)))
	c := &dcgmCollector{src: &nvmlSource{lib: lib, log: log}, log: log}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Collect(context.Background()); err != nil {
		t.Fatal(err)
	}
	set.awaitDrained(t)
	gpus[0].GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	s, err := c.Collect(context.Background())
	if err != nil {
		t.Fatalf("a lost GPU failed the collection: %v", err)
	}
	got := map[string]float64{}
	for _, x := range s {
		switch x.Name {
		case models.MetricGPULastXID, models.MetricGPUXIDErrors, models.MetricGPUPower:
			got[x.Name+"/"+strings.Join(x.Values, ",")] = x.Value
		case models.MetricCollectorDeviceUp:
			got[x.Name+"/"+strings.Join(x.Values, ",")] = x.Value
		}
	}
	want := map[string]float64{
		models.MetricGPULastXID + "/0,GPU-0,NVIDIA H200":   79,
		models.MetricGPUXIDErrors + "/0,GPU-0,NVIDIA H200": 1,
		models.MetricCollectorDeviceUp + "/dcgm,0":         0,
		models.MetricGPULastXID + "/1,GPU-1,NVIDIA H200":   0,
		models.MetricGPUXIDErrors + "/1,GPU-1,NVIDIA H200": 0,
		models.MetricGPUPower + "/1,GPU-1,NVIDIA H200":     350.123,
	}
	if len(got) != len(want) {
		t.Errorf("got %v; want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: got %v (present %v); want %v", k, g, ok, v)
		}
	}
	if !strings.Contains(logged.String(), "cannot read a GPU") || !strings.Contains(logged.String(), nvml.ERROR_GPU_IS_LOST.Error()) {
		t.Errorf("log lacks the lost GPU and NVML's error:\n%s", logged.String())
	}
}
