package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/ballast-io/ballast/analyzer/capacity"
	"github.com/ballast-io/ballast/analyzer/drivehealth"
	"github.com/ballast-io/ballast/cluster"
	"github.com/ballast-io/ballast/cluster/node"
	"github.com/ballast-io/ballast/cluster/report"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim/capacityeval"
)

func init() {
	register(&command{
		name:    "report capacity",
		summary: "write the capacity forecasts report (HTML, markdown, JSON) from the query API",
		run:     runReportCapacity,
	})
	register(&command{
		name:    "eval capacity",
		summary: "backtest capacity forecasts against predict_linear on the twin; write a markdown section",
		run:     runEvalCapacity,
	})
}

// reportFlags are the options of `ballast report capacity`.
type reportFlags struct {
	url, out, at, match, poolLabel, pools, findings string
	lookback, step, timeout                         time.Duration
	checkpoint                                      time.Duration
	noDrives                                        bool
	client                                          cluster.ClientConfig
}

func runReportCapacity(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "report capacity", `Usage: ballast report capacity --out DIR [--at TIME] [--url URL] [flags]

Reads every drive's used bytes and capacity from a Prometheus-compatible
query API (a running 'ballast mds' or 'ballast demo --serve'): the
filesystem collector's series of the filesystems the data servers export,
used = ballast_filesystem_size_bytes - ballast_filesystem_avail_bytes and
capacity = ballast_filesystem_size_bytes per node and device. It forecasts
when each drive, data server, pool and the cluster reaches 85, 90 and 95 %
with intervals, checks whether each pool can absorb evacuating its largest
data server and its at-risk drives, and writes DIR/report.html (self-
contained, inline SVG plots), DIR/report.md and DIR/report.json.

Drives at risk come from the drive-health analyzer run on the drives'
SMART series in the same API (skip with --no-drive-health) and from
drive_failure_risk / drive_wearout findings in --findings (JSON lines).`)
	var f reportFlags
	fs.StringVar(&f.out, "out", "", "folder to write report.html, report.md and report.json into (required)")
	fs.StringVar(&f.url, "url", "http://127.0.0.1:9750", "base URL of the query API")
	fs.StringVar(&f.at, "at", "", "report time, RFC 3339 or Unix seconds (default: now)")
	fs.DurationVar(&f.lookback, "lookback", 15*24*time.Hour, "history read before --at")
	fs.DurationVar(&f.step, "step", 5*time.Minute, "resolution of the history read")
	fs.DurationVar(&f.timeout, "timeout", 60*time.Second, "limit for all queries together")
	fs.StringVar(&f.match, "filesystems", report.DefaultFilesystemMatch, "label matchers selecting the data filesystems, e.g. 'mountpoint=~\"/export/.+\"' (empty: all)")
	fs.StringVar(&f.poolLabel, "pool-label", "pool", "label naming a drive's pool, when the series carry one")
	fs.StringVar(&f.pools, "pools", "", "pools by node-name prefix when no pool label is set, e.g. scr=scratch,ds=fast (others: default)")
	fs.DurationVar(&f.checkpoint, "checkpoint-period", 0, "checkpoint cadence to model as a seasonal cycle (0: none)")
	fs.StringVar(&f.findings, "findings", "", "JSON-lines file of findings; drive_failure_risk and drive_wearout ones mark drives at risk")
	fs.BoolVar(&f.noDrives, "no-drive-health", false, "do not run drive-health analysis on the SMART series")
	registerClientFlags(fs, &f.client)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.out == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: report capacity needs --out and no arguments", errUsage)
	}
	if f.lookback <= 0 || f.step <= 0 || f.timeout <= 0 {
		return fmt.Errorf("%w: --lookback, --step and --timeout must be positive", errUsage)
	}
	at, err := parseAt(f.at, env.clock())
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	prefixes, err := parsePools(f.pools)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	rt, err := node.NewClientTransport(f.client)
	if err != nil {
		return err
	}
	client, err := api.NewClient(api.Config{Address: f.url, RoundTripper: rt})
	if err != nil {
		return fmt.Errorf("cannot use query API %q: %w", f.url, err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	q := &apiReader{api: promv1.NewAPI(client), url: f.url}
	ro := report.ReadOptions{Start: at.Add(-f.lookback), End: at, Step: f.step, Match: f.match, PoolLabel: f.poolLabel, Pools: prefixes}
	devs, err := report.ReadDevices(ctx, q, ro)
	if err != nil {
		return fmt.Errorf("%s: %w", f.url, err)
	}
	in := report.Input{At: at, Source: f.url, UsedMetric: report.UsedQuery(ro), CapacityMetric: report.SizeQuery(ro), Devices: devs,
		Options: capacity.DefaultOptions().WithPeriod(f.checkpoint)}
	if !f.noDrives {
		risks, note, err := q.driveRisks(ctx, at, f.lookback)
		if err != nil {
			return err
		}
		in.AtRisk = append(in.AtRisk, risks...)
		in.Notes = append(in.Notes, note)
	}
	if f.findings != "" {
		risks, err := readRiskFindings(f.findings)
		if err != nil {
			return err
		}
		in.AtRisk = append(in.AtRisk, risks...)
		in.Notes = append(in.Notes, fmt.Sprintf("Drives at risk also from the findings in %s.", f.findings))
	}
	in.AtRisk = report.MatchDevices(report.DedupeRisks(in.AtRisk), devs)
	if err := report.Render(f.out, in); err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "wrote %s/report.html, report.md, report.json (%d drives, %d at risk)\n", f.out, len(devs), len(in.AtRisk))
	return nil
}

