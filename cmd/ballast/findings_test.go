package main

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// TestFindingsCommand serves a journal through the mds's own findings
// handler and reads it back with `ballast findings`.
func TestFindingsCommand(t *testing.T) {
	j, err := storage.OpenJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	fs := []models.Finding{
		{ID: "gpu_starvation:ds:ds02:1", Kind: "gpu_starvation", Subject: models.Subject{Kind: models.SubjectDS, ID: "ds02"},
			Severity: models.SeverityCritical, Score: 4.394, Start: t0, LastSeen: t0.Add(5 * time.Minute), End: t0.Add(6 * time.Minute),
			Summary:  "63 GPUs on 8 nodes starved by ds ds02 (down): 4.394 GPU-hours lost",
			Evidence: []models.Evidence{{Name: "gpu_hours_lost", Value: 4.394, Unit: "h"}, {Name: "ds_address", Value: 1, Note: "10.1.0.3:2049"}}},
		{ID: "drive_failure_risk:device:ds07/nvme3n1:2", Kind: "drive_failure_risk", Subject: models.Subject{Kind: models.SubjectDevice, ID: "ds07/nvme3n1"},
			Severity: models.SeverityCritical, Score: 0.9, Start: t0.Add(time.Minute), LastSeen: t0.Add(time.Hour),
			Summary: "the drive reports its overall SMART health as FAILED"},
		{ID: "checkpoint_burst:client:gpu00:3", Kind: "checkpoint_burst", Subject: models.Subject{Kind: models.SubjectClient, ID: "gpu00"},
			Severity: models.SeverityInfo, Start: t0.Add(2 * time.Minute), LastSeen: t0.Add(3 * time.Minute), End: t0.Add(3 * time.Minute),
			Summary: "client gpu00 wrote 250 GB\nin a 30s burst"},
	}
	if err := j.UpsertFindings(fs); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(storage.FindingsHandler(j))
	defer srv.Close()

	code, out, errs := runCLI("findings", "--url", srv.URL, "--utc")
	if code != 0 {
		t.Fatalf("ballast findings: exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		"SINCE                UNTIL                SEVERITY  KIND                SUBJECT              GPU-H  SUMMARY",
		"2026-03-01 10:00:00  2026-03-01 10:06:00  critical  gpu_starvation      ds ds02              4.394  63 GPUs on 8 nodes starved by ds ds02 (down): 4.394 GPU-hours lost",
		"2026-03-01 10:01:00  active               critical  drive_failure_risk  device ds07/nvme3n1  -      the drive reports its overall SMART health as FAILED",
		"2026-03-01 10:02:00  2026-03-01 10:03:00  info      checkpoint_burst    client gpu00         -      client gpu00 wrote 250 GB in a 30s burst",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines:\n%s\nwant %d", len(lines), out, len(want))
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\ngot  %q\nwant %q", i, lines[i], want[i])
		}
	}

	// Filters: on the server (kind, active) and here (severity).
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--active"}, []string{"drive_failure_risk:device:ds07/nvme3n1:2"}},
		{[]string{"--kind", "gpu_starvation"}, []string{"gpu_starvation:ds:ds02:1"}},
		{[]string{"--severity", "warning"}, []string{"gpu_starvation:ds:ds02:1", "drive_failure_risk:device:ds07/nvme3n1:2"}},
		{[]string{"--subject", "device:ds07/nvme3n1"}, []string{"drive_failure_risk:device:ds07/nvme3n1:2"}},
		{[]string{"--since", "2026-03-01T10:30:00Z"}, []string{"drive_failure_risk:device:ds07/nvme3n1:2"}},
	} {
		code, out, errs := runCLI(append([]string{"findings", "--url", srv.URL, "--json"}, c.args...)...)
		if code != 0 {
			t.Fatalf("ballast findings %v: exit %d, stderr %q", c.args, code, errs)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var f models.Finding
			if err := json.Unmarshal([]byte(l), &f); err != nil {
				t.Fatalf("ballast findings %v: line %q: %v", c.args, l, err)
			}
			got = append(got, f.ID)
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("ballast findings %v: got %v; want %v", c.args, got, c.want)
		}
	}

	for _, args := range [][]string{{"--severity", "urgent"}, {"--since", "yesterday"}, {"extra"}} {
		if code, _, errs := runCLI(append([]string{"findings", "--url", srv.URL}, args...)...); code != 2 {
			t.Errorf("ballast findings %v: exit %d (stderr %q); want 2", args, code, errs)
		}
	}
	if code, _, errs := runCLI("findings", "--url", "http://127.0.0.1:1"); code != 1 || !strings.Contains(errs, "cannot get findings from") {
		t.Errorf("ballast findings against nothing: exit %d, stderr %q; want 1 and the URL named", code, errs)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2h":                   now.Add(-2 * time.Hour),
		"1d":                   now.Add(-24 * time.Hour),
		"2026-03-01T10:00:00Z": now.Add(-2 * time.Hour),
		"1772359200":           now.Add(-2 * time.Hour),
	} {
		got, err := parseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
