// Package files is the files mover driver: it moves stripe components
// between data-server exports mounted on the mds host (PEAK:AIO's and
// Lattice's layout), keeping each file's layout in a durable store both mds
// of an HA pair reach and telling the real MDS of every commit through the
// operator's layout hook.
//
// A file's component on a device is the file at EXPORT/FILE (EXPORT is the
// device's export as mounted here, FILE the file's path). The layout store
// (actuators.files.layout_dir) holds:
//
//	layouts/FILE.json  the file's layout: mirrors × components, generation,
//	                   and a commit whose hook answer is not yet known
//	moves/ID.json      a move in flight (copy begun, not cleaned or aborted)
//	fence              the highest leader epoch seen (cluster/ha.FenceFile)
//	lock               serialises every write of the store (flock)
//	state.json         device states set through SetState
//
// Every step is idempotent (docs/actions.md, "The files driver"): Copy
// writes EXPORT/.ballast-NAME.ID.eEPOCH.part beside the destination,
// resumes it where it stopped, fsyncs and renames it into place; Verify
// reads both copies back through SHA-256; Commit is a compare-and-swap on
// the layout generation under the fence, with the hook as the point of no
// return; Cleanup and Abort remove only a copy the layout no longer (or
// never) references. Renames, aborts and cleanups run under the fence at
// the epoch of the last TakeOver, so a deposed leader touches nothing.
package files

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/models"
)

// Fence is the fencing-token check commits run under (cluster/ha.FenceFile
// on LayoutDir/fence): commit runs only while epoch is at least the highest
// recorded, and no other process passes the fence meanwhile.
type Fence interface {
	Commit(epoch uint64, commit func() error) error
}

// Commit is what the layout hook is told about one layout switch.
type Commit struct {
	// Move is the move action's id.
	Move      string `json:"move"`
	File      string `json:"file"`
	Mirror    int    `json:"mirror"`
	Component int    `json:"component"`
	// From and To are device ids; FromPath and ToPath the component's file
	// on their exports, as mounted on the mds host.
	From     string `json:"from"`
	To       string `json:"to"`
	FromPath string `json:"from_path"`
	ToPath   string `json:"to_path"`
	// OldGeneration is the generation the move was planned on;
	// NewGeneration = OldGeneration + 1 is what the layout becomes.
	OldGeneration uint64 `json:"old_generation"`
	NewGeneration uint64 `json:"new_generation"`
	// Epoch is the committing leader's fencing token (0 for an mds alone).
	Epoch uint64 `json:"epoch"`
	// Restripe is set for a restripe's commit (the hook's restripe verb):
	// the whole mirror switches to new components. From and To above are
	// then the old and new devices joined by commas, FromPath and ToPath
	// the first component's; Component is the one the plan started from.
	Restripe *RestripeCommit `json:"restripe,omitempty"`
}

// RestripeCommit is a mirror's old and new components: devices, their
// files as mounted on the mds host, and the new components' names in the
// layout (relative to their exports) and sizes, in component order.
type RestripeCommit struct {
	StripeUnit int64    `json:"stripe_unit"`
	From       []string `json:"from"`
	To         []string `json:"to"`
	FromPaths  []string `json:"from_paths"`
	ToPaths    []string `json:"to_paths"`
	Names      []string `json:"names"`
	Bytes      []int64  `json:"bytes"`
}

// Hook applies a commit to the real MDS. It returns the new component's
// file handle (hex, "" when unknown; for a restripe one per new
// component, one a line), ErrRefused when the MDS will not
// switch (its layout moved on), or another error to be retried. A repeat
// of a commit it already applied (same file and NewGeneration) must
// succeed without applying it again: after a crash between the hook and
// the store's write, ballast calls it again.
type Hook func(ctx context.Context, c Commit) (handle string, err error)

// ErrRefused is what a hook returns when the MDS refuses a commit (the
// command exits 3).
var ErrRefused = errors.New("the layout hook refused the commit")

// Options configure a Driver.
type Options struct {
	Config actuator.FilesConfig
	// Fence guards commits; required.
	Fence Fence
	// Hook replaces Config.LayoutCommand (in-process callers).
	Hook   Hook
	Logger *slog.Logger
}

