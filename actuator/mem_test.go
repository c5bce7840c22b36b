package actuator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// memMover keeps layouts and component bytes in memory: the mover contract
// with nothing behind it, to drive the engine's logic in tests. Copies
// finish at once; mutating calls are counted so a test can prove a dry run
// made none.
type memMover struct {
	mu       sync.Mutex
	devs     []Device
	layouts  map[string]*Layout
	data     map[string][]byte // device|file|mirror|component → bytes
	calls    map[string]int
	commits  map[string]int // file#mirror.comp@gen → commits
	corrupt  int            // the next n copies are corrupt
	failNext map[string]error
	// copyPolls makes copies asynchronous: a copy is done at its
	// copyPolls+1-th call
	copyPolls int
	polls     map[string]int
	// paused holds the copies (key of the destination) paused by Pause;
	// stepsWhilePaused counts Copy and Verify calls made on one anyway
	paused           map[string]bool
	stepsWhilePaused int
	// restripe makes it a Restriper. A mirror's bytes are its components'
	// bytes in order; a restripe deals them into as many near-equal
	// pieces as it has new components. tags name the data of a
	// restriped mirror (file#mirror → its key suffix), oldTags the
	// suffix of the mirror a committed restripe replaced, until cleaned.
	restripe bool
	tags     map[string]string
	oldTags  map[string]string
}

var _ Pauser = (*memMover)(nil)

func (m *memMover) Pause(_ context.Context, _ string, mv models.Move, paused bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.key(mv.To, mv.File, mv.Mirror, mv.Component)
	if paused {
		m.calls["pause"]++
		m.paused[k] = true
	} else {
		m.calls["resume"]++
		delete(m.paused, k)
	}
	return nil
}

func newMem() *memMover {
	return &memMover{layouts: map[string]*Layout{}, data: map[string][]byte{}, calls: map[string]int{}, commits: map[string]int{}, failNext: map[string]error{}, polls: map[string]int{}, paused: map[string]bool{},
		tags: map[string]string{}, oldTags: map[string]string{}}
}

func (m *memMover) key(dev, file string, mi, ci int) string {
	return keyTag(dev, file+m.tags[fmt.Sprintf("%s#%d", file, mi)], mi, ci)
}

func keyTag(dev, fileTag string, mi, ci int) string {
	return fmt.Sprintf("%s|%s|%d|%d", dev, fileTag, mi, ci)
}

// addFile lays a file out: one mirror, one component per device listed.
func (m *memMover) addFile(name string, size int64, devs ...string) {
	l := &Layout{File: name, Generation: 1, Mirrors: [][]Component{{}}}
	for i, d := range devs {
		l.Mirrors[0] = append(l.Mirrors[0], Component{Device: d, Handle: fmt.Sprintf("fh-%s-%d", name, i), Bytes: size})
		m.data[m.key(d, name, 0, i)] = []byte(fmt.Sprintf("%s/%d/%d", name, i, size))
		for j := range m.devs {
			if m.devs[j].ID == d {
				m.devs[j].UsedBytes += size
			}
		}
	}
	m.layouts[name] = l
}

func (m *memMover) Capabilities() Capabilities {
	return Capabilities{Name: "mem", SetState: true, Restripe: m.restripe}
}

var _ Restriper = (*memMover)(nil)

// restripeTag is the key suffix of the new components of restripe mv.
func restripeTag(mv models.Move) string { return fmt.Sprintf("~r%d", mv.Generation+1) }

// mirrorBytes is a mirror's bytes read through the components on devs
// (keyed with tag).
func (m *memMover) mirrorBytes(devs []string, file, tag string, mi int) ([]byte, bool) {
	var out []byte
	for i, d := range devs {
		b, ok := m.data[keyTag(d, file+tag, mi, i)]
		if !ok {
			return nil, false
		}
		out = append(out, b...)
	}
	return out, true
}

// counted counts a call of step and returns the failure set for it.
func (m *memMover) counted(step string) error {
	m.calls[step]++
	return m.fail(step)
}

