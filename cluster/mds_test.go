package cluster

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/cluster/pipeline"
	"github.com/ballast-io/ballast/models"
)

func TestMain(m *testing.M) {
	flag.Parse() // before VictoriaMetrics parses an empty command line
	os.Exit(m.Run())
}

// testStage returns one hotspot finding every tick.
type testStage struct{}

func (testStage) Name() string { return "test" }
func (testStage) Run(_ context.Context, now time.Time) ([]models.Finding, error) {
	return []models.Finding{{ID: "hotspot-ds01-nvme0", Kind: "hotspot", Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds01/nvme0"},
		Severity: models.SeverityWarning, Start: now, LastSeen: now, Summary: "test"}}, nil
}

// agentServer serves a fixed exposition, like a ds agent would.
func agentServer(t *testing.T, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestMDSScrapesStaticAndFileTargets runs the whole mds in-process (one per
// test binary: the store and scraper are process-wide) against two loopback
// agents, one static and one added later through a file_sd file.
func TestMDSScrapesStaticAndFileTargets(t *testing.T) {
	a := agentServer(t, "# TYPE ballast_disk_reads_total counter\nballast_disk_reads_total{device=\"nvme0n1\"} 7\n")
	b := agentServer(t, "ballast_gpu_utilization_ratio{gpu=\"0\"} 0.5\nballast_gpu_bad NaN\n")
	dir := t.TempDir()
	sdFile := filepath.Join(dir, "targets.json")
	if err := os.WriteFile(sdFile, []byte(`[]`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultMDSConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.LogLevel = "error"
	cfg.Scrape.Interval = Duration(time.Second)
	cfg.Scrape.Timeout = Duration(time.Second)
	cfg.Scrape.Targets = []string{strings.TrimPrefix(a.URL, "http://")}
	cfg.Scrape.TargetFiles = []string{sdFile}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := NewMDS(cfg, Runtime{ManualTicks: true, Stages: []pipeline.Stage{testStage{}}}, "test", nil)
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := m.Stop(sctx); err != nil {
			t.Errorf("stop: %v", err)
		}
		if err := m.Stop(sctx); err != nil {
			t.Errorf("second stop: %v", err)
		}
	}()

	waitQuery := func(expr string, want float64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			m.Store().Flush()
			ss, err := m.Store().Query(ctx, expr, time.Now())
			if err == nil && len(ss) == 1 && ss[0].Values[0] == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: got %v, %v; want one series = %v", expr, ss, err, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitQuery(`ballast_disk_reads_total{job="ballast-agents"}`, 7)
	m.Pipeline().Tick(ctx, time.Now())

	// A target added to the file is picked up without a restart.
	sd := fmt.Sprintf(`[{"targets":[%q],"labels":{"role":"client"}}]`, strings.TrimPrefix(b.URL, "http://"))
	if err := os.WriteFile(sdFile, []byte(sd), 0o644); err != nil {
		t.Fatal(err)
	}
	waitQuery(`ballast_gpu_utilization_ratio{role="client"}`, 0.5)

	// Self-metrics: per-target up and the NaN sample counted (accepted, not
	// stored, as VictoriaMetrics does).
	resp, err := http.Get("http://" + m.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf(`ballast_scrape_target_up{target=%q} 1`, strings.TrimPrefix(a.URL, "http://")),
		`ballast_scrape_nan_samples_total `,
		`ballast_storage_size_bytes`,
		`ballast_pipeline_tick_duration_seconds`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Findings of a tick land in the journal, the API and the series.
	waitQuery(`ballast_finding_active{kind="hotspot",subject="device:ds01/nvme0",severity="warning"}`, 1)
	resp, err = http.Get("http://" + m.Addr() + "/api/v1/findings?kind=hotspot&active=true")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"id":"hotspot-ds01-nvme0"`) {
		t.Errorf("/api/v1/findings: got %s; want the tick's finding", body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + m.Addr() + path)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: got %v, %v; want 200", path, resp, err)
		}
		resp.Body.Close()
	}
}
