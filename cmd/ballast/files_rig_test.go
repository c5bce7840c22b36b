package main

import (
	"bufio"
	"bytes"
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
	"strconv"
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
	rates           map[string]int64 // file → bytes/s its clients read (default rigRate)
	// toy is the root of the exec driver's toy MDS
	// (actuator/testdata/exec-mds.sh) when the rig runs driver: exec
	// (newExecRig); "" for the files driver.
	toy string
}

// rigRate is how fast the clients read each file unless rates says
// otherwise, bytes/s.
const rigRate = 10_000_000

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
	r := newRig(t, "")
	r.store = filepath.Join(r.dir, "store")
	exports := r.makeDevices(t, func(i int) string { return "path: " + r.devDir(i) })
	r.placeFiles(t, hot, cold, "set%d/shard-%03d")
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
if [ "$1" = restripe ]; then
  # one handle a line, one per new component (FILE~gG.J on its device)
  j=0
  for dev in $(echo "$BALLAST_TO" | tr , ' '); do
    printf '%%s' "$BALLAST_FILE~g$BALLAST_NEW_GENERATION.$j@$dev" | sha256sum | cut -c1-16
    j=$((j+1))
  done
  exit 0
fi
printf '%%s' "$BALLAST_FILE@$BALLAST_TO" | sha256sum | cut -c1-16
`, r.dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	r.writeConfig(t, concurrent, fmt.Sprintf(`  driver: files
  files:
    layout_dir: %s
    layout_command: [%s]
    buffer_bytes: 65536
    exports:
%s`, r.store, hook, exports)+extraYAML)
	return r
}

// newRig is a rig in a fresh directory, over the toy MDS under
// dir/mds when toy is set (the exec driver), without devices or files.
func newRig(t *testing.T, toy string) *filesRig {
	t.Helper()
	r := &filesRig{dir: t.TempDir(), sums: map[string]string{}, sizes: map[string]int64{}, rates: map[string]int64{}}
	if toy != "" {
		r.toy = filepath.Join(r.dir, toy)
	}
	return r
}

// makeDevices makes the eight devices, one a DS, each directory
// (devDir) created, and returns their config entries (indented for a
// list under actuators.files or .exec), each with extra(i) added. At
// 4 MB/s, copies are paced to device_share (0.25) / max_moves_per_device
// (2) of it, 0.5 MB/s, so a 1 MiB copy takes about two seconds.
func (r *filesRig) makeDevices(t *testing.T, extra func(i int) string) string {
	t.Helper()
	var b strings.Builder
	for i := range 8 {
		id := rigDevice(i)
		r.devs = append(r.devs, id)
		if err := os.MkdirAll(r.devDir(i), 0o755); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "      - {device: %s, ds: ds%d, name: ds%d/nvme0n1, pool: fast, bandwidth_bytes: 4000000, %s}\n", id, i, i, extra(i))
	}
	return b.String()
}

// placeFiles writes the rig's files of random content: hot on ds0, cold
// on each other DS, file n named by the format name (over n mod 3 and n)
// and 4096·(n+1) bytes short of 1 MiB, at devDir, each at generation 1
// (one component).
func (r *filesRig) placeFiles(t *testing.T, hot, cold int, name string) {
	t.Helper()
	n := 0
	place := func(dev int) {
		f := fmt.Sprintf(name, n%3, n)
		n++
		b := make([]byte, rigFileBytes-int(n)*4096)
		rand.Read(b)
		p := filepath.Join(r.devDir(dev), f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		r.sums[f] = hex.EncodeToString(sum[:])
		r.sizes[f] = int64(len(b))
		r.writeLayout(t, actuator.Layout{File: f, Generation: 1,
			Mirrors: [][]actuator.Component{{{Device: r.devs[dev], Handle: handleOf(f, r.devs[dev]), Bytes: int64(len(b))}}}})
	}
	for range hot {
		place(0)
	}
	for d := 1; d < 8; d++ {
		for range cold {
			place(d)
		}
	}
}

// writeConfig writes the mds config at r.cfg: auto mode, planning every
// second with short budgets and backoffs, at most concurrent moves at
// once; driverYAML (indented under actuators) names the driver and its
// settings.
func (r *filesRig) writeConfig(t *testing.T, concurrent int, driverYAML string) {
	t.Helper()
	r.cfg = filepath.Join(r.dir, "mds.yml")
	cfg := fmt.Sprintf(`role: mds
