//go:build cgo && linux

package collector

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// xidField is the DCGM field the XID watcher fills.
const xidField = "DCGM_FI_DEV_XID_ERRORS"

// xidEventSource is the part of NVML's event API the XID watcher uses: an
// event set on which XID events of the GPUs were registered. nvml.EventSet
// is one; tests script another.
type xidEventSource interface {
	Wait(timeoutms uint32) (nvml.EventData, nvml.Return)
	Free() nvml.Return
}

// xidSymbols are the NVML functions the XID watcher calls (go-nvml picks
// nvmlEventSetWait_v2 or v1 itself).
var xidSymbols = []string{"nvmlEventSetCreate", "nvmlDeviceRegisterEvents", "nvmlEventSetFree"}

// xidWaitTimeout bounds one nvmlEventSetWait, and with it how long Close
// waits for the watcher to notice it should stop.
const xidWaitTimeout = 500 * time.Millisecond

// xidWatcher gives DCGM_FI_DEV_XID_ERRORS on NVML: NVML has no "last XID"
// to read, only XID events (nvmlEventSetWait), so a goroutine owned by the
// nvml source waits on the event set and keeps, per GPU, the last XID seen
// and how many were seen. As with DCGM, whose host engine itself registers
// for these NVML events when it starts watching the field, only XIDs after
// registration are known: the last XID is 0 until one happens.
type xidWatcher struct {
	set  xidEventSource
	gpus []nvml.Device // registered GPUs by index; nil where registration failed
	log  *onceLogger   // may be nil (tests)

	retry time.Duration // pause after a failed wait, so a failing set does not spin

	mu    sync.Mutex
	last  []uint64 // by GPU index
	count []uint64

	stop chan struct{}
	done chan struct{}
}

// newXIDWatcher starts watching set for the XID events of gpus (index →
// handle, nil for a GPU whose registration failed); retry is the pause
// after a failed wait.
func newXIDWatcher(set xidEventSource, gpus []nvml.Device, retry time.Duration, log *onceLogger) *xidWatcher {
	w := &xidWatcher{
		set: set, gpus: gpus, log: log, retry: retry,
		last: make([]uint64, len(gpus)), count: make([]uint64, len(gpus)),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go w.run()
	return w
}

func (w *xidWatcher) run() {
	defer close(w.done)
	failing := false
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		ev, ret := w.set.Wait(uint32(xidWaitTimeout / time.Millisecond))
		if failing && (ret == nvml.SUCCESS || ret == nvml.ERROR_TIMEOUT) && w.log != nil {
			failing = false
			w.log.clear("xid:wait") // the next failure is logged again
		}
		switch ret {
		case nvml.SUCCESS:
			w.record(ev)
		case nvml.ERROR_TIMEOUT:
		default:
			// ERROR_GPU_IS_LOST among others: the GPU's own reads fail and
			// say so; the other GPUs' events still come, so keep waiting.
			failing = true
			w.warn("wait", fmt.Sprintf("NVML nvmlEventSetWait: %v", ret), "cannot wait for XID events")
			select {
			case <-w.stop:
				return
			case <-time.After(w.retry):
			}
		}
	}
}

// record keeps one event: its XID on the GPU it names.
func (w *xidWatcher) record(ev nvml.EventData) {
	if ev.EventType&nvml.EventTypeXidCriticalError == 0 {
		return
	}
	i := w.indexOf(ev.Device)
	if i < 0 {
		w.warn("device", "an XID event named no watched GPU", "dropped an XID event", "xid", ev.EventData)
		return
	}
	w.mu.Lock()
	w.last[i] = ev.EventData
	w.count[i]++
	w.mu.Unlock()
	// Once per change of a GPU's XID: a storm of one XID logs one line;
	// the count says how many came.
	w.warn("gpu"+strconv.Itoa(i), strconv.FormatUint(ev.EventData, 10), "GPU XID error", "gpu", i, "xid", ev.EventData)
}

// indexOf finds the GPU an event names: by handle (NVML hands back the
// handle it was registered with), else by UUID.
func (w *xidWatcher) indexOf(d nvml.Device) int {
	if d == nil {
		return -1
	}
	for i, g := range w.gpus {
		if g != nil && g == d {
			return i
		}
	}
	uuid, ret := d.GetUUID()
	if ret != nvml.SUCCESS {
		return -1
	}
	for i, g := range w.gpus {
		if g == nil {
			continue
		}
		if u, ret := g.GetUUID(); ret == nvml.SUCCESS && u == uuid {
			return i
		}
	}
	return -1
}

func (w *xidWatcher) warn(key, reason, msg string, args ...any) {
	if w.log != nil {
		w.log.warnOnce("xid:"+key, reason, msg, args...)
	}
}

// read returns the last XID and the XID count of GPU i; ok is false when
// the GPU is not watched.
func (w *xidWatcher) read(i int) (last, count uint64, ok bool) {
	if i < 0 || i >= len(w.gpus) || w.gpus[i] == nil {
		return 0, 0, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[i], w.count[i], true
}

// Close stops the goroutine, then frees the event set; it is bounded by
// one wait timeout.
func (w *xidWatcher) Close() error {
	select {
	case <-w.stop:
		return nil
	default:
	}
	close(w.stop)
	<-w.done
	if ret := w.set.Free(); ret != nvml.SUCCESS {
		return fmt.Errorf("cannot free the NVML event set: %v", ret)
	}
	return nil
}

// startXIDWatcher creates an event set and registers every GPU for XID
// events. A GPU whose registration fails (NOT_SUPPORTED on some vGPU and
// MIG setups, NO_PERMISSION) is left out with the reason, per index in
// why; when the set cannot be created at all, no watcher starts and
// every GPU has that reason.
func startXIDWatcher(lib nvml.Interface, devs []nvml.Device, has func(string) bool, log *onceLogger) (*xidWatcher, []string) {
	why := make([]string, len(devs))
	for _, sym := range xidSymbols {
		if !has(sym) {
			for i := range why {
				why[i] = "this driver's NVML has no " + sym
			}
			return nil, why
		}
	}
	set, ret := lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		for i := range why {
			why[i] = fmt.Sprintf("NVML nvmlEventSetCreate: %v", ret)
		}
		return nil, why
	}
	gpus := make([]nvml.Device, len(devs))
	n := 0
	for i, d := range devs {
		if ret := d.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
			why[i] = fmt.Sprintf("NVML nvmlDeviceRegisterEvents(XidCriticalError) on GPU %d: %v", i, ret)
			continue
		}
		gpus[i] = d
		n++
	}
	if n == 0 {
		set.Free()
		return nil, why
	}
	return newXIDWatcher(set, gpus, xidWaitTimeout, log), why
}