// parseAt reads an RFC 3339 time or Unix seconds; empty means now. The
// time is cut to whole milliseconds, the resolution of the query API: the
// API rounds a finer time to the nearest millisecond, which can put the
// points it returns for the report time after the report time, where the
// report leaves them out.
func parseAt(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return now.UTC().Truncate(time.Millisecond), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC().Truncate(time.Millisecond), nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 {
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC().Truncate(time.Millisecond), nil
	}
	return time.Time{}, fmt.Errorf("cannot parse --at %q: want RFC 3339 (2026-03-14T10:00:00Z) or Unix seconds", s)
}

// parsePools reads "prefix=pool,…".
func parsePools(s string) ([][2]string, error) {
	var out [][2]string
	if s == "" {
		return nil, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("cannot parse --pools entry %q: want prefix=pool", kv)
		}
		out = append(out, [2]string{k, v})
	}
	// Longest prefix first, so "scr" does not take "scratch01" from "scratch".
	sort.SliceStable(out, func(i, j int) bool { return len(out[i][0]) > len(out[j][0]) })
	return out, nil
}

// apiReader reads series through the Prometheus HTTP API.
type apiReader struct {
	api promv1.API
	url string
}

func (q *apiReader) rangeQuery(ctx context.Context, expr string, r promv1.Range) (model.Matrix, error) {
	v, _, err := q.api.QueryRange(ctx, expr, r)
	if err != nil {
		return nil, fmt.Errorf("cannot query %q from %s: %w", expr, q.url, err)
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return nil, fmt.Errorf("cannot query %q from %s: got a %s, want a matrix", expr, q.url, v.Type())
	}
	return m, nil
}

// QueryRange implements report.Querier over the HTTP API.
func (q *apiReader) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]report.QuerySeries, error) {
	m, err := q.rangeQuery(ctx, expr, promv1.Range{Start: start, End: end, Step: step})
	if err != nil {
		return nil, err
	}
	out := make([]report.QuerySeries, 0, len(m))
	for _, s := range m {
		qs := report.QuerySeries{Labels: map[string]string{}}
		for k, v := range s.Metric {
			qs.Labels[string(k)] = string(v)
		}
		for _, p := range s.Values {
			qs.Points = append(qs.Points, capacity.Point{T: p.Timestamp.Time().UTC(), V: float64(p.Value)})
		}
		out = append(out, qs)
	}
	return out, nil
}

