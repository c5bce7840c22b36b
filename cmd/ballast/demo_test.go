package main

import (
	"bytes"
	"encoding/json"
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
	for _, f := range []string{"truth.jsonl", "telemetry.jsonl"} {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, f))
		if err != nil {
			t.Fatal(err)
		}
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs with the same seed (%d vs %d bytes)", f, len(x), len(y))
		}
	}
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