// Driver is the files mover. It implements actuator.Mover and
// actuator.Successor.
type Driver struct {
	cfg   actuator.FilesConfig
	fence Fence
	hook  Hook
	log   *slog.Logger
	devs  map[string]actuator.DeviceSpec
	order []string
	// epoch is this process's epoch since its last TakeOver: copies
	// rename, aborts and cleanups remove, under the fence at it, so a
	// deposed leader that wakes up cannot touch what the new one owns.
	epoch atomic.Uint64
	// mu serialises this process's store writes (flock is per open file,
	// so goroutines of one process need their own lock too).
	mu sync.Mutex
	// paused holds the moves (moveID) whose copy or read-back is paused
	// (Pause); in memory only: after a restart the engine pauses again.
	paused sync.Map
}

var (
	_ actuator.Mover  = (*Driver)(nil)
	_ actuator.Pauser = (*Driver)(nil)
)

// Pause implements actuator.Pauser: a paused move's Copy and Verify read
// and write nothing and return not done; one under way stops at its next
// chunk, keeping its part file (fsynced), so the copy after the resume
// goes on from where it stopped and ends byte-identical.
func (d *Driver) Pause(_ context.Context, _ string, m models.Move, paused bool) error {
	if paused {
		d.paused.Store(moveID(m), true)
	} else {
		d.paused.Delete(moveID(m))
	}
	return nil
}

func (d *Driver) isPaused(m models.Move) bool {
	_, ok := d.paused.Load(moveID(m))
	return ok
}

// New returns a files driver for o; it creates the store's folders.
func New(o Options) (*Driver, error) {
	if o.Fence == nil {
		return nil, errors.New("files driver needs a fence")
	}
	if o.Config.LayoutDir == "" {
		return nil, errors.New("actuators.files.layout_dir: must be set")
	}
	if o.Config.BufferBytes <= 0 {
		o.Config.BufferBytes = actuator.DefaultFilesConfig().BufferBytes
	}
	if o.Config.HookTimeout <= 0 {
		o.Config.HookTimeout = actuator.DefaultFilesConfig().HookTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	d := &Driver{cfg: o.Config, fence: o.Fence, hook: o.Hook, log: o.Logger, devs: map[string]actuator.DeviceSpec{}}
	if d.hook == nil {
		if len(o.Config.LayoutCommand) == 0 {
			return nil, errors.New("actuators.files.layout_command: must name the layout hook (docs/actions.md)")
		}
		d.hook = d.runCommand
	}
	for _, s := range o.Config.Exports {
		id := strings.ToLower(s.Device)
		s.Device = id
		d.devs[id] = s
		d.order = append(d.order, id)
	}
	for _, sub := range []string{"layouts", "moves"} {
		if err := os.MkdirAll(filepath.Join(o.Config.LayoutDir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("cannot create the layout store %q: %w", o.Config.LayoutDir, err)
		}
	}
	return d, nil
}

// Capabilities implements actuator.Mover.
func (d *Driver) Capabilities() actuator.Capabilities {
	return actuator.Capabilities{Name: actuator.DriverFiles, SetState: true, Restripe: d.cfg.Restripe}
}

// Devices lists the configured exports, sized by statfs of their paths.
func (d *Driver) Devices(context.Context) ([]actuator.Device, error) {
	states, err := d.states()
	if err != nil {
		return nil, err
	}
	out := make([]actuator.Device, 0, len(d.order))
	for _, id := range d.order {
		s := d.devs[id]
		dev := s.Configured()
		if st, ok := states[id]; ok {
			dev.State = st
		}
		var fs syscall.Statfs_t
		if err := syscall.Statfs(s.Path, &fs); err != nil {
			// an export that is not mounted serves nothing
			dev.State = actuator.StateOffline
		} else {
			total := int64(fs.Blocks) * fs.Bsize
			if dev.CapacityBytes == 0 {
				dev.CapacityBytes = total
			}
			dev.UsedBytes = total - int64(fs.Bfree)*fs.Bsize
		}
		out = append(out, dev)
	}
	return out, nil
}

// storedLayout is a layout file: the layout and a commit whose hook
// answer is not yet known.
type storedLayout struct {
	actuator.Layout
	Pending *Commit `json:"pending,omitempty"`
	// Retired are the components a committed restripe replaced, until
	// its cleanup removes them.
	Retired []actuator.Component `json:"retired,omitempty"`
}

func (d *Driver) layoutPath(file string) (string, error) {
	if file == "" || filepath.IsAbs(file) || filepath.Clean(file) != file || strings.HasPrefix(file, "../") || file == ".." || strings.HasPrefix(filepath.Base(file), ".ballast-") {
		return "", actuator.Permanent(fmt.Errorf("file %q is not a clean relative path", file))
	}
	return filepath.Join(d.cfg.LayoutDir, "layouts", file+".json"), nil
}

func (d *Driver) readLayout(file string) (storedLayout, error) {
	p, err := d.layoutPath(file)
	if err != nil {
		return storedLayout{}, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return storedLayout{}, fmt.Errorf("file %q: %w", file, actuator.ErrNotFound)
	}
	if err != nil {
		return storedLayout{}, fmt.Errorf("cannot read the layout of %q: %w", file, err)
	}
	var l storedLayout
	if err := json.Unmarshal(b, &l); err != nil {
		return storedLayout{}, actuator.Permanent(fmt.Errorf("cannot read the layout of %q: %s: %w", file, p, err))
	}
	if l.File == "" {
		l.File = file
	}
	if l.File != file {
		return storedLayout{}, actuator.Permanent(fmt.Errorf("layout %s names file %q, not %q", p, l.File, file))
	}
	return l, nil
}

func (d *Driver) writeLayout(l *storedLayout) error {
	p, err := d.layoutPath(l.File)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(p, append(b, '\n'))
}

// WriteLayout stores l as file's layout (the operator's or the MDS's
// tooling seeds the store with it; ballast changes it only by commits).
func WriteLayout(layoutDir string, l actuator.Layout) error {
	d := &Driver{cfg: actuator.FilesConfig{LayoutDir: layoutDir}}
	sl := storedLayout{Layout: l}
	return d.writeLayout(&sl)
}

// Locate returns file's layout from the store. A commit whose hook answer
// is not known yet does not show: the layout is the one before it.
func (d *Driver) Locate(_ context.Context, file string) (actuator.Layout, error) {
	l, err := d.readLayout(file)
	return l.Layout, err
}

// Stripes lists the components device holds, from every layout in the
// store (a file with an unresolved commit is busy).
func (d *Driver) Stripes(_ context.Context, device string) ([]actuator.StripeRef, error) {
	device = strings.ToLower(device)
	if _, ok := d.devs[device]; !ok {
		return nil, fmt.Errorf("device %q: %w", device, actuator.ErrNotFound)
	}
	root := filepath.Join(d.cfg.LayoutDir, "layouts")
	var out []actuator.StripeRef
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".json") || strings.HasPrefix(e.Name(), ".") {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		l, err := d.readLayout(strings.TrimSuffix(rel, ".json"))
		if err != nil {
			d.log.Warn("files driver: skipping a layout", "path", p, "err", err)
			return nil
		}
		for mi, comps := range l.Mirrors {
			for ci, c := range comps {
				if strings.EqualFold(c.Device, device) {
					out = append(out, actuator.StripeRef{File: l.File, Mirror: mi, Component: ci, Device: device,
						Handle: c.Handle, Bytes: c.Bytes, Busy: l.Pending != nil})
				}
			}
		}
		return nil
	})
	return out, err
}

