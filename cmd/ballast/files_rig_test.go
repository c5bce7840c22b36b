package main

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/actuator/files"
	"github.com/ballast-io/ballast/models"
)

// filesRig is a cluster for the files driver on real directories: eight
// data servers of one device each (ds0 … ds7, their exports under
// dir/exports), a layout store, files of random content, and a layout hook
// (a shell script) that applies each commit once, refuses an epoch lower
// than one it has seen, and logs every call.
type filesRig struct {
	dir, store, cfg string
	devs            []string          // device ids, ds0 first
	sums            map[string]string // file → sha256 of its original bytes
	sizes           map[string]int64
}

const rigFileBytes = 1 << 20

func rigDevice(i int) string { return fmt.Sprintf("ba11a57000000000000000000000f0%02x", i) }

// newFilesRig makes the cluster: 16 files on ds0 and 2 on each other DS,
// so that ds0 is hot when every file is read alike. extraYAML is appended
// to the mds config (ha: …).
func newFilesRig(t *testing.T, extraYAML string) *filesRig {
	t.Helper()
	return newFilesRigN(t, 16, 2, 2, extraYAML)
}

// newFilesRigN puts hot files on ds0 and cold on each other DS; at most
// concurrent moves run at once.
func newFilesRigN(t *testing.T, hot, cold, concurrent int, extraYAML string) *filesRig {
	t.Helper()
	r := &filesRig{dir: t.TempDir(), sums: map[string]string{}, sizes: map[string]int64{}}
	r.store = filepath.Join(r.dir, "store")
	var exports strings.Builder
	for i := range 8 {
		id := rigDevice(i)
		r.devs = append(r.devs, id)
		p := filepath.Join(r.dir, "exports", fmt.Sprintf("ds%d", i))
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		// 4 MB/s: copies are paced to device_share (0.25) / max_moves_per_device (2)
		// of it, 0.5 MB/s, so a 1 MiB copy takes about two seconds
		fmt.Fprintf(&exports, "      - {device: %s, ds: ds%d, name: ds%d/nvme0n1, pool: fast, path: %s, bandwidth_bytes: 4000000}\n", id, i, i, p)
	}
	n := 0
	place := func(dev int) {
		name := fmt.Sprintf("set%d/shard-%03d", n%3, n)
		n++
		b := make([]byte, rigFileBytes-int(n)*4096)
		rand.Read(b)
		p := filepath.Join(r.dir, "exports", fmt.Sprintf("ds%d", dev), name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		r.sums[name] = hex.EncodeToString(sum[:])
		r.sizes[name] = int64(len(b))
		if err := files.WriteLayout(r.store, actuator.Layout{File: name, Generation: 1,
			Mirrors: [][]actuator.Component{{{Device: r.devs[dev], Handle: handleOf(name, r.devs[dev]), Bytes: int64(len(b))}}}}); err != nil {
			t.Fatal(err)
		}
	}
	for range hot {
		place(0)
	}
	for d := 1; d < 8; d++ {
		for range cold {
			place(d)
		}
	}
	hook := filepath.Join(r.dir, "hook.sh")
	if err := os.WriteFile(hook, []byte(fmt.Sprintf(`#!/bin/sh
# the crash tests' layout hook: applies each (file, generation) once,
# refuses epochs older than one seen, logs every call
d=%s
exec 9>>"$d/hook.lock"
flock 9
echo "$BALLAST_FILE $BALLAST_NEW_GENERATION $BALLAST_TO $BALLAST_EPOCH" >> "$d/hook-calls.log"
seen=$(cat "$d/hook-epoch" 2>/dev/null || echo 0)
if [ "$BALLAST_EPOCH" -lt "$seen" ]; then echo "epoch $BALLAST_EPOCH < $seen" >&2; exit 3; fi
echo "$BALLAST_EPOCH" > "$d/hook-epoch"
line="$BALLAST_FILE $BALLAST_NEW_GENERATION $BALLAST_TO"
if grep -qF "$line " "$d/hook-applied.log" 2>/dev/null; then
  : # a repeat of a commit applied before (its answer was lost): applied once
elif grep -qF "$BALLAST_FILE $BALLAST_NEW_GENERATION " "$d/hook-applied.log" 2>/dev/null; then
  echo "generation $BALLAST_NEW_GENERATION of $BALLAST_FILE is another move's" >&2; exit 3
else
  echo "$line $BALLAST_EPOCH" >> "$d/hook-applied.log"
fi
printf '%%s' "$BALLAST_FILE@$BALLAST_TO" | sha256sum | cut -c1-16
`, r.dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	r.cfg = filepath.Join(r.dir, "mds.yml")
	cfg := fmt.Sprintf(`role: mds
pipeline:
  tick: 1s
actuators:
  driver: files
  mode: auto
  plan_every: 1s
  budgets: {max_concurrent_moves: %d, max_moves_per_device: 2, cooldown: 1s, checkpoint_margin: 1s}
  move: {grace: 1s, backoff: 1s, max_backoff: 2s, max_attempts: 10}
  verify: {window: 1s, rollback: false}
  files:
    layout_dir: %s
    layout_command: [%s]
    buffer_bytes: 65536
    exports:
%s%s`, concurrent, r.store, hook, exports.String(), extraYAML)
	if err := os.WriteFile(r.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// handleOf is the file handle the rig's hook gives a component: the
// first 16 hex digits of sha256(FILE@DEVICE).
func handleOf(file, dev string) string {
	s := sha256.Sum256([]byte(file + "@" + dev))
	return hex.EncodeToString(s[:8])
}

// layouts reads every layout in the store.
func (r *filesRig) layouts(t *testing.T) map[string]actuator.Layout {
	t.Helper()
	out, err := r.readLayouts()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (r *filesRig) readLayouts() (map[string]actuator.Layout, error) {
	out := map[string]actuator.Layout{}
	root := filepath.Join(r.store, "layouts")
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || !strings.HasSuffix(p, ".json") || strings.HasPrefix(fi.Name(), ".") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var l actuator.Layout
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("layout %s: %w", p, err)
		}
		out[l.File] = l
		return nil
	})
	return out, err
}

// poster reads the files as GPU clients would, where the layout says they
// are, and posts LAYOUTSTATS to every mds at addrs() every second: every
// file alike (10 MB/s), so the device holding the most files is hot.
// The clients follow a committed layout to the new device and handle.
func (r *filesRig) poster(addrs func() []string, stop <-chan struct{}) {
	type ctr struct{ secs, ops, bytes int64 }
	ctrs := map[string]*ctr{}
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
		}
		var reps []string
		i := 0
		ls, err := r.readLayouts()
		if err != nil {
			continue // a layout between writes: read again next second
		}
		for file, l := range ls {
			i++
			c := l.Mirrors[0][0]
			h := c.Handle
			if h == "" {
				h = handleOf(file, c.Device)
			}
			k := file + "@" + c.Device
			x := ctrs[k]
			if x == nil {
				x = &ctr{}
				ctrs[k] = x
			}
			x.secs++
			x.ops += 100
			x.bytes += 10_000_000
			reps = append(reps, fmt.Sprintf(`{"ffis_offset":0,"ffis_length":%d,"ffis_stateid":{"seqid":1,"other":"%024x"},
 "ffis_read":{"ii_count":%d,"ii_bytes":%d},"ffis_write":{"ii_count":0,"ii_bytes":0},"ffis_deviceid":%q,
 "ffis_layoutupdate":{"ffl_addr":{"na_r_netid":"tcp","na_r_addr":"127.0.0.%d.8.1"},"ffl_fhandle":%q,
  "ffl_read":{"ffil_ops_requested":%d,"ffil_bytes_requested":%d,"ffil_ops_completed":%d,"ffil_bytes_completed":%d,"ffil_bytes_not_delivered":0,
   "ffil_total_busy_time":{"seconds":%d,"nseconds":0},"ffil_aggregate_completion_time":{"seconds":%d,"nseconds":0}},
  "ffl_write":{"ffil_ops_requested":0,"ffil_bytes_requested":0,"ffil_ops_completed":0,"ffil_bytes_completed":0,"ffil_bytes_not_delivered":0,
   "ffil_total_busy_time":{"seconds":0,"nseconds":0},"ffil_aggregate_completion_time":{"seconds":0,"nseconds":0}},
  "ffl_duration":{"seconds":%d,"nseconds":0},"ffl_local":false}}`,
				r.sizes[file], i, x.ops, x.bytes, c.Device, devIndex(r.devs, c.Device)+1, h,
				x.ops, x.bytes, x.ops, x.bytes, x.secs/2, x.secs/50, x.secs))
		}
		body := fmt.Sprintf(`{"client_id":"gpu01","report_time":%q,"reports":[%s]}`, time.Now().UTC().Format(time.RFC3339), strings.Join(reps, ","))
		for _, a := range addrs() {
			c := http.Client{Timeout: 2 * time.Second}
			resp, err := c.Post("http://"+a+"/api/v1/layoutstats", "application/json", strings.NewReader(body))
			if err != nil {
				continue // the mds is down (killed or stopped on purpose)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}

func devIndex(devs []string, id string) int {
	for i, d := range devs {
		if d == id {
			return i
		}
	}
	return -1
}

// check proves the data safe: every file's bytes on the device its layout
// names equal the original (sha256), no file is anywhere else (no
// duplicate left, no part file), and every commit (a generation above 1)
// was applied by the hook exactly once, and nothing else was. It returns
// the moves committed.
func (r *filesRig) check(t *testing.T) (commits int) {
	t.Helper()
	ls := r.layouts(t)
	if len(ls) != len(r.sums) {
		t.Fatalf("layout store holds %d files; want %d", len(ls), len(r.sums))
	}
	where := map[string]string{}
	for f, l := range ls {
		where[f] = l.Mirrors[0][0].Device
		commits += int(l.Generation - 1)
	}
	for i, dev := range r.devs {
		root := filepath.Join(r.dir, "exports", fmt.Sprintf("ds%d", i))
		filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if where[rel] != dev {
				t.Errorf("%s holds %s, but its layout says %q (a copy left behind: lost or duplicated)", dev, rel, where[rel])
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			s := sha256.Sum256(b)
			if hex.EncodeToString(s[:]) != r.sums[rel] {
				t.Errorf("%s on %s: sha256 %x; want %s", rel, dev, s, r.sums[rel])
			}
			delete(where, rel)
			return nil
		})
	}
	for f, dev := range where {
		t.Errorf("%s is lost: its layout says %s, which does not hold it", f, dev)
	}
	applied := fileLines(filepath.Join(r.dir, "hook-applied.log"))
	seen := map[string]bool{}
	for _, l := range applied {
		fs := strings.Fields(l)
		k := fs[0] + " " + fs[1]
		if seen[k] {
			t.Errorf("the hook applied %s twice", k)
		}
		seen[k] = true
	}
	for f, l := range ls {
		for g := uint64(2); g <= l.Generation; g++ {
			if !seen[fmt.Sprintf("%s %d", f, g)] {
				t.Errorf("%s generation %d is in the store, but the hook never applied it", f, g)
			}
			delete(seen, fmt.Sprintf("%s %d", f, g))
		}
	}
	for k := range seen {
		t.Errorf("the hook applied %s, which the store never committed", k)
	}
	return commits
}

func fileLines(p string) []string {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// moves returns the mds's stripe moves.
func moves(addr string) ([]models.Action, error) { return actionsAt(addr, "?kind=move_stripe") }

// actionsAt returns the mds's actions that pass the query.
func actionsAt(addr, query string) ([]models.Action, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/actions" + query)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Data []models.Action `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	return body.Data, nil
}

// movesSummary counts moves by state (for logs and checks).
func movesSummary(ms []models.Action) string {
	n := map[string]int{}
	for _, m := range ms {
		n[string(m.State)]++
	}
	ks := make([]string, 0, len(n))
	for k := range n {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&b, "%s=%d ", k, n[k])
	}
	return strings.TrimSpace(b.String())
}

// startMDSEnv is startMDS with extra environment variables.
func startMDSEnv(t *testing.T, env []string, dataDir string, extra ...string) *mdsProc {
	t.Helper()
	return startMDSCmd(t, func(c *exec.Cmd) { c.Env = append(os.Environ(), env...) }, []string{ballastBin}, dataDir, extra...)
}