// driveRisks reads every drive's SMART series (drivehealth.SeriesNames:
// NVMe, ATA and SCSI) hourly over lookback plus their newest values at at,
// maps them to observations as the mds does, runs the drive-health rules
// and model on each drive's history and returns the drives with a
// drive_failure_risk or drive_wearout finding.
//
// The newest values come from an instant query at exactly at: a range
// query's last point may fall before at (engines align long ranges to
// their step) or, rounded to the API's milliseconds, after it, and the
// newest reading would be lost either way.
func (q *apiReader) driveRisks(ctx context.Context, at time.Time, lookback time.Duration) ([]report.DriveRisk, string, error) {
	r := promv1.Range{Start: at.Add(-lookback), End: at, Step: time.Hour}
	var rd drivehealth.Readings
	add := func(name string, m model.Metric, t time.Time, v float64) {
		labels := make([]models.Label, 0, len(m))
		for k, v := range m {
			labels = append(labels, models.Label{Name: string(k), Value: string(v)})
		}
		if id := drivehealth.NodeDevice(labels); id != "" && !t.After(at) {
			rd.Add(id, t, name, labels, v)
		}
	}
	for _, name := range drivehealth.SeriesNames {
		m, err := q.rangeQuery(ctx, name, r)
		if err != nil {
			return nil, "", err
		}
		for _, s := range m {
			for _, p := range s.Values {
				add(name, s.Metric, p.Timestamp.Time().UTC(), float64(p.Value))
			}
		}
		v, err := q.instantQuery(ctx, fmt.Sprintf("last_over_time(%s[%s])", name, model.Duration(time.Hour)), at)
		if err != nil {
			return nil, "", err
		}
		for _, s := range v {
			add(name, s.Metric, at, float64(s.Value))
		}
	}
	m, err := drivehealth.DefaultModel()
	if err != nil {
		return nil, "", err
	}
	opt := drivehealth.DefaultRuleOptions()
	hist := rd.Histories()
	keys := make([]string, 0, len(hist))
	for k := range hist {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []report.DriveRisk
	for _, k := range keys {
		a := drivehealth.Assess(hist[k], at, m, opt)
		for _, fd := range drivehealth.Findings(models.Subject{Kind: models.SubjectDevice, ID: k}, a, m, at) {
			out = append(out, report.DriveRisk{Device: k, Kind: fd.Kind, Severity: fd.Severity, Risk: a.Risk, Summary: fd.Summary})
		}
	}
	note := fmt.Sprintf("Drives at risk: drive-health rules and model (analyzer/drivehealth) on %d drives' hourly SMART series (NVMe, ATA, SCSI) over the last %s and their newest values.", len(keys), lookback)
	return out, note, nil
}

// instantQuery evaluates expr at t and returns the vector.
func (q *apiReader) instantQuery(ctx context.Context, expr string, t time.Time) (model.Vector, error) {
	v, _, err := q.api.Query(ctx, expr, t)
	if err != nil {
		return nil, fmt.Errorf("cannot query %q from %s: %w", expr, q.url, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("cannot query %q from %s: got a %s, want a vector", expr, q.url, v.Type())
	}
	return vec, nil
}

// readRiskFindings reads JSON-lines findings and keeps the drive ones.
func readRiskFindings(path string) ([]report.DriveRisk, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open findings %q: %w", path, err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	var out []report.DriveRisk
	for n := 1; ; n++ {
		var fd models.Finding
		if err := dec.Decode(&fd); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("cannot read finding %d of %q: %w", n, path, err)
		}
		if fd.Kind != drivehealth.KindFailureRisk && fd.Kind != drivehealth.KindWearout || fd.Subject.Kind != models.SubjectDevice || !fd.Active() {
			continue
		}
		out = append(out, report.DriveRisk{Device: fd.Subject.ID, Kind: fd.Kind, Severity: fd.Severity, Risk: fd.Score, Summary: fd.Summary})
	}
}

func runEvalCapacity(_ context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "eval capacity", `Usage: ballast eval capacity --out FILE [--seeds 1,2,3,4,5] [--days 30]

Simulates the cluster twin's capacity-pressure scenario, stretched to
--days days with seeded tenants (see docs/capacity.md), once per seed,
backtests the capacity forecast against predict_linear over 2 days on the
scratch pool's used bytes, and writes the markdown section committed as
docs/eval/capacity.md. Takes about 10 s of CPU per seed.`)
	out := fs.String("out", "", "where to write the markdown (required; - for stdout)")
	seedList := fs.String("seeds", "1,2,3,4,5", "twin seeds, comma-separated")
	days := fs.Int("days", 30, "simulated days per run")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: eval capacity needs --out and no arguments", errUsage)
	}
	var seeds []uint64
	for _, s := range strings.Split(*seedList, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: cannot parse --seeds entry %q: want a non-negative integer", errUsage, s)
		}
		seeds = append(seeds, v)
	}
	if *days < 9 {
		return fmt.Errorf("%w: --days %d is too short: the backtest needs 7 days of warm-up after a 1-day burn-in and at least a day to score", errUsage, *days)
	}
	res, err := capacityeval.EvalCapacity(capacityeval.EvalOptions{Seeds: seeds, Days: *days}, nil)
	if err != nil {
		return err
	}
	return writeOut(env, *out, res.WriteMarkdown)
}