// path is where device holds file's component.
func (d *Driver) path(device, file string) (string, error) {
	s, ok := d.devs[strings.ToLower(device)]
	if !ok {
		return "", actuator.Permanent(fmt.Errorf("device %q is not among actuators.files.exports: %w", device, actuator.ErrNotFound))
	}
	if _, err := d.layoutPath(file); err != nil {
		return "", err
	}
	return filepath.Join(s.Path, file), nil
}

// partPath is the copy of move id while the leader at epoch writes it
// (each leader its own: a deposed one still writing never touches the
// new leader's).
func partPath(dst, id string, epoch uint64) string {
	h := sha256.Sum256([]byte(id))
	return filepath.Join(filepath.Dir(dst), ".ballast-"+filepath.Base(dst)+"."+hex.EncodeToString(h[:6])+".e"+strconv.FormatUint(epoch, 10)+".part")
}

// fenced says whether a leader newer than this process's epoch has taken
// over.
func (d *Driver) fenced() error {
	f, ok := d.fence.(interface{ Seen() (uint64, error) })
	if !ok {
		return nil
	}
	seen, err := f.Seen()
	if err != nil {
		return err
	}
	if e := d.epoch.Load(); seen > e {
		return fmt.Errorf("%w (epoch %d < %d)", errDeposed, e, seen)
	}
	return nil
}

// errDeposed stops a copy whose leader was deposed.
var errDeposed = errors.New("a newer leader has taken over")

