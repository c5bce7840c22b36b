package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ballast-io/ballast/cluster"
	"github.com/ballast-io/ballast/cluster/node"
	"github.com/ballast-io/ballast/models"
)

func init() {
	register(&command{
		name:    "findings",
		summary: "list what the mds found (since, severity, kind, subject, GPU-hours, summary) from /api/v1/findings",
		run:     runFindings,
	})
}

const findingsUsage = `Usage: ballast findings [--url URL] [--kind KIND] [--subject SUBJECT] [--active] [--since WHEN] [--severity LEVEL] [--json]

Lists the findings of a running mds (or 'ballast demo --serve') from its
GET /api/v1/findings, oldest first, as a table:

  SINCE     when the condition started (the analyzer's inferred onset)
  UNTIL     when it ended, or "active"
  SEVERITY  critical (data or a large share of GPU time at risk now),
            warning, info
  KIND      hotspot, gpu_starvation, drive_failure_risk, drive_wearout,
            checkpoint_burst, checkpoint_failed, checkpoint_forecast,
            workload_profile, workload_shift, capacity_threshold
  SUBJECT   what it is about, named as operators name it: a drive
            "device ds04/nvme4n1", a data server "ds ds04", a stripe, a
            client node or job (pNFS device ids and DS addresses are in
            the finding's evidence, --json)
  GPU-H     GPU-hours lost (gpu_starvation), else -
  SUMMARY   one line saying what and why

--since takes a duration back from now (30m, 2h, 1d), RFC 3339 or Unix
seconds, and keeps findings last seen then or later. --json prints the
API's finding objects, one per line, with every field and the evidence.
Times are shown in the local time zone unless --utc. Against an mds with
authentication, --token-file names a file holding a token with the query
scope (docs/security.md). Docs: docs/findings.md.`

func runFindings(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "findings", findingsUsage)
	base := fs.String("url", "http://127.0.0.1:9750", "base URL of the mds")
	kind := fs.String("kind", "", "only findings of this kind")
	subject := fs.String("subject", "", `only findings about this subject: "kind:id" (device:ds04/nvme4n1) or the id`)
	active := fs.Bool("active", false, "only findings still active")
	since := fs.String("since", "", "only findings last seen at or after this: a duration back from now (2h), RFC 3339 or Unix seconds")
	severity := fs.String("severity", "", "only findings at least this severe: info, warning or critical")
	asJSON := fs.Bool("json", false, "print the findings as JSON lines instead of a table")
	utc := fs.Bool("utc", false, "show times in UTC")
	timeout := fs.Duration("timeout", 10*time.Second, "limit for the request")
	var client cluster.ClientConfig
	registerClientFlags(fs, &client)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: findings takes no arguments, got %q", errUsage, fs.Args())
	}
	minSev := -1
	if *severity != "" {
		if minSev = severityRank(models.Severity(*severity)); minSev < 0 {
			return fmt.Errorf("%w: --severity %q is not info, warning or critical", errUsage, *severity)
		}
	}
	q := url.Values{}
	if *kind != "" {
		q.Set("kind", *kind)
	}
	if *subject != "" {
		q.Set("subject", *subject)
	}
	if *active {
		q.Set("active", "true")
	}
	if *since != "" {
		t, err := parseSince(*since, time.Now())
		if err != nil {
			return fmt.Errorf("%w: --since: %v", errUsage, err)
		}
		q.Set("since", strconv.FormatInt(t.Unix(), 10))
	}
	rt, err := node.NewClientTransport(client)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	found, err := fetchFindings(ctx, &http.Client{Transport: rt}, strings.TrimSuffix(*base, "/")+"/api/v1/findings?"+q.Encode())
	if err != nil {
		return err
	}
	kept := found[:0]
	for _, f := range found {
		if severityRank(f.Severity) >= minSev {
			kept = append(kept, f)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		for i := range kept {
			if err := enc.Encode(&kept[i]); err != nil {
				return err
			}
		}
		return nil
	}
	loc := time.Local
	if *utc {
		loc = time.UTC
	}
	return writeFindingsTable(env.stdout, kept, loc)
}

// fetchFindings GETs u and decodes the API's answer.
func fetchFindings(ctx context.Context, hc *http.Client, u string) ([]models.Finding, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot request findings from %q: %w", u, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot get findings from %q: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("cannot read findings from %q: %w", u, err)
	}
	var ans struct {
		Status string           `json:"status"`
		Error  string           `json:"error"`
		Data   []models.Finding `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil || ans.Status == "" {
		return nil, fmt.Errorf("cannot read findings from %q: HTTP %d, not the findings API: %.200q", u, resp.StatusCode, body)
	}
	if ans.Status != "success" {
		return nil, fmt.Errorf("cannot get findings from %q: HTTP %d: %s", u, resp.StatusCode, ans.Error)
	}
	return ans.Data, nil
}

// parseSince reads a duration back from now (with the config's d and w
// units), RFC 3339 or Unix seconds.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if sec, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Unix(0, int64(sec*1e9)), nil
	}
	d, err := node.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is not a duration back from now (2h), RFC 3339 or Unix seconds", s)
	}
	return now.Add(-d), nil
}

func severityRank(s models.Severity) int {
	switch s {
	case models.SeverityInfo:
		return 0
	case models.SeverityWarning:
		return 1
	case models.SeverityCritical:
		return 2
	}
	return -1
}

// writeFindingsTable writes fs as an aligned table, one finding a line.
func writeFindingsTable(w io.Writer, fs []models.Finding, loc *time.Location) error {
	if len(fs) == 0 {
		_, err := fmt.Fprintln(w, "no findings")
		return err
	}
	const layout = "2006-01-02 15:04:05"
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SINCE\tUNTIL\tSEVERITY\tKIND\tSUBJECT\tGPU-H\tSUMMARY")
	for i := range fs {
		f := &fs[i]
		until := "active"
		if !f.Active() {
			until = f.End.In(loc).Format(layout)
		}
		gpuh := "-"
		for _, e := range f.Evidence {
			if e.Name == "gpu_hours_lost" {
				gpuh = strconv.FormatFloat(e.Value, 'f', 3, 64)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s %s\t%s\t%s\n", f.Start.In(loc).Format(layout), until, f.Severity, f.Kind,
			f.Subject.Kind, f.Subject.ID, gpuh, oneLine(f.Summary))
	}
	return tw.Flush()
}

// oneLine keeps a summary on its table row.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
