package files

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/cluster/ha"
	"github.com/ballast-io/ballast/models"
)

const devA, devB = "aa01", "bb02"

// rig is two exports on real temp directories, one file on A.
type rig struct {
	d       *Driver
	dir     string
	a, b    string
	data    []byte
	mu      sync.Mutex
	calls   []Commit // every hook call
	applied map[string]bool
	hookErr func(c Commit) error
}

func newRig(t *testing.T, size int) *rig {
	t.Helper()
	r := &rig{dir: t.TempDir(), applied: map[string]bool{}}
	r.a, r.b = filepath.Join(r.dir, "ds1"), filepath.Join(r.dir, "ds2")
	r.data = make([]byte, size)
	rand.Read(r.data)
	if err := os.MkdirAll(filepath.Join(r.a, "set"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(r.b, 0o755)
	if err := os.WriteFile(filepath.Join(r.a, "set", "f1"), r.data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := actuator.DefaultFilesConfig()
	cfg.BufferBytes = 4096
	cfg.LayoutDir = filepath.Join(r.dir, "store")
	cfg.Exports = []actuator.DeviceSpec{{Device: devA, DS: "ds1", Path: r.a, Pool: "p"}, {Device: devB, DS: "ds2", Path: r.b, Pool: "p"}}
	var err error
	r.d, err = New(Options{Config: cfg, Fence: ha.FenceFile{Path: filepath.Join(cfg.LayoutDir, "fence")}, Hook: r.hook})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteLayout(cfg.LayoutDir, actuator.Layout{File: "set/f1", Generation: 1,
		Mirrors: [][]actuator.Component{{{Device: devA, Handle: "0a0b", Bytes: int64(size)}}}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// hook applies each generation once, as the contract asks.
func (r *rig) hook(_ context.Context, c Commit) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	if r.hookErr != nil {
		if err := r.hookErr(c); err != nil {
			return "", err
		}
	}
	r.applied[c.File+"@"+string(rune('0'+c.NewGeneration))] = true
	return "0c0d", nil
}

func (r *rig) move() models.Move {
	return models.Move{File: "set/f1", From: devA, To: devB, Bytes: int64(len(r.data)), Generation: 1}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFilesMoveLifecycle(t *testing.T) {
	r := newRig(t, 100_000)
	ctx := context.Background()
	devs, err := r.d.Devices(ctx)
	if err != nil || len(devs) != 2 || devs[0].State != actuator.StateOnline || devs[0].CapacityBytes == 0 {
		t.Fatalf("Devices = %+v, %v; want two online devices with a capacity", devs, err)
	}
	ss, err := r.d.Stripes(ctx, devA)
	if err != nil || len(ss) != 1 || ss[0].File != "set/f1" || ss[0].Handle != "0a0b" {
		t.Fatalf("Stripes(A) = %+v, %v; want set/f1", ss, err)
	}
	m := r.move()
	// a copy cut short earlier left a part file: Copy resumes it
	dst := filepath.Join(r.b, "set", "f1")
	part := partPath(dst, "mv1", 0)
	os.MkdirAll(filepath.Dir(dst), 0o755)
	if err := os.WriteFile(part, r.data[:30_000], 0o644); err != nil {
		t.Fatal(err)
	}
	pr, err := r.d.Copy(ctx, actuator.CopyRequest{ID: "mv1", Move: m, Plan: models.Action{ID: "plan1", Kind: models.ActionRebalance}})
	if err != nil || !pr.Done || pr.Bytes != int64(len(r.data)) {
		t.Fatalf("Copy = %+v, %v; want done, %d bytes", pr, err, len(r.data))
	}
	if _, err := os.Stat(part); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("part file still there after the copy: %v", err)
	}
	if !bytes.Equal(mustRead(t, dst), r.data) {
		t.Fatal("copy differs from the source")
	}
	// idempotent: a second copy is done at once
	if pr, err := r.d.Copy(ctx, actuator.CopyRequest{ID: "mv1", Move: m}); err != nil || !pr.Done {
		t.Fatalf("second Copy = %+v, %v", pr, err)
	}
	v, err := r.d.Verify(ctx, m)
	if err != nil || !v.Done || !v.Match || !strings.HasPrefix(v.Checksum, "sha256:") || v.Checksum != v.CopyChecksum {
		t.Fatalf("Verify = %+v, %v; want a sha256 match", v, err)
	}
	fl, err := r.d.TakeOver(ctx, 7)
	if err != nil || len(fl) != 1 || fl[0].ID != "mv1" || fl[0].Plan.ID != "plan1" || fl[0].Move.File != "set/f1" {
		t.Fatalf("TakeOver = %+v, %v; want the move in flight", fl, err)
	}
	if err := r.d.Commit(ctx, m, 7); err != nil {
		t.Fatal(err)
	}
	l, err := r.d.Locate(ctx, "set/f1")
	if err != nil || l.Generation != 2 || l.Mirrors[0][0].Device != devB || l.Mirrors[0][0].Handle != "0c0d" {
		t.Fatalf("Locate after commit = %+v, %v; want generation 2 on %s with the hook's handle", l, err, devB)
	}
	if len(r.calls) != 1 || r.calls[0].Epoch != 7 || r.calls[0].NewGeneration != 2 || r.calls[0].ToPath != dst {
		t.Fatalf("hook calls = %+v; want one at epoch 7, generation 2", r.calls)
	}
	// the old copy is untouched until the cleanup
	if !bytes.Equal(mustRead(t, filepath.Join(r.a, "set", "f1")), r.data) {
		t.Fatal("old copy changed before the cleanup")
	}
	if err := r.d.Abort(ctx, m); err == nil {
		t.Fatal("Abort after the commit succeeded; want a refusal (the layout points at the copy)")
	}
	if err := r.d.Cleanup(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.a, "set", "f1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old copy still there after the cleanup: %v", err)
	}
	if err := r.d.Cleanup(ctx, m); err != nil {
		t.Fatalf("second Cleanup = %v; want nil (idempotent)", err)
	}
	if fl, _ := r.d.TakeOver(ctx, 7); len(fl) != 0 {
		t.Fatalf("moves in flight after the cleanup: %+v", fl)
	}
	if !bytes.Equal(mustRead(t, dst), r.data) {
		t.Fatal("moved file differs from the original")
	}
}

func TestFilesCommitCompareAndSwap(t *testing.T) {
	r := newRig(t, 10_000)
	ctx := context.Background()
	m := r.move()
	if _, err := r.d.Copy(ctx, actuator.CopyRequest{ID: "mv", Move: m}); err != nil {
		t.Fatal(err)
	}
	stale := m
	stale.Generation = 0
	if err := r.d.Commit(ctx, stale, 1); !errors.Is(err, actuator.ErrGenerationChanged) {
		t.Fatalf("Commit on a stale generation = %v; want ErrGenerationChanged", err)
	}
	if len(r.calls) != 0 {
		t.Fatalf("hook called %d times for a refused commit; want 0", len(r.calls))
	}
	// a leader with a higher epoch took over: the old epoch is fenced out
	if _, err := r.d.TakeOver(ctx, 9); err != nil {
		t.Fatal(err)
	}
	if err := r.d.Commit(ctx, m, 8); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("Commit at epoch 8 after epoch 9 took over = %v; want ErrFenced", err)
	}
	if l, _ := r.d.Locate(ctx, "set/f1"); l.Generation != 1 || l.Mirrors[0][0].Device != devA || len(r.calls) != 0 {
		t.Fatalf("a fenced commit changed the layout (%+v) or called the hook (%d)", l, len(r.calls))
	}
	// the hook refuses: the layout stays, the move must abort
	r.hookErr = func(Commit) error { return ErrRefused }
	if err := r.d.Commit(ctx, m, 9); !errors.Is(err, actuator.ErrGenerationChanged) {
		t.Fatalf("Commit the hook refused = %v; want ErrGenerationChanged", err)
	}
	if l, _ := r.d.Locate(ctx, "set/f1"); l.Generation != 1 {
		t.Fatalf("refused commit left generation %d; want 1", l.Generation)
	}
	if err := r.d.Abort(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.b, "set", "f1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Abort left the new copy: %v", err)
	}
	if !bytes.Equal(mustRead(t, filepath.Join(r.a, "set", "f1")), r.data) {
		t.Fatal("Abort touched the source")
	}
}

// A hook that applied the commit but whose answer was lost (the mds died,
// the hook timed out) is asked again; the store finishes the same commit.
func TestFilesPendingCommitFinishes(t *testing.T) {
	r := newRig(t, 10_000)
	ctx := context.Background()
	m := r.move()
	if _, err := r.d.Copy(ctx, actuator.CopyRequest{ID: "mv", Move: m}); err != nil {
		t.Fatal(err)
	}
	lost := true
	r.hookErr = func(c Commit) error {
		if lost {
			lost = false
			r.applied[c.File+"@"+string(rune('0'+c.NewGeneration))] = true
			return errors.New("timed out")
		}
		return nil
	}
	if err := r.d.Commit(ctx, m, 0); err == nil {
		t.Fatal("Commit with a lost hook answer succeeded; want an error to retry")
	}
	if l, _ := r.d.Locate(ctx, "set/f1"); l.Generation != 1 {
		t.Fatalf("Locate with a pending commit = generation %d; want 1 until the hook answers", l.Generation)
	}
	if ss, _ := r.d.Stripes(ctx, devA); len(ss) != 1 || !ss[0].Busy {
		t.Fatalf("Stripes with a pending commit = %+v; want busy", ss)
	}
	// an abort now finishes the pending commit first, and then refuses
	if err := r.d.Abort(ctx, m); err == nil {
		t.Fatal("Abort of a move whose pending commit the hook applied succeeded")
	}
	if l, _ := r.d.Locate(ctx, "set/f1"); l.Generation != 2 || l.Mirrors[0][0].Device != devB {
		t.Fatalf("after the retry: %+v; want generation 2 on %s", l, devB)
	}
	if err := r.d.Commit(ctx, m, 0); err != nil {
		t.Fatalf("Commit of a move already committed = %v; want nil", err)
	}
	if len(r.calls) != 2 || r.calls[0].NewGeneration != 2 || r.calls[1].NewGeneration != 2 || len(r.applied) != 1 {
		t.Fatalf("hook calls %+v, applied %v; want the same generation twice, applied once", r.calls, r.applied)
	}
}

func TestFilesVerifyMismatchAndAbort(t *testing.T) {
	r := newRig(t, 50_000)
	ctx := context.Background()
	m := r.move()
	if _, err := r.d.Copy(ctx, actuator.CopyRequest{ID: "mv", Move: m}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(r.b, "set", "f1")
	bad := append([]byte(nil), r.data...)
	bad[4242] ^= 1
	os.WriteFile(dst, bad, 0o644)
	v, err := r.d.Verify(ctx, m)
	if err != nil || !v.Done || v.Match {
		t.Fatalf("Verify of a corrupted copy = %+v, %v; want a mismatch", v, err)
	}
	os.WriteFile(partPath(dst, "other", 3), []byte("x"), 0o644)
	if err := r.d.Abort(ctx, m); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(filepath.Dir(dst))
	if len(left) != 0 {
		t.Fatalf("Abort left %v in the destination", left)
	}
	if err := r.d.Abort(ctx, m); err != nil {
		t.Fatalf("second Abort = %v; want nil", err)
	}
	if v, err := r.d.Verify(ctx, m); err != nil || v.Match {
		t.Fatalf("Verify without a copy = %+v, %v; want no match", v, err)
	}
}

func TestFilesLayoutCommand(t *testing.T) {
	r := newRig(t, 4096)
	log := filepath.Join(r.dir, "hook.log")
	script := filepath.Join(r.dir, "hook.sh")
	os.WriteFile(script, []byte(`#!/bin/sh
echo "$@ move=$BALLAST_MOVE to=$BALLAST_TO_PATH" >> `+log+`
[ -e `+r.dir+`/refuse ] && { echo "layout moved on" >&2; exit 3; }
[ -e `+r.dir+`/fail ] && { echo "mds busy" >&2; exit 1; }
echo 0e0f
`), 0o755)
	r.d.cfg.LayoutCommand = []string{script}
	r.d.hook = r.d.runCommand
	ctx := context.Background()
	m := r.move()
	if _, err := r.d.Copy(ctx, actuator.CopyRequest{ID: "mv", Move: m}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(r.dir, "fail"), nil, 0o644)
	if err := r.d.Commit(ctx, m, 3); err == nil || !strings.Contains(err.Error(), "mds busy") || actuator.IsPermanent(err) {
		t.Fatalf("Commit with a failing hook = %v; want a retryable error with its stderr", err)
	}
	os.Remove(filepath.Join(r.dir, "fail"))
	os.WriteFile(filepath.Join(r.dir, "refuse"), nil, 0o644)
	if err := r.d.Commit(ctx, m, 3); !errors.Is(err, actuator.ErrGenerationChanged) || !strings.Contains(err.Error(), "layout moved on") {
		t.Fatalf("Commit the hook refuses = %v; want ErrGenerationChanged", err)
	}
	os.Remove(filepath.Join(r.dir, "refuse"))
	if err := r.d.Commit(ctx, m, 3); err != nil {
		t.Fatal(err)
	}
	l, _ := r.d.Locate(ctx, "set/f1")
	if l.Generation != 2 || l.Mirrors[0][0].Handle != "0e0f" {
		t.Fatalf("layout = %+v; want generation 2 with handle 0e0f from the hook", l)
	}
	got := string(mustRead(t, log))
	want := "commit set/f1 0 0 aa01 bb02 1 2 3 move=set/f1#0.0:aa01>bb02@1 to=" + filepath.Join(r.b, "set", "f1")
	if !strings.Contains(got, want) {
		t.Fatalf("hook log:\n%s\nwant a line %q", got, want)
	}
}

func TestFilesSetStateAndBadInput(t *testing.T) {
	r := newRig(t, 10)
	ctx := context.Background()
	if err := r.d.SetState(ctx, models.Subject{Kind: models.SubjectDS, ID: "ds2"}, actuator.StateDraining); err != nil {
		t.Fatal(err)
	}
	devs, _ := r.d.Devices(ctx)
	if devs[0].State != actuator.StateOnline || devs[1].State != actuator.StateDraining {
		t.Fatalf("states = %s, %s; want online, draining", devs[0].State, devs[1].State)
	}
	if err := r.d.SetState(ctx, models.Subject{Kind: models.SubjectDevice, ID: "ffff"}, actuator.StateOnline); !errors.Is(err, actuator.ErrNotFound) {
		t.Fatalf("SetState of an unknown device = %v; want ErrNotFound", err)
	}
	if _, err := r.d.Locate(ctx, "nope"); !errors.Is(err, actuator.ErrNotFound) {
		t.Fatalf("Locate of an unknown file = %v; want ErrNotFound", err)
	}
	if _, err := r.d.Locate(ctx, "../etc/passwd"); err == nil || !actuator.IsPermanent(err) {
		t.Fatalf("Locate(../etc/passwd) = %v; want a permanent error", err)
	}
	m := r.move()
	m.To = "cc03"
	if _, err := r.d.Copy(ctx, actuator.CopyRequest{ID: "x", Move: m}); err == nil || !actuator.IsPermanent(err) {
		t.Fatalf("Copy to an unknown device = %v; want a permanent error", err)
	}
}

// Two drivers on one store, as the two mds of an HA pair: once the second
// took over at a higher epoch, the first (deposed, maybe paused) can
// neither put a copy in place nor abort or clean up anything.
func TestFilesDeposedLeaderIsFenced(t *testing.T) {
	r := newRig(t, 20_000)
	ctx := context.Background()
	if _, err := r.d.TakeOver(ctx, 1); err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Config: r.d.cfg, Fence: ha.FenceFile{Path: filepath.Join(r.d.cfg.LayoutDir, "fence")}, Hook: r.hook})
	if err != nil {
		t.Fatal(err)
	}
	m := r.move()
	if _, err := r.d.Copy(ctx, actuator.CopyRequest{ID: "mv", Move: m}); err != nil {
		t.Fatal(err)
	}
	fl, err := b.TakeOver(ctx, 2)
	if err != nil || len(fl) != 1 || fl[0].ID != "mv" {
		t.Fatalf("new leader's TakeOver = %+v, %v; want the move in flight", fl, err)
	}
	dst := filepath.Join(r.b, "set", "f1")
	os.Remove(dst)
	if _, err := r.d.Copy(ctx, actuator.CopyRequest{ID: "mv", Move: m}); err == nil {
		t.Fatal("a deposed leader's Copy succeeded")
	}
	if left, _ := os.ReadDir(filepath.Dir(dst)); len(left) != 0 {
		t.Fatalf("a deposed leader's Copy left %v", left)
	}
	if err := r.d.Commit(ctx, m, 1); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("deposed Commit = %v; want ErrFenced", err)
	}
	if _, err := b.Copy(ctx, actuator.CopyRequest{ID: "mv", Move: m}); err != nil {
		t.Fatal(err)
	}
	if err := r.d.Abort(ctx, m); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("deposed Abort = %v; want ErrFenced", err)
	}
	if !bytes.Equal(mustRead(t, dst), r.data) {
		t.Fatal("the new leader's copy was touched")
	}
	if err := b.Commit(ctx, m, 2); err != nil {
		t.Fatal(err)
	}
	if err := r.d.Cleanup(ctx, m); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("deposed Cleanup = %v; want ErrFenced", err)
	}
	if err := b.Cleanup(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// A copy paused under way stops at its next chunk and keeps its part
// file; while paused Copy and Verify move nothing; after the resume the
// copy goes on from where it stopped and ends byte-identical.
func TestFilesPauseAndResume(t *testing.T) {
	r := newRig(t, 4_000_000)
	ctx := context.Background()
	m := r.move()
	dst := filepath.Join(r.b, "set", "f1")
	part := partPath(dst, "mv1", 0)
	type result struct {
		pr  actuator.Progress
		err error
	}
	res := make(chan result, 1)
	go func() {
		// paced at 100 kB/s the copy would take 40 s: it is paused long before
		pr, err := r.d.Copy(ctx, actuator.CopyRequest{ID: "mv1", Move: m, RateLimit: 100_000})
		res <- result{pr, err}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if fi, err := os.Stat(part); err == nil && fi.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the copy wrote nothing to its part file")
		}
	}
	if err := r.d.Pause(ctx, "mv1", m, true); err != nil {
		t.Fatal(err)
	}
	got := <-res
	if got.err != nil || got.pr.Done || got.pr.Bytes <= 0 || got.pr.Bytes >= int64(len(r.data)) {
		t.Fatalf("paused Copy = %+v, %v; want not done, part of the bytes", got.pr, got.err)
	}
	if fi, err := os.Stat(part); err != nil || fi.Size() != got.pr.Bytes {
		t.Fatalf("part file after the pause: %v, %v; want %d bytes kept", fi, err, got.pr.Bytes)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("destination in place while paused: %v", err)
	}
	// paused: nothing moves, nothing is read back
	pr, err := r.d.Copy(ctx, actuator.CopyRequest{ID: "mv1", Move: m})
	if err != nil || pr.Done || pr.Bytes != got.pr.Bytes {
		t.Fatalf("Copy while paused = %+v, %v; want not done at %d bytes", pr, err, got.pr.Bytes)
	}
	if fi, _ := os.Stat(part); fi.Size() != got.pr.Bytes {
		t.Fatalf("part file grew to %d bytes while paused; want %d", fi.Size(), got.pr.Bytes)
	}
	if v, err := r.d.Verify(ctx, m); err != nil || v.Done {
		t.Fatalf("Verify while paused = %+v, %v; want not done", v, err)
	}
	// resumed: the copy goes on from the part file
	if err := r.d.Pause(ctx, "mv1", m, false); err != nil {
		t.Fatal(err)
	}
	pr, err = r.d.Copy(ctx, actuator.CopyRequest{ID: "mv1", Move: m})
	if err != nil || !pr.Done || pr.Bytes != int64(len(r.data)) {
		t.Fatalf("Copy after the resume = %+v, %v; want done, %d bytes", pr, err, len(r.data))
	}
	if !bytes.Equal(mustRead(t, dst), r.data) {
		t.Fatal("a copy paused and resumed differs from the source")
	}
	v, err := r.d.Verify(ctx, m)
	if err != nil || !v.Done || !v.Match {
		t.Fatalf("Verify after the resume = %+v, %v; want a match", v, err)
	}
}
