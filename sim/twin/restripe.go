package twin

import (
	"fmt"
	"strings"
)

// A restripe rewrites a file over more components, as a real MDS's mover
// would: new component files on the new devices are written from the old
// ones while the layout still points at the old ones, both are read back,
// the layout switches to the new width only if its generation is
// unchanged, and the old components are freed later (or the new ones, on
// an abort). The twin reads every file evenly over its components
// (addFileFlows: the flex-files stripe unit deals a file's bytes
// round-robin over them), so the new width changes where its reads land
// from the next tick on (docs/scenarios.md, "Restriping").
//
// The copy is one held migration per new component: new component j is
// written from old component j mod the old width, so every old device is
// read for its share of the file and every new device written for its
// own, through devices, NICs and ports like any copy, paced, paused and
// read back as one.

// restripe is one restripe in the twin.
type restripe struct {
	file     int32
	gen      uint32  // the file's generation it was started on
	to       []int32 // new devices, in component order
	migs     []int32 // one held migration per new component
	phase    int8    // migCopying until committed; then migCommitted, migCleaned, migAborted
	old      []int32 // after the commit: the old components' stripes, until cleaned
	id       string
	rate     float64 // bytes/s cap of each of its copies, 0 = the scenario's
	finished bool
}

// live reports whether stripe s is a component of its file's layout (not
// an old component a restripe replaced).
func (t *Twin) live(s int32) bool {
	fl := &t.files[t.stripes[s].file]
	return s >= fl.first && s < fl.first+fl.n
}

// fileDevices are the devices of f's components, in order.
func (t *Twin) fileDevices(f int32) []int32 {
	fl := &t.files[f]
	out := make([]int32, 0, fl.n)
	for s := fl.first; s < fl.first+fl.n; s++ {
		out = append(out, t.stripes[s].dev)
	}
	return out
}

func sameDevs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// devices resolves device ids.
func (t *Twin) devices(ids []string) ([]int32, error) {
	out := make([]int32, len(ids))
	for i, id := range ids {
		if out[i] = t.deviceByID(id); out[i] < 0 {
			return nil, fmt.Errorf("device %q: %w", id, ErrUnknown)
		}
	}
	return out, nil
}

// openRestripe returns the restripe of f onto to that is not aborted or
// cleaned, or -1.
func (t *Twin) openRestripe(f int32, to []int32) int {
	for i := len(t.restripes) - 1; i >= 0; i-- {
		r := &t.restripes[i]
		if r.file == f && !r.finished && sameDevs(r.to, to) {
			return i
		}
	}
	return -1
}

// restripeOf resolves a restripe request: the file, its new devices and
// the open restripe (-1 none).
func (t *Twin) restripeOf(file string, toIDs []string) (int32, []int32, int, error) {
	f := t.findFile(file)
	if f < 0 {
		return -1, nil, -1, fmt.Errorf("file %q: %w", file, ErrUnknown)
	}
	to, err := t.devices(toIDs)
	if err != nil {
		return -1, nil, -1, err
	}
	return f, to, t.openRestripe(f, to), nil
}