// Copy copies the component to its destination: into a part file beside
// it (resumed where an earlier call stopped), fsynced, renamed into place.
// The source is only read. A destination already in place with the
// source's size is done (Verify judges its bytes).
func (d *Driver) Copy(ctx context.Context, r actuator.CopyRequest) (actuator.Progress, error) {
	m := r.Move
	name := d.compName(m)
	src, err := d.path(m.From, name)
	if err != nil {
		return actuator.Progress{}, err
	}
	dst, err := d.path(m.To, name)
	if err != nil {
		return actuator.Progress{}, err
	}
	if err := d.recordMove(r); err != nil {
		return actuator.Progress{}, err
	}
	if d.isPaused(m) {
		return actuator.Progress{Bytes: partSize(dst, r.ID, d.epoch.Load())}, nil
	}
	in, err := os.Open(src)
	if errors.Is(err, fs.ErrNotExist) {
		return actuator.Progress{}, actuator.Permanent(fmt.Errorf("cannot copy %s: the source %s is missing", m.File, src))
	}
	if err != nil {
		return actuator.Progress{}, fmt.Errorf("cannot open %s: %w", src, err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return actuator.Progress{}, err
	}
	size := st.Size()
	if fi, err := os.Stat(dst); err == nil && fi.Size() == size {
		return actuator.Progress{Done: true, Bytes: size}, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return actuator.Progress{}, fmt.Errorf("cannot create %s: %w", filepath.Dir(dst), err)
	}
	epoch := d.epoch.Load()
	part := partPath(dst, r.ID, epoch)
	out, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE, st.Mode().Perm())
	if err != nil {
		return actuator.Progress{}, fmt.Errorf("cannot create %s: %w", part, err)
	}
	defer out.Close()
	pst, err := out.Stat()
	if err != nil {
		return actuator.Progress{}, err
	}
	off := pst.Size()
	if off > size {
		off = 0
	}
	if err := out.Truncate(off); err != nil {
		return actuator.Progress{}, fmt.Errorf("cannot resume %s: %w", part, err)
	}
	if _, err := in.Seek(off, io.SeekStart); err != nil {
		return actuator.Progress{}, err
	}
	if _, err := out.Seek(off, io.SeekStart); err != nil {
		return actuator.Progress{}, err
	}
	// io.CopyN from one *os.File to another uses copy_file_range on
	// Linux (the kernel copies, or the server does on NFS 4.2); chunks
	// keep the pacing and cancellation fine-grained.
	start, done := time.Now(), int64(0)
	for off+done < size {
		if err := ctx.Err(); err != nil {
			return actuator.Progress{Bytes: off + done}, err
		}
		if err := d.fenced(); err != nil {
			out.Close()
			os.Remove(part)
			return actuator.Progress{}, fmt.Errorf("cannot copy %s: %w", m.File, err)
		}
		if d.isPaused(m) {
			// what was copied stays in the part file for the resume
			if err := out.Sync(); err != nil {
				return actuator.Progress{}, fmt.Errorf("cannot sync %s: %w", part, err)
			}
			return actuator.Progress{Bytes: off + done}, nil
		}
		n := min(int64(d.cfg.BufferBytes), size-off-done)
		w, err := io.CopyN(out, in, n)
		done += w
		if err != nil {
			return actuator.Progress{Bytes: off + done}, fmt.Errorf("cannot copy %s to %s: %w", src, part, err)
		}
		if err := pace(ctx, start, done, r.RateLimit); err != nil {
			return actuator.Progress{Bytes: off + done}, err
		}
	}
	if err := d.placePart(out, part, dst, epoch); err != nil {
		return actuator.Progress{}, err
	}
	return actuator.Progress{Done: true, Bytes: size}, nil
}

// pace waits until done bytes since start are no faster than rate bytes
// per second (no wait when rate ≤ 0); it returns ctx's error if ctx ends
// first.
func pace(ctx context.Context, start time.Time, done int64, rate float64) error {
	if rate <= 0 {
		return nil
	}
	wait := time.Until(start.Add(time.Duration(float64(done) / rate * float64(time.Second))))
	if wait <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}

// placePart puts a finished part file in place: fsynced, closed, renamed
// to dst under the fence at epoch (the folder fsynced); a part the fence
// refuses is removed.
func (d *Driver) placePart(out *os.File, part, dst string, epoch uint64) error {
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("cannot sync %s: %w", part, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("cannot close %s: %w", part, err)
	}
	err := d.fence.Commit(epoch, func() error {
		if err := os.Rename(part, dst); err != nil {
			return fmt.Errorf("cannot rename %s to %s: %w", part, dst, err)
		}
		return syncDir(filepath.Dir(dst))
	})
	if err != nil {
		os.Remove(part)
	}
	return err
}

