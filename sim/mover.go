package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim/twin"
)

// twinMover is the twin driver: the mover contract carried out on the
// cluster twin, whose copies and read-backs pay their physical cost (they
// take device, NIC and port capacity from user I/O). The demo and eval
// hand it to the mds through cluster.Runtime.Mover; the config selects it
// with actuators.driver: twin.
type twinMover struct {
	tw *twin.Twin
	mu *sync.Mutex // the demo's lock on the twin
}

var (
	_ actuator.Mover     = (*twinMover)(nil)
	_ actuator.Pauser    = (*twinMover)(nil)
	_ actuator.Restriper = (*twinMover)(nil)
)

func (m *twinMover) Capabilities() actuator.Capabilities {
	return actuator.Capabilities{Name: "twin", Simulated: true, Async: true, SetState: true, Restripe: true}
}

// twinErr maps the twin's errors to the contract's.
func twinErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, twin.ErrStale):
		return fmt.Errorf("%w: %v", actuator.ErrGenerationChanged, err)
	case errors.Is(err, twin.ErrUnknown):
		return fmt.Errorf("%w: %v", actuator.ErrNotFound, err)
	}
	return err
}

func (m *twinMover) Devices(context.Context) ([]actuator.Device, error) {
	m.mu.Lock()
	ds := m.tw.Devices()
	m.mu.Unlock()
	out := make([]actuator.Device, len(ds))
	for i, d := range ds {
		out[i] = actuator.Device{
			ID: d.ID, Name: d.Name, DS: d.DS, DSAddr: d.DSAddr, Pool: d.Pool, State: actuator.DeviceState(d.State),
			CapacityBytes: int64(d.CapacityBytes), UsedBytes: int64(d.UsedBytes),
			BandwidthBytes: d.ReadBytesPerSec, DSBandwidthBytes: d.NICBytesPerSec,
		}
	}
	return out, nil
}

func (m *twinMover) Stripes(_ context.Context, device string) ([]actuator.StripeRef, error) {
	m.mu.Lock()
	cs, err := m.tw.DeviceComponents(device)
	m.mu.Unlock()
	if err != nil {
		return nil, twinErr(err)
	}
	out := make([]actuator.StripeRef, len(cs))
	for i, c := range cs {
		out[i] = actuator.StripeRef{File: c.File, Component: c.Component, Device: c.DeviceID, Handle: c.Handle, Bytes: int64(c.Bytes), Busy: c.Busy}
	}
	return out, nil
}

func (m *twinMover) Locate(_ context.Context, file string) (actuator.Layout, error) {
	m.mu.Lock()
	gen, cs, err := m.tw.FileLayout(file)
	m.mu.Unlock()
	if err != nil {
		return actuator.Layout{}, twinErr(err)
	}
	comps := make([]actuator.Component, len(cs))
	for i, c := range cs {
		comps[i] = actuator.Component{Device: c.DeviceID, Handle: c.Handle, Bytes: int64(c.Bytes)}
	}
	return actuator.Layout{File: file, Generation: uint64(gen), Mirrors: [][]actuator.Component{comps}}, nil
}

func (m *twinMover) Copy(_ context.Context, r actuator.CopyRequest) (actuator.Progress, error) {
	m.mu.Lock()
	moved, done, err := m.tw.StartCopy(r.Move.File, r.Move.Component, r.Move.To, r.RateLimit, r.Urgent, r.ID)
	m.mu.Unlock()
	return actuator.Progress{Done: done, Bytes: int64(moved)}, twinErr(err)
}

func (m *twinMover) Pause(_ context.Context, _ string, mv models.Move, paused bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mv.Restripe != nil {
		return twinErr(m.tw.PauseRestripe(mv.File, mv.Restripe.To, paused))
	}
	return twinErr(m.tw.PauseCopy(mv.File, mv.Component, mv.To, paused))
}

// The twin has one mirror per file: a restripe of another is unknown.
func restripeMirror(mv models.Move) error {
	if mv.Restripe == nil || mv.Mirror != 0 {
		return fmt.Errorf("%s#%d is not a restripe of a mirror the twin has: %w", mv.File, mv.Mirror, actuator.ErrNotFound)
	}
	return nil
}