// StartRestripe starts rewriting file, whose components are on fromIDs at
// generation gen, over new components on toIDs (more of them, distinct),
// paced at rate bytes/s for all of them together (0: the scenario's
// per-copy speed each), unless that restripe exists; it returns the bytes
// copied and whether the copy (not yet its read-back) is complete. The
// layout keeps pointing at the old components.
func (t *Twin) StartRestripe(file string, gen uint32, fromIDs, toIDs []string, rate float64, urgent bool, id string) (float64, bool, error) {
	f, to, ri, err := t.restripeOf(file, toIDs)
	if err != nil {
		return 0, false, err
	}
	if ri >= 0 {
		moved, copying := 0.0, false
		for _, mi := range t.restripes[ri].migs {
			moved += t.migs[mi].moved
			copying = copying || t.migs[mi].phase == migCopying
		}
		return moved, !copying, nil
	}
	from, err := t.devices(fromIDs)
	if err != nil {
		return 0, false, err
	}
	fl := &t.files[f]
	if fl.gen != gen || !sameDevs(t.fileDevices(f), from) {
		return 0, false, fmt.Errorf("cannot restripe %s: generation %d (planned on %d), components on %s: %w", file, fl.gen, gen, t.devNames(t.fileDevices(f)), ErrStale)
	}
	if len(to) <= int(fl.n) {
		return 0, false, fmt.Errorf("cannot restripe %s over %d components: it has %d", file, len(to), fl.n)
	}
	if t.fileBeingWritten(f) {
		return 0, false, fmt.Errorf("cannot restripe %s: it is being written", file)
	}
	size := 0.0
	for s := fl.first; s < fl.first+fl.n; s++ {
		if t.stripes[s].moving {
			return 0, false, fmt.Errorf("cannot restripe %s: its component %d is moving", file, t.stripes[s].idx)
		}
		if !t.devAvailable(t.stripes[s].dev) {
			return 0, false, fmt.Errorf("cannot restripe %s: its device %s cannot be read", file, t.dev[t.stripes[s].dev].name)
		}
		size += t.stripes[s].bytes
	}
	per := size / float64(len(to))
	seen := map[int32]bool{}
	for _, d := range to {
		dv := &t.dev[d]
		switch {
		case seen[d]:
			return 0, false, fmt.Errorf("cannot restripe %s: device %s is named twice", file, dv.name)
		case !t.devAvailable(d) || dv.draining || dv.spare:
			return 0, false, fmt.Errorf("cannot restripe %s: device %s cannot take data (failed, retired, draining, spare or its server is down)", file, dv.name)
		case dv.used+per > dv.capBytes:
			return 0, false, fmt.Errorf("cannot restripe %s: device %s has %.0f bytes free; a component needs %.0f", file, dv.name, dv.capBytes-dv.used, per)
		}
		seen[d] = true
	}
	r := restripe{file: f, gen: gen, to: to, phase: migCopying, id: id}
	if rate > 0 {
		// every copy of it may run at once: together at most rate
		r.rate = rate / float64(min(len(to), maxParallelMigrations))
	}
	for j, d := range to {
		s := fl.first + int32(j)%fl.n
		t.migs = append(t.migs, migration{stripe: s, src: t.stripes[s].dev, dst: d, total: per, action: id, hold: true, rate: r.rate, urgent: urgent, rs: int32(len(t.restripes)) + 1})
		mi := int32(len(t.migs) - 1)
		t.migQueue = append(t.migQueue, mi)
		r.migs = append(r.migs, mi)
	}
	for s := fl.first; s < fl.first+fl.n; s++ {
		t.stripes[s].moving = true
	}
	t.restripes = append(t.restripes, r)
	return 0, false, nil
}

func (t *Twin) devNames(ds []int32) string {
	n := make([]string, len(ds))
	for i, d := range ds {
		n[i] = t.dev[d].name
	}
	return strings.Join(n, ",")
}

// VerifyRestripe reports when both sides of a finished restripe copy have
// been read back (the file through its old components and through its
// new ones). The twin corrupts nothing, so a finished read-back matches.
func (t *Twin) VerifyRestripe(file string, toIDs []string) (bool, error) {
	_, _, ri, err := t.restripeOf(file, toIDs)
	if err != nil {
		return false, err
	}
	if ri < 0 {
		return false, fmt.Errorf("no restripe of %s onto %s: %w", file, strings.Join(toIDs, ","), ErrUnknown)
	}
	for _, mi := range t.restripes[ri].migs {
		switch t.migs[mi].phase {
		case migCopying:
			return false, fmt.Errorf("the restripe copy of %s is not complete", file)
		case migVerifying:
			return false, nil
		}
	}
	return true, nil
}

// PauseRestripe pauses or resumes a restripe's copy and read-back.
func (t *Twin) PauseRestripe(file string, toIDs []string, paused bool) error {
	_, _, ri, err := t.restripeOf(file, toIDs)
	if err != nil || ri < 0 {
		return err
	}
	for _, mi := range t.restripes[ri].migs {
		t.migs[mi].paused = paused
	}
	return nil
}