// Verify reads both copies back and compares their SHA-256. A paused
// move's read-back stops and reports not done (it starts over after the
// resume).
func (d *Driver) Verify(ctx context.Context, m models.Move) (actuator.VerifyResult, error) {
	if d.isPaused(m) {
		return actuator.VerifyResult{}, nil
	}
	name := d.compName(m)
	src, err := d.path(m.From, name)
	if err != nil {
		return actuator.VerifyResult{}, err
	}
	dst, err := d.path(m.To, name)
	if err != nil {
		return actuator.VerifyResult{}, err
	}
	a, err := d.checksum(ctx, src, m)
	if errors.Is(err, fs.ErrNotExist) {
		return actuator.VerifyResult{}, actuator.Permanent(fmt.Errorf("cannot verify %s: the source %s is missing", m.File, src))
	}
	if errors.Is(err, errPaused) {
		return actuator.VerifyResult{}, nil
	}
	if err != nil {
		return actuator.VerifyResult{}, err
	}
	b, err := d.checksum(ctx, dst, m)
	if errors.Is(err, fs.ErrNotExist) {
		return actuator.VerifyResult{Done: true, Checksum: a, CopyChecksum: "missing"}, nil
	}
	if errors.Is(err, errPaused) {
		return actuator.VerifyResult{}, nil
	}
	if err != nil {
		return actuator.VerifyResult{}, err
	}
	return actuator.VerifyResult{Done: true, Match: a == b, Checksum: a, CopyChecksum: b}, nil
}

// errPaused stops a read-back whose move was paused.
var errPaused = errors.New("paused")

// partSize is the size of a copy's part file (0 when there is none).
func partSize(dst, id string, epoch uint64) int64 {
	fi, err := os.Stat(partPath(dst, id, epoch))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// checksum is "sha256:HEX" of the file at p, read back for move m
// (errPaused when m is paused meanwhile).
func (d *Driver) checksum(ctx context.Context, p string, m models.Move) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, d.cfg.BufferBytes)
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if d.isPaused(m) {
			return "", errPaused
		}
		k, err := f.Read(buf)
		h.Write(buf[:k])
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("cannot read %s: %w", p, err)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Commit switches the component to m.To if the layout's generation is
// still m.Generation, under the fence at epoch: the pending commit is
// written to the store first, then the hook applies it to the MDS, then
// the store takes the new generation. A commit left pending by a crash is
// finished (the hook asked again) before anything else happens to the
// file.
func (d *Driver) Commit(ctx context.Context, m models.Move, epoch uint64) error {
	return d.fence.Commit(epoch, func() error {
		return d.locked(func() error {
			l, err := d.resolve(ctx, m.File)
			if err != nil {
				return err
			}
			cur, ok := l.At(m.Mirror, m.Component)
			if ok && strings.EqualFold(cur.Device, m.To) && l.Generation == m.Generation+1 {
				return nil // committed before a crash: its pending commit was just finished
			}
			if !ok || !strings.EqualFold(cur.Device, m.From) || l.Generation != m.Generation {
				return fmt.Errorf("cannot commit %s#%d.%d to %s: generation %d (planned on %d), component on %q: %w",
					m.File, m.Mirror, m.Component, m.To, l.Generation, m.Generation, cur.Device, actuator.ErrGenerationChanged)
			}
			dst, _ := d.path(m.To, nameOf(cur, m.File))
			src, _ := d.path(m.From, nameOf(cur, m.File))
			if _, err := os.Stat(dst); err != nil {
				return fmt.Errorf("cannot commit %s: the copy %s: %w", m.File, dst, err)
			}
			l.Pending = &Commit{Move: moveID(m), File: m.File, Mirror: m.Mirror, Component: m.Component, From: cur.Device, To: m.To,
				FromPath: src, ToPath: dst, OldGeneration: l.Generation, NewGeneration: l.Generation + 1, Epoch: epoch}
			if err := d.writeLayout(&l); err != nil {
				return err
			}
			_, err = d.finish(ctx, &l)
			return err
		})
	})
}

// moveID names a move without its action id (the hook and the pending
// record carry it): file, component and devices.
func moveID(m models.Move) string {
	return fmt.Sprintf("%s#%d.%d:%s>%s@%d", m.File, m.Mirror, m.Component, m.From, m.To, m.Generation)
}