func (m *memMover) CopyRestripe(_ context.Context, r CopyRequest) (Progress, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.counted("copy"); err != nil {
		return Progress{}, err
	}
	mv := r.Move
	rs := mv.Restripe
	all, ok := m.mirrorBytes(rs.From, mv.File, m.tags[fmt.Sprintf("%s#%d", mv.File, mv.Mirror)], mv.Mirror)
	if !ok {
		return Progress{}, Permanent(fmt.Errorf("%s#%d: a component is missing", mv.File, mv.Mirror))
	}
	w := len(rs.To)
	for j, d := range rs.To {
		piece := append([]byte(nil), all[j*len(all)/w:(j+1)*len(all)/w]...)
		if m.corrupt > 0 {
			m.corrupt--
			piece = append(piece, 'X')
		}
		m.data[keyTag(d, mv.File+restripeTag(mv), mv.Mirror, j)] = piece
	}
	return Progress{Done: true, Bytes: mv.Bytes}, nil
}

func (m *memMover) VerifyRestripe(_ context.Context, mv models.Move) (VerifyResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["verify"]++
	a, _ := m.mirrorBytes(mv.Restripe.From, mv.File, m.tags[fmt.Sprintf("%s#%d", mv.File, mv.Mirror)], mv.Mirror)
	b, ok := m.mirrorBytes(mv.Restripe.To, mv.File, restripeTag(mv), mv.Mirror)
	if !ok {
		return VerifyResult{Done: true, Checksum: sum(a), CopyChecksum: "missing"}, nil
	}
	return VerifyResult{Done: true, Match: sum(a) == sum(b), Checksum: sum(a), CopyChecksum: sum(b)}, nil
}

func devicesOf(cs []Component) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Device
	}
	return out
}

func (m *memMover) CommitRestripe(_ context.Context, mv models.Move, _ uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.counted("commit"); err != nil {
		return err
	}
	l := m.layouts[mv.File]
	if l.Generation != mv.Generation || !sameDevices(devicesOf(l.Mirrors[mv.Mirror]), mv.Restripe.From) {
		return ErrGenerationChanged
	}
	tag := restripeTag(mv)
	var cs []Component
	for j, d := range mv.Restripe.To {
		cs = append(cs, Component{Device: d, Handle: fmt.Sprintf("fh-%s-g%d-%d", mv.File, mv.Generation+1, j), Bytes: int64(len(m.data[keyTag(d, mv.File+tag, mv.Mirror, j)]))})
	}
	l.Mirrors[mv.Mirror] = cs
	l.Generation++
	k := fmt.Sprintf("%s#%d", mv.File, mv.Mirror)
	m.oldTags[k+tag] = m.tags[k]
	m.tags[k] = tag
	m.commits[fmt.Sprintf("%s@%d", k, mv.Generation)]++
	return nil
}

func (m *memMover) CleanupRestripe(_ context.Context, mv models.Move) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["cleanup"]++
	k := fmt.Sprintf("%s#%d", mv.File, mv.Mirror)
	old, ok := m.oldTags[k+restripeTag(mv)]
	if !ok {
		return nil // cleaned
	}
	for i, d := range mv.Restripe.From {
		delete(m.data, keyTag(d, mv.File+old, mv.Mirror, i))
	}
	delete(m.oldTags, k+restripeTag(mv))
	return nil
}

func (m *memMover) AbortRestripe(_ context.Context, mv models.Move) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["abort"]++
	if m.tags[fmt.Sprintf("%s#%d", mv.File, mv.Mirror)] == restripeTag(mv) {
		return fmt.Errorf("%s#%d: the restripe is committed", mv.File, mv.Mirror)
	}
	for j, d := range mv.Restripe.To {
		delete(m.data, keyTag(d, mv.File+restripeTag(mv), mv.Mirror, j))
	}
	return nil
}

func (m *memMover) Devices(context.Context) ([]Device, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Device(nil), m.devs...), nil
}

