package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/models"
)

// A restripe rewrites one mirror of a file over more components. The
// mirror's bytes are dealt round-robin over its components in units of
// the layout's stripe unit (flex-files striping): logical unit u is unit
// u ÷ W of component u mod W. New component j is written to
// EXPORT/FILE~gG.j on its device (G the generation the commit makes), so
// that it never collides with an old component on the same device; the
// layout records that name (Component.Path). Every step is idempotent as
// a move's, and runs under the same fence and lock.

var _ actuator.Restriper = (*Driver)(nil)

// restripeName is new component j's name, for a commit that makes
// generation gen.
func restripeName(file string, gen uint64, j int) string {
	return fmt.Sprintf("%s~g%d.%d", file, gen, j)
}

// striping is a mirror's bytes as dealt over its components.
type striping struct {
	size  int64 // the mirror's bytes
	unit  int64
	paths []string // each component's file, in component order
}

// compSize is the bytes of component j of w over size bytes in units.
func compSize(size, unit int64, w, j int) int64 {
	full, rem := size/unit, size%unit
	n := int64(0)
	if full > int64(j) {
		n = (full - int64(j) + int64(w) - 1) / int64(w)
	}
	b := n * unit
	if rem > 0 && full%int64(w) == int64(j) {
		b += rem
	}
	return b
}

// logical maps the offset off of component j of w to the mirror's
// offset, and says how many bytes from there stay in one unit.
func logical(off, unit int64, w, j int) (int64, int64) {
	u := (off/unit)*int64(w) + int64(j)
	return u*unit + off%unit, unit - off%unit
}

// oldStriping reads the mirror m restripes from: the layout must still be
// at m.Generation with the mirror on Restripe.From (else the layout
// changed and the restripe is replanned), with a stripe unit, and its
// components' sizes must be those of a striping of their sum.
func (d *Driver) oldStriping(m models.Move) (striping, storedLayout, error) {
	l, err := d.readLayout(m.File)
	if err != nil {
		return striping{}, l, err
	}
	if m.Mirror < 0 || m.Mirror >= len(l.Mirrors) {
		return striping{}, l, actuator.Permanent(fmt.Errorf("%s has no mirror %d", m.File, m.Mirror))
	}
	comps := l.Mirrors[m.Mirror]
	if l.Generation != m.Generation || !sameDevs(comps, m.Restripe.From) {
		return striping{}, l, fmt.Errorf("cannot restripe %s#%d: generation %d (planned on %d): %w", m.File, m.Mirror, l.Generation, m.Generation, actuator.ErrGenerationChanged)
	}
	if l.StripeUnit <= 0 {
		return striping{}, l, actuator.Permanent(fmt.Errorf("cannot restripe %s: its layout has no stripe_unit", m.File))
	}
	st := striping{unit: l.StripeUnit}
	for _, c := range comps {
		p, err := d.path(c.Device, nameOf(c, m.File))
		if err != nil {
			return striping{}, l, err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return striping{}, l, actuator.Permanent(fmt.Errorf("cannot restripe %s: component %s: %w", m.File, p, err))
		}
		st.size += fi.Size()
		st.paths = append(st.paths, p)
	}
	for j, p := range st.paths {
		fi, _ := os.Stat(p)
		if want := compSize(st.size, st.unit, len(st.paths), j); fi.Size() != want {
			return striping{}, l, actuator.Permanent(fmt.Errorf("cannot restripe %s: component %s has %d bytes, not the %d of a striping of %d bytes in units of %d", m.File, p, fi.Size(), want, st.size, st.unit))
		}
	}
	return st, l, nil
}

func sameDevs(cs []actuator.Component, devs []string) bool {
	if len(cs) != len(devs) {
		return false
	}
	for i := range cs {
		if !strings.EqualFold(cs[i].Device, devs[i]) {
			return false
		}
	}
	return true
}

// newPaths are the files of m's new components.
func (d *Driver) newPaths(m models.Move) ([]string, []string, error) {
	var paths, names []string
	for j, dev := range m.Restripe.To {
		n := restripeName(m.File, m.Generation+1, j)
		p, err := d.path(dev, n)
		if err != nil {
			return nil, nil, err
		}
		paths, names = append(paths, p), append(names, n)
	}
	return paths, names, nil
}