// resolve reads file's layout and finishes a pending commit first.
func (d *Driver) resolve(ctx context.Context, file string) (storedLayout, error) {
	l, err := d.readLayout(file)
	if err != nil || l.Pending == nil {
		return l, err
	}
	if _, err := d.finish(ctx, &l); err != nil && !errors.Is(err, actuator.ErrGenerationChanged) {
		return l, err
	}
	return l, nil
}

// finish asks the hook about l's pending commit and writes its outcome:
// applied (the new generation) or refused (the layout as it was).
func (d *Driver) finish(ctx context.Context, l *storedLayout) (applied bool, err error) {
	c := *l.Pending
	hctx, cancel := context.WithTimeout(ctx, time.Duration(d.cfg.HookTimeout))
	handle, err := d.hook(hctx, c)
	cancel()
	switch {
	case errors.Is(err, ErrRefused):
		l.Pending = nil
		if werr := d.writeLayout(l); werr != nil {
			return false, werr
		}
		return false, fmt.Errorf("%w: %w", err, actuator.ErrGenerationChanged)
	case err != nil:
		return false, fmt.Errorf("cannot commit %s: layout hook: %w", c.File, err)
	}
	if c.Restripe != nil {
		return true, d.finishRestripe(l, c, handle)
	}
	if _, ok := l.At(c.Mirror, c.Component); !ok {
		return false, actuator.Permanent(fmt.Errorf("layout of %s has no component %d.%d for its pending commit", c.File, c.Mirror, c.Component))
	}
	comp := l.Mirrors[c.Mirror][c.Component]
	comp.Device, comp.Handle = c.To, handle
	l.Mirrors[c.Mirror][c.Component] = comp
	l.Generation = c.NewGeneration
	l.Pending = nil
	return true, d.writeLayout(l)
}

// Cleanup removes the old copy once the layout points at the new one.
func (d *Driver) Cleanup(ctx context.Context, m models.Move) error {
	return d.fencedLocked(func() error {
		l, err := d.resolve(ctx, m.File)
		if err != nil {
			return err
		}
		cur, _ := l.At(m.Mirror, m.Component)
		if !strings.EqualFold(cur.Device, m.To) {
			return actuator.Permanent(fmt.Errorf("cannot clean up %s on %s: the layout points at %q, not the copy on %s; the old copy is kept", m.File, m.From, cur.Device, m.To))
		}
		name := nameOf(cur, m.File)
		if holds(&l.Layout, m.From, name) {
			return d.forget(m)
		}
		src, err := d.path(m.From, name)
		if err != nil {
			return err
		}
		if err := removeSynced(src); err != nil {
			return err
		}
		if dst, err := d.path(m.To, name); err == nil {
			// part files a deposed leader left beside the copy
			if err := d.removeParts(dst); err != nil {
				return err
			}
		}
		return d.forget(m)
	})
}

// Abort removes the new copy (and its part file) unless the layout
// references it; a commit pending for the move is finished first, and if
// the hook applied it the move is committed and cannot be aborted.
func (d *Driver) Abort(ctx context.Context, m models.Move) error {
	d.paused.Delete(moveID(m)) // a copy made again later starts unpaused
	return d.fencedLocked(func() error {
		l, err := d.resolve(ctx, m.File)
		if err != nil && !errors.Is(err, actuator.ErrNotFound) {
			return err
		}
		name := m.File
		if err == nil {
			cur, _ := l.At(m.Mirror, m.Component)
			if strings.EqualFold(cur.Device, m.To) {
				return fmt.Errorf("cannot abort the move of %s: the layout already points at the copy on %s (committed)", m.File, m.To)
			}
			name = nameOf(cur, m.File)
		}
		dst, err := d.path(m.To, name)
		if err != nil {
			return err
		}
		if !holds(&l.Layout, m.To, name) {
			if err := removeSynced(dst); err != nil {
				return err
			}
		}
		if err := d.removeParts(dst); err != nil {
			return err
		}
		return d.forget(m)
	})
}

// removeParts removes every part file of dst (this move's and those of
// earlier attempts under other ids).
func (d *Driver) removeParts(dst string) error {
	ps, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".ballast-"+globEscape(filepath.Base(dst))+".*.part"))
	for _, p := range ps {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cannot remove %s: %w", p, err)
		}
	}
	return nil
}

func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(s)
}

// holds says whether a component of l is the file name on device.
func holds(l *actuator.Layout, device, name string) bool {
	for _, comps := range l.Mirrors {
		for _, c := range comps {
			if strings.EqualFold(c.Device, device) && nameOf(c, l.File) == name {
				return true
			}
		}
	}
	return false
}