pipeline:
  tick: 1s
actuators:
  mode: auto
  plan_every: 1s
  budgets: {max_concurrent_moves: %d, max_moves_per_device: 2, cooldown: 1s, checkpoint_margin: 1s}
  move: {grace: 1s, backoff: 1s, max_backoff: 2s, max_attempts: 10}
  verify: {window: 1s, rollback: false}
%s`, concurrent, driverYAML)
	if err := os.WriteFile(r.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeLayout records l where the MDS keeps it: the files driver's
// layout store, or the toy MDS's meta directory.
func (r *filesRig) writeLayout(t *testing.T, l actuator.Layout) {
	t.Helper()
	var err error
	if r.toy != "" {
		err = writeToyLayout(filepath.Join(r.toy, "meta"), l)
	} else {
		err = files.WriteLayout(r.store, l)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// devDir is the directory that holds device i's components: its export
// (files driver) or the toy MDS's device directory (exec driver).
func (r *filesRig) devDir(i int) string {
	if r.toy != "" {
		return filepath.Join(r.toy, "dev", r.devs[i])
	}
	return filepath.Join(r.dir, "exports", fmt.Sprintf("ds%d", i))
}

// handleOf is the file handle the rig's hook gives a component: the
// first 16 hex digits of sha256(FILE@DEVICE).
func handleOf(file, dev string) string {
	s := sha256.Sum256([]byte(file + "@" + dev))
	return hex.EncodeToString(s[:8])
}

// rigLayout is a layout file as the store holds it: the layout, a
// commit whose hook answer is not known yet, and the components a
// committed restripe retired until its cleanup.
type rigLayout struct {
	actuator.Layout
	Pending json.RawMessage      `json:"pending,omitempty"`
	Retired []actuator.Component `json:"retired,omitempty"`
}

// addStriped writes a file of size random bytes striped over devs in
// units of unit bytes (flex-files striping: logical unit u is unit u ÷ W
// of component u mod W, each component FILE on its device), its layout
// at generation 1, and has the clients read it at rate bytes/s.
func (r *filesRig) addStriped(t *testing.T, name string, devs []int, size, unit, rate int64) {
	t.Helper()
	b := make([]byte, size)
	rand.Read(b)
	parts := make([][]byte, len(devs))
	for off := int64(0); off < size; off += unit {
		j := (off / unit) % int64(len(devs))
		parts[j] = append(parts[j], b[off:min(off+unit, size)]...)
	}
	var comps []actuator.Component
	for j, dev := range devs {
		p := filepath.Join(r.devDir(dev), name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, parts[j], 0o644); err != nil {
			t.Fatal(err)
		}
		comps = append(comps, actuator.Component{Device: r.devs[dev], Handle: handleOf(name, r.devs[dev]), Bytes: int64(len(parts[j]))})
	}
	sum := sha256.Sum256(b)
	r.sums[name] = hex.EncodeToString(sum[:])
	r.sizes[name] = size
	r.rates[name] = rate
	r.writeLayout(t, actuator.Layout{File: name, Generation: 1, StripeUnit: unit, Mirrors: [][]actuator.Component{comps}})
}

// layouts reads every layout in the store.
func (r *filesRig) layouts(t *testing.T) map[string]rigLayout {
	t.Helper()
	out, err := r.readLayouts()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (r *filesRig) readLayouts() (map[string]rigLayout, error) {
	if r.toy != "" {
		return r.readToyLayouts()
	}
	out := map[string]rigLayout{}
	root := filepath.Join(r.store, "layouts")
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || !strings.HasSuffix(p, ".json") || strings.HasPrefix(fi.Name(), ".") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var l rigLayout
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("layout %s: %w", p, err)
		}
		out[l.File] = l
		return nil
	})
	return out, err
}

// poster reads the files as GPU clients would, where the layout says they
// are, and posts LAYOUTSTATS to every mds at addrs() every second: each
// file at its rate (10 MB/s unless rates says otherwise), a striped
// file's reads dealt over its components by their bytes, so the device
// holding the most heat is hot. The clients follow a committed layout to
// the new devices and handles.
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
			rate := r.rates[file]
			if rate == 0 {
				rate = rigRate
			}
			comps := l.Mirrors[0]
			for _, c := range comps {
				i++
				h := c.Handle
				if h == "" {
					h = handleOf(file, c.Device)
				}
				share := rate / int64(len(comps))
				if c.Bytes > 0 && r.sizes[file] > 0 {
					share = rate * c.Bytes / r.sizes[file]
				}
				k := c.Device + "/" + h
				x := ctrs[k]
				if x == nil {
					x = &ctr{}
					ctrs[k] = x
				}
				x.secs++
				x.ops += max(1, 100*share/rigRate)
				x.bytes += share
				reps = append(reps, fmt.Sprintf(`{"ffis_offset":0,"ffis_length":%d,"ffis_stateid":{"seqid":1,"other":"%024x"},
 "ffis_read":{"ii_count":%d,"ii_bytes":%d},"ffis_write":{"ii_count":0,"ii_bytes":0},"ffis_deviceid":%q,
 "ffis_layoutupdate":{"ffl_addr":{"na_r_netid":"tcp","na_r_addr":"127.0.0.%d.8.1"},"ffl_fhandle":%q,
  "ffl_read":{"ffil_ops_requested":%d,"ffil_bytes_requested":%d,"ffil_ops_completed":%d,"ffil_bytes_completed":%d,"ffil_bytes_not_delivered":0,
   "ffil_total_busy_time":{"seconds":%d,"nseconds":0},"ffil_aggregate_completion_time":{"seconds":%d,"nseconds":0}},
  "ffl_write":{"ffil_ops_requested":0,"ffil_bytes_requested":0,"ffil_ops_completed":0,"ffil_bytes_completed":0,"ffil_bytes_not_delivered":0,
   "ffil_total_busy_time":{"seconds":0,"nseconds":0},"ffil_aggregate_completion_time":{"seconds":0,"nseconds":0}},
  "ffl_duration":{"seconds":%d,"nseconds":0},"ffl_local":false}}`,
					c.Bytes, i, x.ops, x.bytes, c.Device, devIndex(r.devs, c.Device)+1, h,
					x.ops, x.bytes, x.ops, x.bytes, x.secs/2, x.secs/50, x.secs))
			}
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

// check proves the data safe: every file's logical bytes, read through
// its committed layout (each component's file on the device it names,
// a striped mirror dealt back unit by unit), equal the original (sha256);
// no layout keeps a pending commit or a retired component; nothing else
// is on any export (no copy left behind, no retired component, no part
// file) and, with the exec driver, no move is left in flight at the toy
// MDS; and every commit (a generation above 1) was applied by the MDS
// (the layout hook, or the exec driver's script) exactly once, and
// nothing else was. It returns the commits.
func (r *filesRig) check(t *testing.T) (commits int) {
	t.Helper()
	ls := r.layouts(t)
	if len(ls) != len(r.sums) {
		t.Fatalf("layout store holds %d files; want %d", len(ls), len(r.sums))
	}
	root := filepath.Join(r.dir, "exports")
	if r.toy != "" {
		root = filepath.Join(r.toy, "dev")
	}
	want := map[string]string{} // path under root → file its layout names it for
	for f, l := range ls {
		commits += int(l.Generation - 1)
		if len(l.Pending) > 0 && string(l.Pending) != "null" {
			t.Errorf("%s keeps a pending commit once quiet: %s", f, l.Pending)
		}
		if len(l.Retired) > 0 {
			t.Errorf("%s keeps %d retired components once quiet (cleanup never removed them)", f, len(l.Retired))
		}
		parts := make([][]byte, len(l.Mirrors[0]))
		for j, c := range l.Mirrors[0] {
			p := c.Path
			if p == "" {
				p = f
			}
			p = filepath.Join(r.devDir(devIndex(r.devs, c.Device)), p)
			rel, _ := filepath.Rel(root, p)
			want[rel] = f
			b, err := os.ReadFile(p)
			if err != nil {
				t.Errorf("%s is lost: component %d (%s on %s): %v", f, j, p, c.Device, err)
				continue
			}
			parts[j] = b
		}
		s := sha256.Sum256(unstripe(parts, l.StripeUnit))
		if hex.EncodeToString(s[:]) != r.sums[f] {
			t.Errorf("%s through its layout (generation %d, %d components): sha256 %x; want %s", f, l.Generation, len(parts), s, r.sums[f])
		}
	}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if _, ok := want[rel]; !ok {
			t.Errorf("%s is on an export, but no layout names it (a copy, retired component or part file left behind)", rel)
		}
		return nil
	})
	if r.toy != "" {
		for id := range toyInFlight(t, r) {
			t.Errorf("move %s is still in flight at the toy MDS once quiet (its in-flight record was never removed by a cleanup or abort)", id)
		}
	}
	seen := map[string]bool{}
	for _, k := range r.applied(t) {
		if seen[k] {
			t.Errorf("the MDS applied %s twice", k)
		}
		seen[k] = true
	}
	for f, l := range ls {
		for g := uint64(2); g <= l.Generation; g++ {
			if !seen[fmt.Sprintf("%s %d", f, g)] {
				t.Errorf("%s generation %d is in the store, but the MDS never applied it", f, g)
			}
			delete(seen, fmt.Sprintf("%s %d", f, g))
		}
	}
	for k := range seen {
		t.Errorf("the MDS applied %s, which the store never committed", k)
	}
	return commits
}

// applied lists the commits the MDS applied, as "FILE NEW-GENERATION",
// in order: the files driver's hook logs "FILE GEN TO EPOCH" lines, the
// exec driver's script "STEP MOVE" (MOVE = FILE#…@GENERATION, the commit
// making GENERATION + 1). A commit the script was asked again once
// applied (repeats.log) is an error: the exec driver must see it in
// locate's layout and not ask (docs/actions.md, "The exec driver").
func (r *filesRig) applied(t *testing.T) []string {
	t.Helper()
	var out []string
	if r.toy == "" {
		for _, l := range fileLines(filepath.Join(r.dir, "hook-applied.log")) {
			fs := strings.Fields(l)
			out = append(out, fs[0]+" "+fs[1])
		}
		return out
	}
	for _, l := range fileLines(filepath.Join(r.toy, "commits.log")) {
		_, move, _ := strings.Cut(l, " ")
		i, j := strings.LastIndex(move, "#"), strings.LastIndex(move, "@")
		g, err := strconv.ParseUint(move[j+1:], 10, 64)
		if i < 0 || j < i || err != nil {
			t.Fatalf("commits.log line %q: not STEP FILE#…@GENERATION", l)
		}
		out = append(out, fmt.Sprintf("%s %d", move[:i], g+1))
	}
	for _, l := range fileLines(filepath.Join(r.toy, "repeats.log")) {
		t.Errorf("the exec driver asked for a commit it had already applied: %s", l)
	}
	return out
}

// calls is how many times the MDS's hook or script was run.
func (r *filesRig) calls() int {
	if r.toy == "" {
		return len(fileLines(filepath.Join(r.dir, "hook-calls.log")))
	}
	return len(fileLines(filepath.Join(r.toy, "calls.log")))
}

// unstripe deals a mirror's components back into its logical bytes:
// logical unit u is unit u ÷ W of component u mod W.
func unstripe(parts [][]byte, unit int64) []byte {
	if len(parts) == 1 || unit <= 0 {
		return bytes.Join(parts, nil) // unit unknown: cannot match unless one part
	}
	var out []byte
	offs := make([]int64, len(parts))
	for u := 0; ; u++ {
		j := u % len(parts)
		if offs[j] >= int64(len(parts[j])) {
			return out
		}
		end := min(offs[j]+unit, int64(len(parts[j])))
		out = append(out, parts[j][offs[j]:end]...)
		offs[j] = end
	}
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
