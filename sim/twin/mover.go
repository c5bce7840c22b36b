package twin

import (
	"errors"
	"fmt"
)

// What a real MDS's data mover offers, in the twin: list devices and where
// a file's components are, copy a component to a new device while the
// layout still points at the old one, read both copies back to compare
// them, switch the layout only if its generation is unchanged, free the old
// copy later, or abort (free the new copy). Copies and read-backs are
// physical work: they take device, NIC and port capacity from user I/O in
// later ticks (docs/scenarios.md, "Actions").

// ErrStale is returned by CommitCopy when the file's layout changed since
// the copy was planned (its generation moved on or the component is no
// longer where the copy started).
var ErrStale = errors.New("layout generation changed")

// ErrUnknown is returned for a file or device the twin does not have.
var ErrUnknown = errors.New("not found")

// Migration phases of a held copy (one the caller commits).
const (
	migCopying   = iota // bytes flow source → destination
	migVerifying        // both copies are read back
	migCopied           // copy verified, waiting for the commit
	migCommitted        // layout points at the destination; the source still holds its bytes
	migCleaned          // the source's bytes are freed
	migAborted          // the destination's bytes are freed
)

// DeviceInfo is one device as an MDS knows it.
type DeviceInfo struct {
	ID, Name, DS, DSAddr, Pool string
	// State is online, draining, spare, failed or offline.
	State                    string
	CapacityBytes, UsedBytes float64
	// ReadBytesPerSec is the drive's read bandwidth; NICBytesPerSec its
	// server's NIC, one direction.
	ReadBytesPerSec, NICBytesPerSec float64
}

// ComponentInfo is one component of a file.
type ComponentInfo struct {
	File      string
	Component int
	DeviceID  string
	// Handle is the component's file handle as LAYOUTSTATS reports carry it.
	Handle string
	Bytes  float64
	// Busy marks a component whose file is being written or that is moving.
	Busy bool
}

// Devices lists every device, active and spare.
func (t *Twin) Devices() []DeviceInfo {
	out := make([]DeviceInfo, len(t.dev))
	for d := range t.dev {
		dv := &t.dev[d]
		n := &t.ds[dv.ds]
		st := "online"
		switch {
		case dv.failed:
			st = "failed"
		case dv.retired || n.down:
			st = "offline"
		case dv.spare:
			st = "spare"
		case dv.draining:
			st = "draining"
		}
		g := t.sc.Topology.DataServers[n.group]
		out[d] = DeviceInfo{
			ID: deviceID(int32(d)), Name: dv.name, DS: n.name, DSAddr: n.addr + ":2049", Pool: t.pools[dv.pool].name,
			State: st, CapacityBytes: dv.capBytes, UsedBytes: dv.used,
			ReadBytesPerSec: dv.readBW, NICBytesPerSec: g.NICGbps * 1e9 / 8,
		}
	}
	return out
}

func (t *Twin) deviceByID(id string) int32 {
	if n := t.DeviceName(id); n != "" {
		return t.findDevice(n)
	}
	return -1
}

func (t *Twin) handle(s int32) string {
	st := &t.stripes[s]
	return hexID(0x01000700, uint32(st.file), uint32(st.idx), st.gen)
}

// holds reports whether stripe s is a component of its file's layout
// with data (a dataset file's always has).
func (t *Twin) holds(s int32) bool {
	st := &t.stripes[s]
	return t.live(s) && (st.bytes > 0 || t.files[st.file].dataset >= 0)
}

// DeviceComponents lists the components device id holds (empty checkpoint
// slots aside).
func (t *Twin) DeviceComponents(id string) ([]ComponentInfo, error) {
	d := t.deviceByID(id)
	if d < 0 {
		return nil, fmt.Errorf("device %q: %w", id, ErrUnknown)
	}
	var out []ComponentInfo
	for s := range t.stripes {
		st := &t.stripes[s]
		if st.dev != d || !t.holds(int32(s)) {
			continue
		}
		out = append(out, ComponentInfo{
			File: t.files[st.file].name, Component: int(st.idx), DeviceID: id, Handle: t.handle(int32(s)), Bytes: st.bytes,
			Busy: st.moving || t.fileBeingWritten(st.file),
		})
	}
	return out, nil
}