// nameOf is component c's file on its export: its path in the layout,
// else the file's own.
func nameOf(c actuator.Component, file string) string {
	if c.Path != "" {
		return c.Path
	}
	return file
}

// compName is the name of move m's component on its devices (read from
// the layout; the file's own when the layout is unreadable).
func (d *Driver) compName(m models.Move) string {
	l, err := d.readLayout(m.File)
	if err != nil {
		return m.File
	}
	c, _ := l.At(m.Mirror, m.Component)
	return nameOf(c, m.File)
}

// SetState records a device's state (online, draining, offline, spare).
// A data server's state is that of each of its devices.
func (d *Driver) SetState(_ context.Context, s models.Subject, st actuator.DeviceState) error {
	var ids []string
	switch s.Kind {
	case models.SubjectDevice:
		if _, ok := d.devs[strings.ToLower(s.ID)]; !ok {
			return fmt.Errorf("device %q: %w", s.ID, actuator.ErrNotFound)
		}
		ids = []string{strings.ToLower(s.ID)}
	case models.SubjectDS:
		for _, id := range d.order {
			if dv := d.devs[id]; dv.DS == s.ID || (dv.DSAddr != "" && dv.DSAddr == s.ID) {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return fmt.Errorf("data server %q: %w", s.ID, actuator.ErrNotFound)
		}
	default:
		return actuator.Permanent(fmt.Errorf("cannot set the state of a %s", s.Kind))
	}
	return d.locked(func() error {
		states, err := d.states()
		if err != nil {
			return err
		}
		for _, id := range ids {
			states[id] = st
		}
		b, _ := json.MarshalIndent(states, "", "  ")
		return WriteFileAtomic(filepath.Join(d.cfg.LayoutDir, "state.json"), append(b, '\n'))
	})
}

func (d *Driver) states() (map[string]actuator.DeviceState, error) {
	out := map[string]actuator.DeviceState{}
	b, err := os.ReadFile(filepath.Join(d.cfg.LayoutDir, "state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read device states: %w", err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("cannot read device states %s: %w", filepath.Join(d.cfg.LayoutDir, "state.json"), err)
	}
	return out, nil
}

// recordMove notes a move in flight (first copy call) so that a new leader
// finds it.
func (d *Driver) recordMove(r actuator.CopyRequest) error {
	p := d.movePath(r.ID)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	rec := actuator.InFlight{ID: r.ID, Move: r.Move, Plan: r.Plan}
	rec.Move.Phase = models.PhaseCopying
	b, _ := json.Marshal(rec)
	return WriteFileAtomic(p, b)
}

func (d *Driver) movePath(id string) string {
	h := sha256.Sum256([]byte(id))
	return filepath.Join(d.cfg.LayoutDir, "moves", hex.EncodeToString(h[:12])+".json")
}

// forget drops a move's in-flight record: moves are recorded by action
// id, and the engine's action ids of one move are all alike, so every
// record of this file component and destination goes.
func (d *Driver) forget(m models.Move) error {
	recs, err := d.inFlight()
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.Move.File == m.File && r.Move.Mirror == m.Mirror && r.Move.Component == m.Component && strings.EqualFold(r.Move.To, m.To) {
			if err := os.Remove(d.movePath(r.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("cannot remove the in-flight record of %s: %w", r.ID, err)
			}
		}
	}
	return nil
}

func (d *Driver) inFlight() ([]actuator.InFlight, error) {
	es, err := os.ReadDir(filepath.Join(d.cfg.LayoutDir, "moves"))
	if err != nil {
		return nil, fmt.Errorf("cannot list moves in flight: %w", err)
	}
	var out []actuator.InFlight
	for _, e := range es {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d.cfg.LayoutDir, "moves", e.Name()))
		if err != nil {
			continue // removed meanwhile
		}
		var r actuator.InFlight
		if err := json.Unmarshal(b, &r); err != nil {
			d.log.Warn("files driver: unreadable in-flight record", "file", e.Name(), "err", err)
			continue
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// TakeOver raises the fence to epoch (a deposed leader's later commit,
// copy rename, abort or cleanup is refused) and returns the moves in
// flight.
func (d *Driver) TakeOver(_ context.Context, epoch uint64) ([]actuator.InFlight, error) {
	if err := d.fence.Commit(epoch, nil); err != nil {
		return nil, err
	}
	d.epoch.Store(epoch)
	return d.inFlight()
}

// fencedLocked runs f under the fence at this process's epoch and the
// store's lock.
func (d *Driver) fencedLocked(f func() error) error {
	return d.fence.Commit(d.epoch.Load(), func() error { return d.locked(f) })
}

// locked runs f holding the store's lock (flock on LayoutDir/lock, and
// this process's mutex).
func (d *Driver) locked(f func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := filepath.Join(d.cfg.LayoutDir, "lock")
	fd, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("cannot open the layout store's lock %q: %w", p, err)
	}
	defer fd.Close()
	if err := syscall.Flock(int(fd.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("cannot lock %q: %w", p, err)
	}
	return f()
}

// runCommand is the layout hook as a command: LayoutCommand + "commit" +
// FILE MIRROR COMPONENT FROM TO OLD_GENERATION NEW_GENERATION EPOCH, the
// same as BALLAST_* environment variables and the JSON commit on stdin.
// Exit 0: applied (its first line of output, if any, is the new
// component's file handle in hex); exit 3: refused; anything else: retried.
func (d *Driver) runCommand(ctx context.Context, c Commit) (string, error) {
	argv := append([]string(nil), d.cfg.LayoutCommand...)
	if c.Restripe != nil {
		argv = append(argv, "restripe", c.File, strconv.Itoa(c.Mirror), c.From, c.To,
			strconv.FormatUint(c.OldGeneration, 10), strconv.FormatUint(c.NewGeneration, 10), strconv.FormatUint(c.Epoch, 10))
	} else {
		argv = append(argv, "commit", c.File, strconv.Itoa(c.Mirror), strconv.Itoa(c.Component), c.From, c.To,
			strconv.FormatUint(c.OldGeneration, 10), strconv.FormatUint(c.NewGeneration, 10), strconv.FormatUint(c.Epoch, 10))
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	body, _ := json.Marshal(c)
	cmd.Stdin = bytes.NewReader(append(body, '\n'))
	cmd.Env = append(os.Environ(),
		"BALLAST_MOVE="+c.Move, "BALLAST_FILE="+c.File,
		"BALLAST_MIRROR="+strconv.Itoa(c.Mirror), "BALLAST_COMPONENT="+strconv.Itoa(c.Component),
		"BALLAST_FROM="+c.From, "BALLAST_TO="+c.To, "BALLAST_FROM_PATH="+c.FromPath, "BALLAST_TO_PATH="+c.ToPath,
		"BALLAST_OLD_GENERATION="+strconv.FormatUint(c.OldGeneration, 10),
		"BALLAST_NEW_GENERATION="+strconv.FormatUint(c.NewGeneration, 10),
		"BALLAST_EPOCH="+strconv.FormatUint(c.Epoch, 10))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == 3:
		return "", fmt.Errorf("%w: %s", ErrRefused, tail(stderr.Bytes()))
	case err != nil:
		return "", fmt.Errorf("%s: %w: %s", argv[0], err, tail(stderr.Bytes()))
	}
	if c.Restripe != nil {
		// one handle a line, one per new component; anything else and
		// every handle is unknown
		hs := strings.Fields(stdout.String())
		for _, h := range hs {
			if _, err := hex.DecodeString(h); err != nil || len(hs) != len(c.Restripe.To) {
				d.log.Warn("files driver: the layout hook did not print one hex file handle per new component; their handles are unknown", "output", tail(stdout.Bytes()))
				return "", nil
			}
		}
		return strings.Join(hs, "\n"), nil
	}
	line, _, _ := bufio.NewReader(&stdout).ReadLine()
	h := strings.TrimSpace(string(line))
	if _, err := hex.DecodeString(h); err != nil {
		d.log.Warn("files driver: the layout hook printed no hex file handle; the new component's handle is unknown", "output", h)
		h = ""
	}
	return h, nil
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 512 {
		s = "…" + s[len(s)-512:]
	}
	return s
}

// WriteFileAtomic writes b to p through a temporary file in the same
// folder: written, fsynced, renamed over p, the folder fsynced. A reader
// (or a crash) sees the old content or the new, never a mix.
func WriteFileAtomic(p string, b []byte) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", p, err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("cannot write %s: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("cannot sync %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot write %s: %w", p, err)
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return fmt.Errorf("cannot write %s: %w", p, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("cannot sync %s: %w", dir, err)
	}
	return nil
}

func removeSynced(p string) error {
	if err := os.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("cannot remove %s: %w", p, err)
	}
	return syncDir(filepath.Dir(p))
}