// reader reads a striped mirror's logical bytes from its components.
type reader struct {
	st    striping
	files []*os.File
}

func openStriping(st striping) (*reader, error) {
	r := &reader{st: st}
	for _, p := range st.paths {
		f, err := os.Open(p)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.files = append(r.files, f)
	}
	return r, nil
}

func (r *reader) Close() {
	for _, f := range r.files {
		f.Close()
	}
}

// readAt reads the mirror's logical bytes at off into b (b within one
// unit).
func (r *reader) readAt(b []byte, off int64) error {
	u := off / r.st.unit
	w := int64(len(r.files))
	_, err := r.files[u%w].ReadAt(b, (u/w)*r.st.unit+off%r.st.unit)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// CopyRestripe writes every new component (into part files beside them,
// resumed where an earlier call stopped, fsynced, renamed into place),
// reading the old ones only. A new component already in place with its
// size is done (VerifyRestripe judges its bytes).
func (d *Driver) CopyRestripe(ctx context.Context, r actuator.CopyRequest) (actuator.Progress, error) {
	m := r.Move
	if m.Restripe == nil {
		return actuator.Progress{}, actuator.Permanent(errors.New("not a restripe"))
	}
	st, _, err := d.oldStriping(m)
	if err != nil {
		return actuator.Progress{}, err
	}
	dsts, _, err := d.newPaths(m)
	if err != nil {
		return actuator.Progress{}, err
	}
	if err := d.recordMove(r); err != nil {
		return actuator.Progress{}, err
	}
	src, err := openStriping(st)
	if err != nil {
		return actuator.Progress{}, fmt.Errorf("cannot open %s's components: %w", m.File, err)
	}
	defer src.Close()
	w := len(dsts)
	epoch := d.epoch.Load()
	start, done, copied := time.Now(), int64(0), int64(0)
	buf := make([]byte, min(int64(d.cfg.BufferBytes), st.unit))
	for j, dst := range dsts {
		size := compSize(st.size, st.unit, w, j)
		if fi, err := os.Stat(dst); err == nil && fi.Size() == size {
			copied += size
			continue
		}
		if d.isPaused(m) {
			return actuator.Progress{Bytes: copied}, nil
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return actuator.Progress{}, fmt.Errorf("cannot create %s: %w", filepath.Dir(dst), err)
		}
		part := partPath(dst, r.ID, epoch)
		out, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return actuator.Progress{}, fmt.Errorf("cannot create %s: %w", part, err)
		}
		fi, err := out.Stat()
		if err != nil {
			out.Close()
			return actuator.Progress{}, err
		}
		off := min(fi.Size(), size)
		// resume at a whole buffer: a torn last write is redone
		off -= off % int64(len(buf))
		if err := out.Truncate(off); err != nil {
			out.Close()
			return actuator.Progress{}, fmt.Errorf("cannot resume %s: %w", part, err)
		}
		for off < size {
			if err := ctx.Err(); err != nil {
				out.Close()
				return actuator.Progress{Bytes: copied + off}, err
			}
			if err := d.fenced(); err != nil {
				out.Close()
				os.Remove(part)
				return actuator.Progress{}, fmt.Errorf("cannot restripe %s: %w", m.File, err)
			}
			if d.isPaused(m) {
				err := out.Sync()
				out.Close()
				if err != nil {
					return actuator.Progress{}, fmt.Errorf("cannot sync %s: %w", part, err)
				}
				return actuator.Progress{Bytes: copied + off}, nil
			}
			lo, n := logical(off, st.unit, w, j)
			n = min(n, int64(len(buf)), size-off)
			if err := src.readAt(buf[:n], lo); err != nil {
				out.Close()
				return actuator.Progress{}, fmt.Errorf("cannot read %s at %d: %w", m.File, lo, err)
			}
			if _, err := out.WriteAt(buf[:n], off); err != nil {
				out.Close()
				return actuator.Progress{}, fmt.Errorf("cannot write %s: %w", part, err)
			}
			off += n
			done += n
			if err := pace(ctx, start, done, r.RateLimit); err != nil {
				out.Close()
				return actuator.Progress{Bytes: copied + off}, err
			}
		}
		if err := d.placePart(out, part, dst, epoch); err != nil {
			return actuator.Progress{}, err
		}
		copied += size
	}
	return actuator.Progress{Done: true, Bytes: copied}, nil
}

