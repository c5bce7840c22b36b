package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/ballast-io/ballast/cluster"
)

// pipelineStatus reads GET /api/v1/status/pipeline of a running mds.
func pipelineStatus(t *testing.T, base string) cluster.PipelineStatus {
	t.Helper()
	resp, err := http.Get(base + cluster.PathPipelineStatus)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data cluster.PipelineStatus `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s: %v", cluster.PathPipelineStatus, err)
	}
	return body.Data
}

// TestMDSAndDemoRunTheSameStages runs a real `ballast mds` and a short
// `ballast demo --serve` and compares what their pipelines run: the same
// analysis stages and actuators in the same order. Only the sources may
// differ (the demo's simulated agents).
func TestMDSAndDemoRunTheSameStages(t *testing.T) {
	m := startMDS(t, t.TempDir())
	real := pipelineStatus(t, m.url(""))

	cmd := exec.Command(ballastBin, "demo", "--scenario", "baseline", "--duration", "2m", "--quiet", "--serve",
		"--listen", "127.0.0.1:0", "--out", filepath.Join(t.TempDir(), "out"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	urlCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if mm := servingRe.FindStringSubmatch(sc.Text()); mm != nil {
				urlCh <- "http://" + mm[1]
			}
		}
	}()
	var demoURL string
	select {
	case demoURL = <-urlCh:
	case <-time.After(2 * time.Minute):
		t.Fatal("demo did not start serving within 2 minutes")
	}
	demo := pipelineStatus(t, demoURL)
	if len(real.Stages) < 6 {
		t.Errorf("real mds runs stages %v; want every analysis stage", real.Stages)
	}
	if !reflect.DeepEqual(real.Stages, demo.Stages) {
		t.Errorf("stages: mds runs %v; demo runs %v; want the same", real.Stages, demo.Stages)
	}
	if !reflect.DeepEqual(real.Actuators, demo.Actuators) {
		t.Errorf("actuators: mds runs %v; demo runs %v; want the same", real.Actuators, demo.Actuators)
	}
	t.Logf("stages %v, actuators %v; sources: mds %d, demo %d", real.Stages, real.Actuators, len(real.Sources), len(demo.Sources))
	cmd.Process.Signal(syscall.SIGTERM)
}
