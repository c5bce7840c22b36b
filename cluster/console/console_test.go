package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// cluster is test input for the console: findings, actions and the series
// a query returns, for a cluster of nDS data servers with 8 drives each.
type cluster struct {
	findings []models.Finding
	actions  []models.Action
	nDS      int
	queries  []string
}

func (c *cluster) Findings(f storage.FindingFilter) ([]models.Finding, error) {
	var out []models.Finding
	for _, x := range c.findings {
		if f.Active != nil && x.Active() != *f.Active {
			continue
		}
		if f.Kind != "" && x.Kind != f.Kind {
			continue
		}
		if !f.Since.IsZero() && x.LastSeen.Before(f.Since) {
			continue
		}
		out = append(out, x)
	}
	return out, nil
}

func (c *cluster) Actions(f storage.ActionFilter) ([]models.Action, error) {
	var out []models.Action
	for i := range c.actions {
		if f.Match(&c.actions[i]) {
			out = append(out, c.actions[i])
		}
	}
	return out, nil
}

// Query answers the heat-map query with one series per drive: drive d of
// DS i is (i%100)/100 busy, except ds0007/nvme3n1 at 0.995 and
// ds0005/nvme2n1, which has failed and has no reading.
func (c *cluster) Query(_ context.Context, expr string, at time.Time) ([]storage.Series, error) {
	c.queries = append(c.queries, expr)
	if expr != heatQuery {
		return nil, nil
	}
	var out []storage.Series
	for i := range c.nDS {
		for d := range 8 {
			if i == 5 && d == 2 {
				continue
			}
			v := float64(i%100) / 100
			if i == 7 && d == 3 {
				v = 0.995
			}
			out = append(out, storage.Series{
				Labels:     []models.Label{{Name: "node", Value: fmt.Sprintf("ds%04d", i)}, {Name: "device", Value: fmt.Sprintf("nvme%dn1", d)}, {Name: "pool", Value: "fast"}},
				Timestamps: []int64{at.UnixMilli()}, Values: []float64{v},
			})
		}
	}
	return out, nil
}

func (c *cluster) QueryRange(_ context.Context, expr string, start, end time.Time, step time.Duration) ([]storage.Series, error) {
	c.queries = append(c.queries, expr)
	if expr != gpuUtilQuery {
		return nil, nil
	}
	s := storage.Series{}
	for t := start; !t.After(end); t = t.Add(step) {
		s.Timestamps = append(s.Timestamps, t.UnixMilli())
		s.Values = append(s.Values, 0.8)
	}
	return []storage.Series{s}, nil
}

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func newTestCluster(nDS, nFindings int) *cluster {
	c := &cluster{nDS: nDS}
	for i := range nFindings {
		c.findings = append(c.findings, models.Finding{
			ID: fmt.Sprintf("gpu_starvation:ds:%d", i), Kind: "gpu_starvation", Severity: models.SeverityWarning,
			Subject: models.Subject{Kind: models.SubjectDS, ID: fmt.Sprintf("ds%04d", i)},
			Start:   now.Add(-time.Duration(i+1) * time.Minute), LastSeen: now,
			Summary:  fmt.Sprintf("8 GPUs starved by ds%04d", i),
			Evidence: []models.Evidence{{Name: "gpu_hours_lost", Value: float64(i) / 10}},
		})
	}
	c.findings = append(c.findings, models.Finding{
		ID: "drive_failure_risk:ds0007/nvme3", Kind: "drive_failure_risk", Severity: models.SeverityCritical,
		Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds0007/nvme3"}, Start: now.Add(-time.Hour), LastSeen: now,
		Summary: "unrecovered media errors rose by 52",
	})
	c.findings = append(c.findings, models.Finding{
		ID: "drive_failure_risk:ds0005/nvme2", Kind: "drive_failure_risk", Severity: models.SeverityCritical,
		Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds0005/nvme2"}, Start: now.Add(-time.Hour), LastSeen: now,
		Summary: "the drive reports its overall SMART health as FAILED",
	})
	c.actions = []models.Action{{ID: "evacuate_device:ds0007/nvme3", Kind: models.ActionEvacuateDevice, State: models.ActionAwaitingApproval,
		Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds0007/nvme3"}, Created: now.Add(-time.Minute), Updated: now.Add(-time.Minute),
		Params: map[string]string{"bytes": "65625000000"}, Reason: "drive likely to fail"}}
	return c
}

func get(t *testing.T, c *Console, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec.Code, rec.Body.String()
}

