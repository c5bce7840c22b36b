package files

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/cluster/ha"
	"github.com/ballast-io/ballast/models"
)

const unit = 4096

// stripeRig is five exports on real temp directories (e0…e4) and the file
// set/big striped over e0 and e1 in units of 4 KiB: its bytes dealt
// round-robin, unit by unit, into e0/set/big and e1/set/big.
type stripeRig struct {
	d     *Driver
	roots []string
	data  []byte
	mu    sync.Mutex
	calls []Commit
}

func dealt(data []byte, w int) [][]byte {
	out := make([][]byte, w)
	for u := 0; u*unit < len(data); u++ {
		end := min((u+1)*unit, len(data))
		out[u%w] = append(out[u%w], data[u*unit:end]...)
	}
	return out
}

func newStripeRig(t *testing.T, size int, restripe bool) *stripeRig {
	t.Helper()
	dir := t.TempDir()
	r := &stripeRig{data: make([]byte, size)}
	rand.Read(r.data)
	cfg := actuator.DefaultFilesConfig()
	cfg.BufferBytes = 1000 // not a divisor of the unit: reads and writes cross chunk edges
	cfg.LayoutDir = filepath.Join(dir, "store")
	cfg.Restripe = restripe
	for i := range 5 {
		root := filepath.Join(dir, fmt.Sprintf("ds%d", i))
		os.MkdirAll(filepath.Join(root, "set"), 0o755)
		r.roots = append(r.roots, root)
		cfg.Exports = append(cfg.Exports, actuator.DeviceSpec{Device: fmt.Sprintf("e%d", i), DS: fmt.Sprintf("ds%d", i), Path: root, Pool: "p"})
	}
	l := actuator.Layout{File: "set/big", Generation: 1, StripeUnit: unit, Mirrors: [][]actuator.Component{{}}}
	for i, b := range dealt(r.data, 2) {
		if err := os.WriteFile(filepath.Join(r.roots[i], "set", "big"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		l.Mirrors[0] = append(l.Mirrors[0], actuator.Component{Device: fmt.Sprintf("e%d", i), Bytes: int64(len(b))})
	}
	if err := WriteLayout(cfg.LayoutDir, l); err != nil {
		t.Fatal(err)
	}
	var err error
	r.d, err = New(Options{Config: cfg, Fence: ha.FenceFile{Path: filepath.Join(cfg.LayoutDir, "fence")}, Hook: func(_ context.Context, c Commit) (string, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.calls = append(r.calls, c)
		if c.Restripe != nil {
			return "0a\n0b\n0c\n0d\n", nil
		}
		return "0e", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *stripeRig) restripe() models.Move {
	return models.Move{File: "set/big", Mirror: 0, Component: 0, From: "e0", To: "e0", Bytes: int64(len(r.data)), Generation: 1,
		Restripe: &models.Restripe{From: []string{"e0", "e1"}, To: []string{"e0", "e1", "e2", "e3"}}}
}

// readBack reads set/big through its layout's components.
func (r *stripeRig) readBack(t *testing.T) []byte {
	t.Helper()
	l, err := r.d.Locate(context.Background(), "set/big")
	if err != nil {
		t.Fatal(err)
	}
	var parts [][]byte
	for _, c := range l.Mirrors[0] {
		p, err := r.d.path(c.Device, nameOf(c, l.File))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, mustRead(t, p))
	}
	var out []byte
	for u := 0; ; u++ {
		c, k := parts[u%len(parts)], u/len(parts)
		if k*unit >= len(c) {
			break
		}
		out = append(out, c[k*unit:min((k+1)*unit, len(c))]...)
	}
	return out
}

func TestFilesRestripeLifecycle(t *testing.T) {
	r := newStripeRig(t, 100_003, true)
	ctx := context.Background()
	if !r.d.Capabilities().Restripe {
		t.Fatal("a files driver with restripe on does not say it can restripe")
	}
	m := r.restripe()
	// an earlier call left part of new component 1: the copy resumes it
	want := dealt(r.data, 4)
	dst1 := filepath.Join(r.roots[1], "set", "big~g2.1")
	if err := os.WriteFile(partPath(dst1, "rs1", 0), want[1][:5000], 0o644); err != nil {
		t.Fatal(err)
	}
	pr, err := r.d.CopyRestripe(ctx, actuator.CopyRequest{ID: "rs1", Move: m, Plan: models.Action{ID: "plan1", Kind: models.ActionRebalance}})
	if err != nil || !pr.Done || pr.Bytes != int64(len(r.data)) {
		t.Fatalf("CopyRestripe = %+v, %v; want done, %d bytes", pr, err, len(r.data))
	}
	for j, b := range want {
		got := mustRead(t, filepath.Join(r.roots[j], "set", fmt.Sprintf("big~g2.%d", j)))
		if !bytes.Equal(got, b) {
			t.Fatalf("new component %d: %d bytes, not the %d dealt to it", j, len(got), len(b))
		}
	}
	if pr, err := r.d.CopyRestripe(ctx, actuator.CopyRequest{ID: "rs1", Move: m}); err != nil || !pr.Done {
		t.Fatalf("second CopyRestripe = %+v, %v; want done at once", pr, err)
	}
	v, err := r.d.VerifyRestripe(ctx, m)
	if err != nil || !v.Done || !v.Match || v.Checksum != v.CopyChecksum {
		t.Fatalf("VerifyRestripe = %+v, %v; want a sha256 match", v, err)
	}
	if fl, _ := r.d.TakeOver(ctx, 3); len(fl) != 1 || fl[0].Move.Restripe == nil {
		t.Fatalf("in flight: %+v; want the restripe", fl)
	}
	stale := m
	stale.Generation = 0
	if err := r.d.CommitRestripe(ctx, stale, 3); !errors.Is(err, actuator.ErrGenerationChanged) {
		t.Fatalf("CommitRestripe on a stale generation = %v; want ErrGenerationChanged", err)
	}
	if err := r.d.CommitRestripe(ctx, m, 3); err != nil {
		t.Fatal(err)
	}
	if err := r.d.CommitRestripe(ctx, m, 3); err != nil {
		t.Fatalf("a repeated commit = %v; want nil", err)
	}
	if len(r.calls) != 1 || r.calls[0].Restripe == nil || r.calls[0].NewGeneration != 2 || len(r.calls[0].Restripe.ToPaths) != 4 || r.calls[0].Restripe.StripeUnit != unit {
		t.Fatalf("hook calls %+v; want one restripe commit to generation 2", r.calls)
	}
	l, _ := r.d.Locate(ctx, "set/big")
	if l.Generation != 2 || len(l.Mirrors[0]) != 4 || l.Mirrors[0][2].Path != "set/big~g2.2" || l.Mirrors[0][3].Handle != "0d" {
		t.Fatalf("layout after the commit %+v; want 4 components named set/big~g2.J with the hook's handles", l)
	}
	if !bytes.Equal(r.readBack(t), r.data) {
		t.Fatal("the file read through its new components differs from the original")
	}
	if err := r.d.AbortRestripe(ctx, m); err == nil {
		t.Fatal("AbortRestripe after the commit succeeded; want a refusal")
	}
	// the old components stay until the cleanup
	if _, err := os.Stat(filepath.Join(r.roots[0], "set", "big")); err != nil {
		t.Fatalf("old component gone before the cleanup: %v", err)
	}
	if err := r.d.CleanupRestripe(ctx, m); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := os.Stat(filepath.Join(r.roots[i], "set", "big")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("old component on e%d still there after the cleanup: %v", i, err)
		}
	}
	if err := r.d.CleanupRestripe(ctx, m); err != nil {
		t.Fatalf("second CleanupRestripe = %v; want nil", err)
	}
	if fl, _ := r.d.TakeOver(ctx, 3); len(fl) != 0 {
		t.Fatalf("in flight after the cleanup: %+v", fl)
	}
	// a plain move of a restriped component moves its named file
	mv := models.Move{File: "set/big", Mirror: 0, Component: 3, From: "e3", To: "e4", Bytes: int64(len(want[3])), Generation: 2}
	if pr, err := r.d.Copy(ctx, actuator.CopyRequest{ID: "mv1", Move: mv}); err != nil || !pr.Done {
		t.Fatalf("Copy of a restriped component = %+v, %v", pr, err)
	}
	if v, err := r.d.Verify(ctx, mv); err != nil || !v.Match {
		t.Fatalf("Verify = %+v, %v", v, err)
	}
	if err := r.d.Commit(ctx, mv, 3); err != nil {
		t.Fatal(err)
	}
	if err := r.d.Cleanup(ctx, mv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.roots[3], "set", "big~g2.3")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("moved component still on e3: %v", err)
	}
	if !bytes.Equal(r.readBack(t), r.data) {
		t.Fatal("the file differs after moving a restriped component")
	}
}

func TestFilesRestripeMismatchAbortAndRefusal(t *testing.T) {
	r := newStripeRig(t, 50_000, true)
	ctx := context.Background()
	m := r.restripe()
	if _, err := r.d.CopyRestripe(ctx, actuator.CopyRequest{ID: "rs", Move: m}); err != nil {
		t.Fatal(err)
	}
	// a new component changed under it: the read-back does not match
	p := filepath.Join(r.roots[2], "set", "big~g2.2")
	b := mustRead(t, p)
	b[7] ^= 0xff
	os.WriteFile(p, b, 0o644)
	if v, err := r.d.VerifyRestripe(ctx, m); err != nil || !v.Done || v.Match {
		t.Fatalf("VerifyRestripe of a corrupt component = %+v, %v; want done, no match", v, err)
	}
	if err := r.d.AbortRestripe(ctx, m); err != nil {
		t.Fatal(err)
	}
	for j := range 4 {
		if _, err := os.Stat(filepath.Join(r.roots[j], "set", fmt.Sprintf("big~g2.%d", j))); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("new component %d left after the abort: %v", j, err)
		}
	}
	if !bytes.Equal(r.readBack(t), r.data) || len(r.calls) != 0 {
		t.Fatalf("the abort changed the file or called the hook (%d calls)", len(r.calls))
	}
	// off by default: the driver says it cannot restripe
	if newStripeRig(t, 10, false).d.Capabilities().Restripe {
		t.Fatal("a files driver without actuators.files.restripe says it can restripe")
	}
	// a layout without a stripe unit cannot be restriped
	l, _ := r.d.Locate(ctx, "set/big")
	l.StripeUnit = 0
	WriteLayout(r.d.cfg.LayoutDir, l)
	if _, err := r.d.CopyRestripe(ctx, actuator.CopyRequest{ID: "rs2", Move: m}); !actuator.IsPermanent(err) {
		t.Fatalf("CopyRestripe without a stripe unit = %v; want a permanent error", err)
	}
}