func (m *memMover) Stripes(_ context.Context, dev string) ([]StripeRef, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []StripeRef
	names := make([]string, 0, len(m.layouts))
	for n := range m.layouts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		l := m.layouts[n]
		for mi, cs := range l.Mirrors {
			for ci, c := range cs {
				if c.Device == dev {
					out = append(out, StripeRef{File: n, Mirror: mi, Component: ci, Device: dev, Handle: c.Handle, Bytes: c.Bytes})
				}
			}
		}
	}
	return out, nil
}

func (m *memMover) Locate(_ context.Context, file string) (Layout, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.layouts[file]
	if !ok {
		return Layout{}, fmt.Errorf("%s: %w", file, ErrNotFound)
	}
	c := *l
	c.Mirrors = make([][]Component, len(l.Mirrors))
	for i := range l.Mirrors {
		c.Mirrors[i] = append([]Component(nil), l.Mirrors[i]...)
	}
	return c, nil
}

func (m *memMover) fail(step string) error {
	if err, ok := m.failNext[step]; ok {
		delete(m.failNext, step)
		return err
	}
	return nil
}

func (m *memMover) Copy(_ context.Context, r CopyRequest) (Progress, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["copy"]++
	if err := m.fail("copy"); err != nil {
		return Progress{}, err
	}
	mv := r.Move
	if m.paused[m.key(mv.To, mv.File, mv.Mirror, mv.Component)] {
		m.stepsWhilePaused++
		return Progress{}, nil
	}
	if m.copyPolls > 0 {
		k := m.key(mv.To, mv.File, mv.Mirror, mv.Component)
		if m.polls[k] < m.copyPolls {
			m.polls[k]++
			return Progress{Bytes: mv.Bytes / 2}, nil
		}
		delete(m.polls, k)
	}
	b := append([]byte(nil), m.data[m.key(mv.From, mv.File, mv.Mirror, mv.Component)]...)
	if m.corrupt > 0 {
		m.corrupt--
		b = append(b, 'X')
	}
	m.data[m.key(mv.To, mv.File, mv.Mirror, mv.Component)] = b
	return Progress{Done: true, Bytes: mv.Bytes}, nil
}

func sum(b []byte) string { s := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(s[:]) }

func (m *memMover) Verify(_ context.Context, mv models.Move) (VerifyResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["verify"]++
	if m.paused[m.key(mv.To, mv.File, mv.Mirror, mv.Component)] {
		m.stepsWhilePaused++
		return VerifyResult{}, nil
	}
	a, b := m.data[m.key(mv.From, mv.File, mv.Mirror, mv.Component)], m.data[m.key(mv.To, mv.File, mv.Mirror, mv.Component)]
	return VerifyResult{Done: true, Match: sum(a) == sum(b), Checksum: sum(a), CopyChecksum: sum(b)}, nil
}

func (m *memMover) Commit(_ context.Context, mv models.Move, _ uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["commit"]++
	if err := m.fail("commit"); err != nil {
		return err
	}
	l := m.layouts[mv.File]
	c := &l.Mirrors[mv.Mirror][mv.Component]
	if l.Generation != mv.Generation || c.Device != mv.From {
		return ErrGenerationChanged
	}
	c.Device = mv.To
	c.Handle += "'"
	l.Generation++
	m.commits[fmt.Sprintf("%s#%d.%d@%d", mv.File, mv.Mirror, mv.Component, mv.Generation)]++
	return nil
}

func (m *memMover) Cleanup(_ context.Context, mv models.Move) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["cleanup"]++
	delete(m.data, m.key(mv.From, mv.File, mv.Mirror, mv.Component))
	return nil
}

func (m *memMover) Abort(_ context.Context, mv models.Move) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["abort"]++
	delete(m.data, m.key(mv.To, mv.File, mv.Mirror, mv.Component))
	return nil
}

func (m *memMover) SetState(_ context.Context, s models.Subject, st DeviceState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["state"]++
	for i := range m.devs {
		if m.devs[i].ID == s.ID {
			m.devs[i].State = st
		}
	}
	return nil
}

func (m *memMover) mutations() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, v := range m.calls {
		n += v
	}
	return n
}