// TestConsolePagesAThousandDataServers checks that a 1,000-DS cluster
// sends the browser one page of the heat map, hottest first, and that the
// pager walks the rest.
func TestConsolePagesAThousandDataServers(t *testing.T) {
	cl := newTestCluster(1000, 45)
	c, err := New(Options{Findings: cl, Actions: cl, Query: cl, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, body := get(t, c, "/ui/")
	t.Logf("1,000 DS × 8 drives: page of %d bytes rendered in %s", len(body), time.Since(start))
	if code != http.StatusOK {
		t.Fatalf("GET /ui/: got %d; want 200\n%s", code, body)
	}
	rows := regexp.MustCompile(`<tr data-ds="([^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(rows) != 50 {
		t.Fatalf("heat-map rows on page 1: got %d; want 50", len(rows))
	}
	// ds0007 has the one drive at 99.5 %: hottest first.
	if rows[0][1] != "ds0007" {
		t.Errorf("first heat-map row: got %s; want ds0007 (the hottest drive)", rows[0][1])
	}
	for _, want := range []string{
		"data servers 1–50 of 1000",
		`hpage=2`,
		`class="cell risk"`, // ds0007/nvme3n1 has a drive_failure_risk finding
		"Drive likely to fail",
		"GPUs are waiting for storage",
		"findings 1–20 of 47",
		`data-verb="approve"`,
		"evacuate_device",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page 1 does not contain %q", want)
		}
	}
	// A failed drive has no reading but is still outlined.
	if _, body := get(t, c, "/ui/?hsort=name"); !strings.Contains(body, `class="cell none risk" title="ds0005/nvme2n1: no reading — Drive likely to fail`) {
		t.Error("heat map by name: ds0005/nvme2n1 (failed, no reading, drive_failure_risk) is not outlined")
	}
	// The last page of the heat map has the rest.
	_, body = get(t, c, "/ui/?hpage=20&hsort=name")
	rows = regexp.MustCompile(`<tr data-ds="([^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(rows) != 50 || rows[49][1] != "ds0999" {
		t.Errorf("heat-map page 20 by name: got %d rows ending %v; want 50 ending ds0999", len(rows), rows[len(rows)-1])
	}
	if pager := regexp.MustCompile(`(?s)<p class="pager" id="heat-pager">.*?</p>`).FindString(body); !strings.Contains(pager, "951–1000 of 1000") || strings.Contains(pager, "next") {
		t.Errorf("heat-map pager on page 20: got %q; want 951–1000 of 1000 and no next page", pager)
	}
	// Critical before warning; among warnings the most GPU-hours first.
	_, body = get(t, c, "/ui/?fpage=1")
	ids := regexp.MustCompile(`<tr class="finding [^"]*" data-kind="[^"]*" data-id="([^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(ids) != 20 || ids[0][1] != "drive_failure_risk:ds0005/nvme2" || ids[1][1] != "drive_failure_risk:ds0007/nvme3" || ids[2][1] != "gpu_starvation:ds:44" {
		t.Errorf("findings order: got %v; want the critical drive findings (newest first), then gpu_starvation:ds:44 (most GPU-hours)", ids[:min(3, len(ids))])
	}
}

// TestConsoleIsSelfContained checks that the page loads nothing from
// outside the mds.
func TestConsoleIsSelfContained(t *testing.T) {
	cl := newTestCluster(3, 2)
	c, err := New(Options{Findings: cl, Actions: cl, Query: cl, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	_, body := get(t, c, "/ui/")
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(body, -1) {
		if u := m[1]; !strings.HasPrefix(u, "/") && !strings.HasPrefix(u, "?") {
			t.Errorf("the page refers to %q outside the mds", u)
		}
	}
	for _, a := range []string{"/ui/assets/console.css", "/ui/assets/console.js"} {
		if code, b := get(t, c, a); code != http.StatusOK || len(b) == 0 {
			t.Errorf("GET %s: got %d, %d bytes; want 200 and the file", a, code, len(b))
		}
	}
}

func TestConsoleRefusesBadParameters(t *testing.T) {
	cl := newTestCluster(1, 0)
	c, err := New(Options{Findings: cl, Actions: cl, Query: cl})
	if err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]string{
		"window=3y":     `window="3y": want one of`,
		"fpage=0":       `fpage="0": want a page number from 1`,
		"hpage=x":       `hpage="x": want a page number from 1`,
		"findings=all":  `findings="all": want active or window`,
		"hsort=coldest": `hsort="coldest": want hot or name`,
	} {
		code, body := get(t, c, "/ui/?"+q)
		if code != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("GET /ui/?%s: got %d %q; want 400 containing %q", q, code, body, want)
		}
	}
}

func TestConsoleLinksTheCapacityReport(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "report.json"), []byte(`{"generated_at":"2026-05-01T11:00:00Z","summary":["Pool fast is 1 % full."]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cl := newTestCluster(1, 0)
	c, err := New(Options{Findings: cl, Actions: cl, Query: cl, ReportDir: dir, ReportURL: "/api/v1/reports/capacity/", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	_, body := get(t, c, "/ui/")
	for _, want := range []string{`href="/api/v1/reports/capacity/report.html"`, "Pool fast is 1 % full.", "2026-05-01 11:00 UTC"} {
		if !strings.Contains(body, want) {
			t.Errorf("page does not contain %q", want)
		}
	}
}

func TestNaturalLessAndController(t *testing.T) {
	if !naturalLess("ds2", "ds10") || naturalLess("ds10", "ds2") || !naturalLess("nvme1n1", "nvme10n1") {
		t.Error("naturalLess: want ds2 < ds10 and nvme1n1 < nvme10n1")
	}
	for in, want := range map[string]string{"nvme3n1": "nvme3", "nvme12n2": "nvme12", "sda": "sda", "nvme0": "nvme0"} {
		if got := controllerOf(in); got != want {
			t.Errorf("controllerOf(%s): got %s; want %s", in, got, want)
		}
	}
}