func (t *Twin) findFile(name string) int32 {
	for f := range t.files {
		if t.files[f].name == name {
			return int32(f)
		}
	}
	return -1
}

// FileLayout returns a file's generation and its components in order.
func (t *Twin) FileLayout(name string) (uint32, []ComponentInfo, error) {
	f := t.findFile(name)
	if f < 0 {
		return 0, nil, fmt.Errorf("file %q: %w", name, ErrUnknown)
	}
	fl := &t.files[f]
	out := make([]ComponentInfo, 0, fl.n)
	for s := fl.first; s < fl.first+fl.n; s++ {
		st := &t.stripes[s]
		out = append(out, ComponentInfo{File: name, Component: int(st.idx), DeviceID: deviceID(st.dev), Handle: t.handle(s), Bytes: st.bytes,
			Busy: st.moving || t.fileBeingWritten(f)})
	}
	return fl.gen, out, nil
}

// component resolves file and component index to a stripe.
func (t *Twin) component(file string, k int) (int32, error) {
	f := t.findFile(file)
	if f < 0 {
		return -1, fmt.Errorf("file %q: %w", file, ErrUnknown)
	}
	if k < 0 || k >= int(t.files[f].n) {
		return -1, fmt.Errorf("file %q has no component %d: %w", file, k, ErrUnknown)
	}
	return t.files[f].first + int32(k), nil
}

// heldMigration returns the open held copy of stripe s to dst, or -1.
func (t *Twin) heldMigration(s, dst int32) int32 {
	for i := len(t.migs) - 1; i >= 0; i-- {
		m := &t.migs[i]
		if m.hold && m.rs == 0 && m.stripe == s && m.dst == dst && m.phase != migAborted && m.phase != migCleaned {
			return int32(i)
		}
	}
	return -1
}

// StartCopy copies component k of file to device toID, paced at rate
// bytes/s (0: the scenario's per-copy speed), unless that copy exists; it
// returns the bytes copied and whether the copy (not yet its read-back) is
// complete. The layout keeps pointing at the source.
func (t *Twin) StartCopy(file string, k int, toID string, rate float64, urgent bool, id string) (float64, bool, error) {
	s, err := t.component(file, k)
	if err != nil {
		return 0, false, err
	}
	dst := t.deviceByID(toID)
	if dst < 0 {
		return 0, false, fmt.Errorf("device %q: %w", toID, ErrUnknown)
	}
	if mi := t.heldMigration(s, dst); mi >= 0 {
		m := &t.migs[mi]
		return m.moved, m.phase != migCopying, nil
	}
	if err := t.queueMove(s, dst, id); err != nil {
		return 0, false, err
	}
	m := &t.migs[len(t.migs)-1]
	m.hold, m.rate, m.urgent = true, rate, urgent
	return 0, false, nil
}

// VerifyCopy reads both copies of a finished copy back (the source and the
// new copy each read once more, at the copy's pace) and reports when that
// is done. The twin corrupts nothing, so a finished read-back matches.
func (t *Twin) VerifyCopy(file string, k int, toID string) (done bool, err error) {
	s, err := t.component(file, k)
	if err != nil {
		return false, err
	}
	mi := t.heldMigration(s, t.deviceByID(toID))
	if mi < 0 {
		return false, fmt.Errorf("no copy of %s#%d to %s: %w", file, k, toID, ErrUnknown)
	}
	m := &t.migs[mi]
	switch m.phase {
	case migCopying:
		return false, fmt.Errorf("the copy of %s#%d is not complete", file, k)
	case migVerifying:
		return false, nil
	}
	return true, nil
}

// PauseCopy pauses (paused) or resumes the copy or read-back of component
// k of file to toID: a paused copy keeps its place in the mover's queue
// and moves no bytes, as a real mover's paused job. An unknown or finished
// copy is left alone.
func (t *Twin) PauseCopy(file string, k int, toID string, paused bool) error {
	s, err := t.component(file, k)
	if err != nil {
		return err
	}
	if mi := t.heldMigration(s, t.deviceByID(toID)); mi >= 0 {
		t.migs[mi].paused = paused
	}
	return nil
}

