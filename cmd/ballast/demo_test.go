package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDemoIsDeterministic runs the demo twice with the same scenario, seed
// and start and compares the twin's truth and every stored sample.
func TestDemoIsDeterministic(t *testing.T) {
	run := func(out string) {
		t.Helper()
		cmd := exec.Command(ballastBin, "demo", "--scenario", "mixed", "--seed", "7", "--duration", "10m",
			"--start", "2026-11-01T00:00:00Z", "--out", out, "--listen", "127.0.0.1:0", "--quiet", "--export")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("demo: %v\n%s", err, b)
		}
	}
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	run(a)
	run(b)
	read := func(dir, f string) []byte { return readOut(t, dir, f) }
	if x, y := read(a, "truth.jsonl"), read(b, "truth.jsonl"); len(x) == 0 || !bytes.Equal(x, y) {
		t.Errorf("truth.jsonl differs between two runs with the same seed (%d vs %d bytes)", len(x), len(y))
	}
	compareTelemetry(t, read(a, "telemetry.jsonl"), read(b, "telemetry.jsonl"))
	var sum struct {
		Scenario      string  `json:"scenario"`
		SimSeconds    float64 `json:"sim_seconds"`
		SamplesStored int     `json:"samples_stored"`
		Simulated     bool    `json:"simulated"`
	}
	data, err := os.ReadFile(filepath.Join(a, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Scenario != "mixed" || sum.SimSeconds != 600 || sum.SamplesStored == 0 || !sum.Simulated {
		t.Errorf("summary: got %+v; want scenario mixed, 600 simulated seconds, samples stored, simulated=true", sum)
	}
	for _, f := range []string{"findings.jsonl", "actions.jsonl"} {
		if _, err := os.Stat(filepath.Join(a, f)); err != nil {
			t.Errorf("%s missing: %v", f, err)
		}
	}
}

// compareTelemetry checks two exports series by series: the same series,
// the same timestamps, and the same values to 11 significant digits.
// VictoriaMetrics stores a block's values as integers sharing one decimal
// exponent (about 12 significant digits), and which values share a block
// depends on when background merges run, so the last digit may differ
// between runs that wrote identical samples.
func compareTelemetry(t *testing.T, x, y []byte) {
	t.Helper()
	type line struct {
		Metric     map[string]string `json:"metric"`
		Values     []float64         `json:"values"`
		Timestamps []int64           `json:"timestamps"`
	}
	parse := func(b []byte) map[string]line {
		m := map[string]line{}
		for _, s := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			var l line
			if err := json.Unmarshal(s, &l); err != nil {
				t.Fatalf("bad export line %q: %v", s, err)
			}
			key, _ := json.Marshal(l.Metric) // map keys marshal sorted
			m[string(key)] = l
		}
		return m
	}
	a, b := parse(x), parse(y)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("exports hold %d and %d series; want the same, non-zero", len(a), len(b))
	}
	diffs := 0
	for k, la := range a {
		lb, ok := b[k]
		if !ok || len(la.Values) != len(lb.Values) || len(la.Timestamps) != len(lb.Timestamps) {
			t.Errorf("series %s differs in presence or length", k)
			continue
		}
		for i := range la.Values {
			va, vb := la.Values[i], lb.Values[i]
			if la.Timestamps[i] != lb.Timestamps[i] || math.Abs(va-vb) > 1e-11*math.Max(math.Abs(va), math.Abs(vb)) {
				if diffs++; diffs <= 5 {
					t.Errorf("series %s point %d: (%d, %v) vs (%d, %v)", k, i, la.Timestamps[i], va, lb.Timestamps[i], vb)
				}
			}
		}
	}
}