// CommitRestripe switches file's layout from its components on fromIDs
// to new components on toIDs if its generation is still gen and the
// restripe was read back; else ErrStale. The new components are new
// stripes (new file handles, the file's new generation); the old ones
// keep their bytes, outside the layout, until CleanupRestripe.
func (t *Twin) CommitRestripe(file string, fromIDs, toIDs []string, gen uint32) error {
	f, to, ri, err := t.restripeOf(file, toIDs)
	if err != nil {
		return err
	}
	if sameDevs(t.fileDevices(f), to) {
		return nil // already committed
	}
	from, err := t.devices(fromIDs)
	if err != nil {
		return err
	}
	fl := &t.files[f]
	if fl.gen != gen || !sameDevs(t.fileDevices(f), from) {
		return fmt.Errorf("cannot commit the restripe of %s: generation %d, components on %s: %w", file, fl.gen, t.devNames(t.fileDevices(f)), ErrStale)
	}
	if ri < 0 {
		return fmt.Errorf("cannot commit the restripe of %s: no restripe onto %s", file, strings.Join(toIDs, ","))
	}
	r := &t.restripes[ri]
	for _, mi := range r.migs {
		if t.migs[mi].phase != migCopied {
			return fmt.Errorf("cannot commit the restripe of %s: not every new component is read back", file)
		}
	}
	oldN := len(t.stripes)
	first := int32(oldN)
	fl.gen++
	for j, mi := range r.migs {
		m := &t.migs[mi]
		t.dev[m.dst].used += m.total - m.moved
		t.stripes = append(t.stripes, stripe{file: f, idx: int32(j), dev: m.dst, bytes: m.total, gen: fl.gen})
		m.phase = migCommitted
	}
	for s := fl.first; s < fl.first+fl.n; s++ {
		t.stripes[s].moving = false
		r.old = append(r.old, s)
	}
	fl.first, fl.n = first, int32(len(r.migs))
	r.phase = migCommitted
	t.growStripes(oldN)
	return nil
}

// growStripes re-lays the per-(client, stripe) record index after stripes
// were appended (its stride is the stripe count) and widens the streams'
// record caches when a file got wider than any before.
func (t *Twin) growStripes(oldN int) {
	n := len(t.stripes)
	idx := make([]int32, len(t.cli)*n)
	for i := range idx {
		idx[i] = -1
	}
	for c := range t.cli {
		copy(idx[c*n:c*n+oldN], t.recIdx[c*oldN:(c+1)*oldN])
	}
	t.recIdx = idx
	w := 0
	for f := range t.files {
		w = max(w, int(t.files[f].n))
	}
	if w > t.maxStripes {
		t.maxStripes = w
		t.streamRecs = make([]int32, len(t.streams)*w)
		for i := range t.streamRecs {
			t.streamRecs[i] = -1
		}
	}
}

// CleanupRestripe frees the old components of a committed restripe.
func (t *Twin) CleanupRestripe(file string, toIDs []string) error {
	f, to, ri, err := t.restripeOf(file, toIDs)
	if err != nil {
		return err
	}
	if ri < 0 {
		if sameDevs(t.fileDevices(f), to) {
			return nil // cleaned already
		}
		return fmt.Errorf("cannot clean up the restripe of %s: the layout is not on %s", file, strings.Join(toIDs, ","))
	}
	r := &t.restripes[ri]
	if r.phase != migCommitted {
		return fmt.Errorf("cannot clean up the restripe of %s: it is not committed", file)
	}
	var devs []int32
	for _, s := range r.old {
		st := &t.stripes[s]
		t.dev[st.dev].used = max(0, t.dev[st.dev].used-st.bytes)
		st.bytes = 0
		devs = append(devs, st.dev)
	}
	for _, mi := range r.migs {
		t.migs[mi].phase, t.migs[mi].done = migCleaned, true
	}
	r.phase, r.finished = migCleaned, true
	for _, d := range devs {
		t.maybeRetire(d)
	}
	return nil
}

// AbortRestripe drops an uncommitted restripe and frees what it wrote.
func (t *Twin) AbortRestripe(file string, toIDs []string) error {
	f, _, ri, err := t.restripeOf(file, toIDs)
	if err != nil || ri < 0 {
		return err
	}
	r := &t.restripes[ri]
	if r.phase == migCommitted {
		return fmt.Errorf("cannot abort the restripe of %s: the layout already switched", file)
	}
	for _, mi := range r.migs {
		m := &t.migs[mi]
		t.dev[m.dst].used = max(0, t.dev[m.dst].used-m.moved)
		m.phase, m.active, m.done = migAborted, false, true
		t.dropFromQueue(mi)
	}
	fl := &t.files[f]
	for s := fl.first; s < fl.first+fl.n; s++ {
		t.stripes[s].moving = false
	}
	r.phase, r.finished = migAborted, true
	return nil
}

// FileWidth returns the number of components of file (0 when unknown).
func (t *Twin) FileWidth(file string) int {
	if f := t.findFile(file); f >= 0 {
		return int(t.files[f].n)
	}
	return 0
}