// CommitCopy switches the layout of component k from fromID to toID if the
// file's generation is still gen and the copy was read back; else ErrStale.
func (t *Twin) CommitCopy(file string, k int, fromID, toID string, gen uint32) error {
	s, err := t.component(file, k)
	if err != nil {
		return err
	}
	st := &t.stripes[s]
	fl := &t.files[st.file]
	src, dst := t.deviceByID(fromID), t.deviceByID(toID)
	if st.dev == dst {
		return nil // already committed
	}
	if fl.gen != gen || st.dev != src {
		return fmt.Errorf("cannot commit %s#%d: generation %d, component on %s: %w", file, k, fl.gen, t.dev[st.dev].name, ErrStale)
	}
	mi := t.heldMigration(s, dst)
	if mi < 0 || t.migs[mi].phase != migCopied {
		return fmt.Errorf("cannot commit %s#%d: no verified copy on %s", file, k, toID)
	}
	m := &t.migs[mi]
	t.dev[dst].used += st.bytes - m.moved // bytes written to the file while it copied
	st.dev = dst
	st.gen++
	st.moving = false
	fl.gen++
	m.phase = migCommitted
	return nil
}

// CleanupCopy frees the old copy of a committed move.
func (t *Twin) CleanupCopy(file string, k int, fromID, toID string) error {
	s, err := t.component(file, k)
	if err != nil {
		return err
	}
	mi := t.heldMigration(s, t.deviceByID(toID))
	if mi < 0 {
		return nil // cleaned already
	}
	m := &t.migs[mi]
	if m.phase != migCommitted {
		return fmt.Errorf("cannot clean up %s#%d: the move is not committed", file, k)
	}
	t.dev[m.src].used = max(0, t.dev[m.src].used-t.stripes[s].bytes)
	m.phase = migCleaned
	m.done = true
	t.maybeRetire(m.src)
	return nil
}

// AbortCopy drops an uncommitted copy and frees what it wrote.
func (t *Twin) AbortCopy(file string, k int, toID string) error {
	s, err := t.component(file, k)
	if err != nil {
		return err
	}
	mi := t.heldMigration(s, t.deviceByID(toID))
	if mi < 0 {
		return nil
	}
	m := &t.migs[mi]
	if m.phase == migCommitted {
		return fmt.Errorf("cannot abort %s#%d: the layout already switched", file, k)
	}
	t.dev[m.dst].used = max(0, t.dev[m.dst].used-m.moved)
	m.phase, m.active, m.done = migAborted, false, true
	t.stripes[s].moving = false
	t.dropFromQueue(mi)
	return nil
}

func (t *Twin) dropFromQueue(mi int32) {
	keep := t.migQueue[:0]
	for _, x := range t.migQueue {
		if x != mi {
			keep = append(keep, x)
		}
	}
	t.migQueue = keep
}

// SetDeviceState brings a spare online (it joins its server's pool) or
// drains a device (no new data; retired once empty).
func (t *Twin) SetDeviceState(id, state string) error {
	d := t.deviceByID(id)
	if d < 0 {
		return fmt.Errorf("device %q: %w", id, ErrUnknown)
	}
	dv := &t.dev[d]
	switch state {
	case "online":
		if dv.spare {
			dv.spare = false
			p := &t.pools[dv.pool]
			p.devices = append(p.devices, d)
		}
		dv.draining, dv.retireWhenEmpty = false, false
	case "draining":
		if dv.spare || dv.retired {
			return fmt.Errorf("device %s is a spare or retired: nothing to drain", dv.name)
		}
		dv.draining, dv.retireWhenEmpty = true, true
		t.maybeRetire(d)
	default:
		return fmt.Errorf("device state %q: want online or draining", state)
	}
	return nil
}

// MigrationBytes returns the bytes copies and read-backs have moved so far,
// for urgent actions and the others.
func (t *Twin) MigrationBytes() (urgent, other float64) { return t.migBytes[1], t.migBytes[0] }

// StripesOn counts the components with data on the named device.
func (t *Twin) StripesOn(name string) int {
	d := t.findDevice(name)
	n := 0
	for s := range t.stripes {
		if t.stripes[s].dev == d && t.holds(int32(s)) {
			n++
		}
	}
	return n
}