func (m *twinMover) CopyRestripe(_ context.Context, r actuator.CopyRequest) (actuator.Progress, error) {
	mv := r.Move
	if err := restripeMirror(mv); err != nil {
		return actuator.Progress{}, err
	}
	m.mu.Lock()
	moved, done, err := m.tw.StartRestripe(mv.File, uint32(mv.Generation), mv.Restripe.From, mv.Restripe.To, r.RateLimit, r.Urgent, r.ID)
	m.mu.Unlock()
	return actuator.Progress{Done: done, Bytes: int64(moved)}, twinErr(err)
}

func (m *twinMover) VerifyRestripe(_ context.Context, mv models.Move) (actuator.VerifyResult, error) {
	if err := restripeMirror(mv); err != nil {
		return actuator.VerifyResult{}, err
	}
	m.mu.Lock()
	done, err := m.tw.VerifyRestripe(mv.File, mv.Restripe.To)
	m.mu.Unlock()
	if err != nil || !done {
		return actuator.VerifyResult{}, twinErr(err)
	}
	// as for a move: the twin models the read-back's cost, not the bytes
	sum := fmt.Sprintf("simulated:%s@%d", mv.File, mv.Generation)
	return actuator.VerifyResult{Done: true, Match: true, Checksum: sum, CopyChecksum: sum}, nil
}

func (m *twinMover) CommitRestripe(_ context.Context, mv models.Move, _ uint64) error {
	if err := restripeMirror(mv); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return twinErr(m.tw.CommitRestripe(mv.File, mv.Restripe.From, mv.Restripe.To, uint32(mv.Generation)))
}

func (m *twinMover) CleanupRestripe(_ context.Context, mv models.Move) error {
	if err := restripeMirror(mv); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return twinErr(m.tw.CleanupRestripe(mv.File, mv.Restripe.To))
}

func (m *twinMover) AbortRestripe(_ context.Context, mv models.Move) error {
	if err := restripeMirror(mv); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return twinErr(m.tw.AbortRestripe(mv.File, mv.Restripe.To))
}

func (m *twinMover) Verify(_ context.Context, mv models.Move) (actuator.VerifyResult, error) {
	m.mu.Lock()
	done, err := m.tw.VerifyCopy(mv.File, mv.Component, mv.To)
	m.mu.Unlock()
	if err != nil || !done {
		return actuator.VerifyResult{}, twinErr(err)
	}
	// The twin models the read-back's cost, not the bytes: no copy is
	// ever corrupt in it, so both sides carry the same (simulated) sum.
	sum := fmt.Sprintf("simulated:%s#%d@%d", mv.File, mv.Component, mv.Generation)
	return actuator.VerifyResult{Done: true, Match: true, Checksum: sum, CopyChecksum: sum}, nil
}

func (m *twinMover) Commit(_ context.Context, mv models.Move, _ uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return twinErr(m.tw.CommitCopy(mv.File, mv.Component, mv.From, mv.To, uint32(mv.Generation)))
}

func (m *twinMover) Cleanup(_ context.Context, mv models.Move) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return twinErr(m.tw.CleanupCopy(mv.File, mv.Component, mv.From, mv.To))
}

func (m *twinMover) Abort(_ context.Context, mv models.Move) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return twinErr(m.tw.AbortCopy(mv.File, mv.Component, mv.To))
}

func (m *twinMover) SetState(_ context.Context, s models.Subject, st actuator.DeviceState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch s.Kind {
	case models.SubjectDevice:
		return twinErr(m.tw.SetDeviceState(s.ID, string(st)))
	case models.SubjectDS:
		var errs []error
		for _, d := range m.tw.Devices() {
			if d.DS == s.ID && d.State != "spare" {
				errs = append(errs, m.tw.SetDeviceState(d.ID, string(st)))
			}
		}
		return errors.Join(errs...)
	}
	return actuator.Permanent(fmt.Errorf("cannot set the state of %s", s))
}