// stripedSum is "sha256:HEX" of a striped mirror's logical bytes (errPaused
// when m is paused meanwhile).
func (d *Driver) stripedSum(ctx context.Context, st striping, m models.Move) (string, error) {
	r, err := openStriping(st)
	if err != nil {
		return "", err
	}
	defer r.Close()
	h := sha256.New()
	buf := make([]byte, min(int64(d.cfg.BufferBytes), st.unit))
	for off := int64(0); off < st.size; {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if d.isPaused(m) {
			return "", errPaused
		}
		n := min(int64(len(buf)), st.unit-off%st.unit, st.size-off)
		if err := r.readAt(buf[:n], off); err != nil {
			return "", fmt.Errorf("cannot read %s at %d: %w", m.File, off, err)
		}
		h.Write(buf[:n])
		off += n
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// VerifyRestripe reads the mirror back through its old components and
// through its new ones and compares the SHA-256 of the two: the same
// logical bytes, dealt two ways. A new component missing or of the wrong
// size does not match.
func (d *Driver) VerifyRestripe(ctx context.Context, m models.Move) (actuator.VerifyResult, error) {
	if d.isPaused(m) {
		return actuator.VerifyResult{}, nil
	}
	st, _, err := d.oldStriping(m)
	if err != nil {
		return actuator.VerifyResult{}, err
	}
	a, err := d.stripedSum(ctx, st, m)
	if errors.Is(err, errPaused) {
		return actuator.VerifyResult{}, nil
	}
	if err != nil {
		return actuator.VerifyResult{}, err
	}
	dsts, _, err := d.newPaths(m)
	if err != nil {
		return actuator.VerifyResult{}, err
	}
	nst := striping{size: st.size, unit: st.unit, paths: dsts}
	for j, p := range dsts {
		if fi, err := os.Stat(p); err != nil || fi.Size() != compSize(st.size, st.unit, len(dsts), j) {
			return actuator.VerifyResult{Done: true, Checksum: a, CopyChecksum: "missing"}, nil
		}
	}
	b, err := d.stripedSum(ctx, nst, m)
	if errors.Is(err, errPaused) {
		return actuator.VerifyResult{}, nil
	}
	if err != nil {
		return actuator.VerifyResult{}, err
	}
	return actuator.VerifyResult{Done: true, Match: a == b, Checksum: a, CopyChecksum: b}, nil
}

// CommitRestripe switches the mirror to its new components if the layout
// is still at m.Generation on Restripe.From, under the fence at epoch and
// the store's lock, as a move's commit: the commit is written pending,
// the hook (restripe verb) applies it to the MDS, the store takes the new
// generation and keeps the old components as retired, for the cleanup.
func (d *Driver) CommitRestripe(ctx context.Context, m models.Move, epoch uint64) error {
	return d.fence.Commit(epoch, func() error {
		return d.locked(func() error {
			l, err := d.resolve(ctx, m.File)
			if err != nil {
				return err
			}
			if m.Mirror < len(l.Mirrors) && sameDevs(l.Mirrors[m.Mirror], m.Restripe.To) && l.Generation == m.Generation+1 {
				return nil // committed before a crash
			}
			st, _, err := d.oldStriping(m)
			if err != nil {
				return err
			}
			dsts, names, err := d.newPaths(m)
			if err != nil {
				return err
			}
			rc := &RestripeCommit{StripeUnit: st.unit, From: m.Restripe.From, To: m.Restripe.To, FromPaths: st.paths, ToPaths: dsts, Names: names}
			for _, p := range dsts {
				fi, err := os.Stat(p)
				if err != nil {
					return fmt.Errorf("cannot commit the restripe of %s: the new component %s: %w", m.File, p, err)
				}
				rc.Bytes = append(rc.Bytes, fi.Size())
			}
			l.Pending = &Commit{Move: moveID(m), File: m.File, Mirror: m.Mirror, Component: m.Component,
				From: strings.Join(m.Restripe.From, ","), To: strings.Join(m.Restripe.To, ","), FromPath: st.paths[0], ToPath: dsts[0],
				OldGeneration: l.Generation, NewGeneration: l.Generation + 1, Epoch: epoch, Restripe: rc}
			if err := d.writeLayout(&l); err != nil {
				return err
			}
			_, err = d.finish(ctx, &l)
			return err
		})
	})
}

// finishRestripe writes an applied restripe commit: the mirror on its new
// components (with the handles the hook printed, one a line, when it
// printed one per component), the old ones retired.
func (d *Driver) finishRestripe(l *storedLayout, c Commit, handles string) error {
	rc := c.Restripe
	if c.Mirror < 0 || c.Mirror >= len(l.Mirrors) || len(rc.Names) != len(rc.To) || len(rc.Bytes) != len(rc.To) {
		return actuator.Permanent(fmt.Errorf("layout of %s cannot take its pending restripe of mirror %d", c.File, c.Mirror))
	}
	hs := strings.Fields(handles)
	for _, old := range l.Mirrors[c.Mirror] {
		old.Path = nameOf(old, l.File)
		l.Retired = append(l.Retired, old)
	}
	comps := make([]actuator.Component, len(rc.To))
	for j := range rc.To {
		comps[j] = actuator.Component{Device: rc.To[j], Path: rc.Names[j], Bytes: rc.Bytes[j]}
		if len(hs) == len(rc.To) {
			comps[j].Handle = hs[j]
		}
	}
	l.Mirrors[c.Mirror] = comps
	l.Generation = c.NewGeneration
	l.Pending = nil
	return d.writeLayout(l)
}

// CleanupRestripe removes the old components a committed restripe
// retired (those the layout does not reference), and part files deposed
// leaders left beside the new ones.
func (d *Driver) CleanupRestripe(ctx context.Context, m models.Move) error {
	return d.fencedLocked(func() error {
		l, err := d.resolve(ctx, m.File)
		if err != nil {
			return err
		}
		if m.Mirror >= len(l.Mirrors) || !sameDevs(l.Mirrors[m.Mirror], m.Restripe.To) {
			return actuator.Permanent(fmt.Errorf("cannot clean up the restripe of %s: the layout is not on %s; the old components are kept", m.File, strings.Join(m.Restripe.To, ",")))
		}
		for _, c := range l.Retired {
			if holds(&l.Layout, c.Device, c.Path) {
				continue
			}
			p, err := d.path(c.Device, c.Path)
			if err != nil {
				return err
			}
			if err := removeSynced(p); err != nil {
				return err
			}
		}
		for _, c := range l.Mirrors[m.Mirror] {
			if p, err := d.path(c.Device, nameOf(c, m.File)); err == nil {
				if err := d.removeParts(p); err != nil {
					return err
				}
			}
		}
		if len(l.Retired) > 0 {
			l.Retired = nil
			if err := d.writeLayout(&l); err != nil {
				return err
			}
		}
		return d.forget(m)
	})
}

// AbortRestripe removes the new components and their part files unless
// the layout references them; a pending commit of it is finished first,
// and once applied the restripe cannot be aborted.
func (d *Driver) AbortRestripe(ctx context.Context, m models.Move) error {
	d.paused.Delete(moveID(m))
	return d.fencedLocked(func() error {
		l, err := d.resolve(ctx, m.File)
		if err != nil && !errors.Is(err, actuator.ErrNotFound) {
			return err
		}
		if err == nil && m.Mirror < len(l.Mirrors) && sameDevs(l.Mirrors[m.Mirror], m.Restripe.To) {
			return fmt.Errorf("cannot abort the restripe of %s: the layout already points at its new components (committed)", m.File)
		}
		dsts, names, err := d.newPaths(m)
		if err != nil {
			return err
		}
		for j, p := range dsts {
			if !holds(&l.Layout, m.Restripe.To[j], names[j]) {
				if err := removeSynced(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
			if err := d.removeParts(p); err != nil {
				return err
			}
		}
		return d.forget(m)
	})
}