// rig is an engine on a memMover and a real journal, on a simulated clock.
type rig struct {
	t   *testing.T
	e   *Engine
	m   *memMover
	j   *storage.Journal
	now time.Time
	// measure answers the engine's effect queries (nil: no numbers)
	measure func(expr string, at time.Time) (float64, bool)
}

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// cluster4 is 2 data servers × 2 devices plus a spare on ds0.
func cluster4() *memMover {
	m := newMem()
	for i := range 4 {
		m.devs = append(m.devs, Device{ID: fmt.Sprintf("d%d", i), Name: fmt.Sprintf("ds%d/nvme%dn1", i/2, i%2), DS: fmt.Sprintf("ds%d", i/2),
			DSAddr: fmt.Sprintf("10.0.0.%d:2049", i/2), Pool: "fast", State: StateOnline, CapacityBytes: 1e12})
	}
	m.devs = append(m.devs, Device{ID: "sp0", Name: "ds0/nvme9n1", DS: "ds0", Pool: "fast", State: StateSpare, CapacityBytes: 1e12})
	return m
}

// newRig starts an engine on m; with sets options newRig does not.
func newRig(t *testing.T, m *memMover, cfg Config, dir string, with ...func(*Options)) *rig {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	j, err := storage.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, m: m, j: j, now: t0}
	o := Options{
		Config: cfg, Mover: m, Journal: j, Inline: true,
		Load: func() ([]models.Action, error) { return j.Actions(storage.ActionFilter{}) },
		Measure: func(_ context.Context, expr string, at time.Time) (float64, bool, error) {
			if r.measure == nil {
				return 0, false, nil
			}
			v, ok := r.measure(expr, at)
			return v, ok, nil
		},
	}
	for _, f := range with {
		f(&o)
	}
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.e = e
	t.Cleanup(func() { e.Stop(context.Background()); j.Close() })
	return r
}

// heat feeds one interval of LAYOUTSTATS: bytes/s per (device, handle).
func (r *rig) heat(rates map[[2]string]float64) {
	var ds []models.StripeDelta
	keys := make([][2]string, 0, len(rates))
	for k := range rates {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		ds = append(ds, models.StripeDelta{StripeKey: models.StripeKey{Client: "gpu00", DeviceID: k[0], FileHandle: k[1]},
			Duration: 10 * time.Second, Read: models.StripeIO{BytesCompleted: uint64(rates[k] * 10)}})
	}
	r.e.ObserveStripes(ds)
}

func (r *rig) tick(fs ...models.Finding) {
	r.t.Helper()
	if err := r.e.Reconcile(context.Background(), r.now, fs); err != nil {
		r.t.Logf("tick %s: %v", r.now.Format(time.TimeOnly), err)
	}
	r.now = r.now.Add(10 * time.Second)
}

func (r *rig) plans() []models.Action {
	as, err := r.j.Actions(storage.ActionFilter{Plans: true})
	if err != nil {
		r.t.Fatal(err)
	}
	return as
}

func (r *rig) moves() []models.Action {
	as, err := r.j.Actions(storage.ActionFilter{Kind: models.ActionMoveStripe})
	if err != nil {
		r.t.Fatal(err)
	}
	return as
}

func hotspot(dev string, start time.Time) models.Finding {
	return models.Finding{ID: "hotspot:device:" + dev, Kind: "hotspot", Subject: models.Subject{Kind: models.SubjectDevice, ID: dev},
		Severity: models.SeverityWarning, Start: start, LastSeen: start, Summary: "device " + dev + " is hot"}
}

func testConfig(mode models.ActionMode) Config {
	c := DefaultConfig()
	c.Driver = DriverFiles // a driver, so approve and auto validate; the rig passes the mover itself
	c.Files.Exports = []DeviceSpec{{Device: "aa", DS: "x", Path: "/x"}}
	c.Files.LayoutCommand = []string{"true"}
	c.Files.LayoutDir = "/x/layouts"
	c.Mode = mode
	c.PlanEvery = Duration(10 * time.Second)
	c.Move.Grace = Duration(20 * time.Second)
	c.Verify.Window = Duration(30 * time.Second)
	c.Budgets.Cooldown = Duration(10 * time.Minute)
	return c
}
