package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/cluster"
	"github.com/ballast-io/ballast/cluster/node"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim"
	"github.com/ballast-io/ballast/sim/twin"
)

const demoUsage = `Usage: ballast demo [flags]

Runs the full mds pipeline against the cluster twin: a SIMULATED pNFS
cluster (data servers with NVMe drives, switch ports, GPU nodes running
training, checkpoints, inference and scans, with injected faults) that feeds
ballast through the same exposition and LAYOUTSTATS paths a real cluster
uses, on a simulated clock running much faster than real time. Simulated
time ends at the wall clock, so the data sits where Grafana looks.

While it runs it prints one progress line (simulated time, speed-up, GPU
utilisation, findings and actions). At the end it prints a summary and
writes OUT/summary.json, OUT/truth.jsonl (the twin's ground truth),
OUT/findings.jsonl and OUT/actions.jsonl, and the capacity forecasts
report (OUT/report/report.html, .md, .json, read from the store as
'ballast report capacity' reads an mds); the store is in OUT/data.
With --store remote=URL the samples go to a remote engine instead (a
VictoriaMetrics cluster, VictoriaMetrics, Prometheus; docs/storage.md) and
OUT/data holds only the queue and the journals; use an empty tenant.
With --serve the mds stays up afterwards until SIGINT or SIGTERM: the
built-in console at http://LISTEN/ui/ (findings, actions, heat map, GPU
time lost, checkpoint forecasts, capacity report), the Prometheus query
API for Grafana or curl, and the findings API. With --serve --reuse, a
finished run already in OUT is served as it ended, without running the
simulation again (a run that is missing is run first).

Scenarios: %s; generated:N, a scenario generated from seed N
(docs/scenarios.md#generated-scenarios); or a path to a scenario file
(docs/scenarios.md).`

func init() {
	register(&command{name: "demo", summary: "run the pipeline on the simulated cluster twin (see README)", run: runDemo})
}

func runDemo(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "demo", fmt.Sprintf(demoUsage, strings.Join(twin.ScenarioNames(), ", ")))
	scenario := fs.String("scenario", "mixed", "shipped scenario name, generated:N or scenario file")
	seed := fs.Uint64("seed", 1, "random seed; the same scenario and seed give the same run")
	duration := fs.String("duration", "", "simulated time to run, e.g. 6h (default: the scenario's)")
	out := fs.String("out", "demo-out", "directory for the outputs and the store")
	serve := fs.Bool("serve", false, "keep the console and query API up after the run until interrupted")
	reuse := fs.Bool("reuse", false, "with --serve: serve the finished run already in --out instead of running the simulation again")
	listen := fs.String("listen", "127.0.0.1:9750", "HOST:PORT of the query API")
	scrape := fs.Duration("scrape-interval", 10*time.Second, "simulated scrape and analysis interval")
	quiet := fs.Bool("quiet", false, "no progress line")
	start := fs.String("start", "", "start of simulated time, RFC 3339 (default: now minus the duration, so the run ends now)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the run to this file (go tool pprof)")
	store := fs.String("store", "embedded", cluster.StoreFlagUsage)
	var flushURLs stringList
	fs.Var(&flushURLs, "store-flush-url", "with --store remote=…: a URL requested (GET) each time the simulated clock flushes the store, so that recent writes are searchable at once (each vmstorage's, or single-node VictoriaMetrics', /internal/force_flush; Prometheus needs none); repeatable")
	tenant := fs.String("store-tenant", "", "with --store remote=…: VictoriaMetrics cluster tenant accountID[:projectID]; the URLs are then vminsert's and vmselect's roots")
	export := fs.Bool("export", false, "also write every stored sample to OUT/telemetry.jsonl (VictoriaMetrics export format), to compare runs")
	actions := fs.String("actions", "auto", "mode of remediation on the twin: off, dry-run, approve (act after 'ballast actions approve') or auto")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if m := models.ActionMode(*actions); !m.Valid() {
		return fmt.Errorf("%w: --actions %q is not one of off, dry-run, approve, auto", errUsage, *actions)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *reuse && !*serve {
		return fmt.Errorf("%w: --reuse only makes sense with --serve", errUsage)
	}
	logger := newLogger(env.stderr, "warn")
	if *reuse {
		m, sum, err := sim.OpenFinished(ctx, sim.DemoOptions{OutDir: *out, Listen: *listen, Logger: logger, Version: version})
		switch {
		case err == nil:
			fmt.Fprintf(env.stdout, "Serving the finished demo run in %s (scenario %s, seed %d, simulated %s to %s); the simulation is not re-run.\n",
				*out, sum.Scenario, sum.Seed, sum.Start.UTC().Format(time.RFC3339), sum.End.UTC().Format(time.RFC3339))
			return serveUntilDone(ctx, env, m)
		case errors.Is(err, sim.ErrNoFinishedDemo):
			fmt.Fprintf(env.stdout, "No finished demo run in %s to reuse (%v); running one.\n", *out, err)
		default:
			return err
		}
	}
	sc, dur, err := loadRun(*scenario, *duration)
	if err != nil {
		return err
	}
	startAt, err := parseStart(*start)
	if err != nil {
		return err
	}
	d, err := sim.NewDemo(sim.DemoOptions{
		Scenario:       sc,
		Seed:           *seed,
		Duration:       dur,
		Start:          startAt,
		Export:         *export,
		OutDir:         *out,
		Listen:         *listen,
		Store:          *store,
		StoreFlushURLs: flushURLs,
		StoreTenant:    *tenant,
		ScrapeInterval: *scrape,
		Progress:       progressPrinter(env.stderr, *quiet),
		Logger:         logger,
		Version:        version,
		ActionMode:     models.ActionMode(*actions),
	})
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	sum, err := d.Run(ctx)
	if !*quiet {
		fmt.Fprintln(env.stderr)
	}
	if sum != nil {
		printSummary(env.stdout, sum, *out)
	}
	if err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		d.Stop(sctx)
		return err
	}
	dir, err := d.WriteCapacityReport(ctx)
	if err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		d.Stop(sctx)
		return fmt.Errorf("cannot write the capacity report: %w", err)
	}
	fmt.Fprintf(env.stdout, "Capacity report: %s/report.html (also report.md, report.json)\n", dir)
	if *serve {
		return serveUntilDone(ctx, env, d.MDS())
	}
	fmt.Fprintf(env.stdout, "To look at this run in the console, run: bin/ballast demo --serve --reuse --out %s\n", *out)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return d.Stop(sctx)
}

// serveUntilDone prints where the mds serves and keeps it up until ctx
// ends (SIGINT, SIGTERM), then stops it.
func serveUntilDone(ctx context.Context, env *cmdEnv, m *cluster.MDS) error {
	fmt.Fprintf(env.stdout, "\nConsole: http://%s/ui/\n", m.Addr())
	fmt.Fprintf(env.stdout, "Query API: http://%s (Prometheus API; Grafana: add a Prometheus data source with this URL, see docs/grafana.md). Ctrl-C stops.\n", m.Addr())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return m.Stop(sctx)
}

func progressPrinter(w io.Writer, quiet bool) func(sim.DemoProgress) {
	if quiet {
		return nil
	}
	return func(p sim.DemoProgress) {
		speed := 0.0
		if p.Wall > 0 {
			speed = p.SimElapsed.Seconds() / p.Wall.Seconds()
		}
		fmt.Fprintf(w, "\r[simulated] %s / %s  ×%.0f real time  GPU util %.1f%%  findings %d  actions %d   ",
			fmtDur(p.SimElapsed), fmtDur(p.SimTotal), speed, 100*p.GPUUtil, p.Findings, p.Actions)
	}
}

func fmtDur(d time.Duration) string {
	s := int(d.Seconds())
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

func printSummary(w io.Writer, s *sim.DemoSummary, out string) {
	fmt.Fprintf(w, "ballast demo on the cluster twin (simulated cluster) — scenario %s, seed %d\n", s.Scenario, s.Seed)
	fmt.Fprintf(w, "  simulated %s in %.1f s of wall time (×%.0f real time)\n", fmtDur(time.Duration(s.SimSeconds*float64(time.Second))), s.WallSeconds, s.SpeedUp)
	fmt.Fprintf(w, "  GPU utilisation (simulated ground truth): %.1f%%\n", 100*s.GPUUtilMean)
	if len(s.GPUIdleSecondsByCause) > 0 {
		fmt.Fprintf(w, "  GPU idle seconds by cause (ground truth):")
		for _, k := range sortedKeys(s.GPUIdleSecondsByCause) {
			fmt.Fprintf(w, " %s=%.0f", k, s.GPUIdleSecondsByCause[k])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  samples stored: %d\n", s.SamplesStored)
	fmt.Fprintf(w, "  findings: %d", s.Findings)
	for _, k := range sortedKeys(s.FindingsByKind) {
		fmt.Fprintf(w, " %s=%d", k, s.FindingsByKind[k])
	}
	fmt.Fprintf(w, "\n  actions: %d\n", s.Actions)
	printRemediation(w, &s.Remediation)
	fmt.Fprintf(w, "Outputs: %s/summary.json, %s/truth.jsonl, %s/findings.jsonl, %s/actions.jsonl (store: %s/data)\n", out, out, out, out, out)

}

// printRemediation lists the plans of a run on the twin: all of it is
// simulated, and says so.
func printRemediation(w io.Writer, r *sim.Remediation) {
	fmt.Fprintf(w, "  remediation (SIMULATED on the twin, mode %s): %d plans, %d moves done, %s moved\n", r.Mode, r.Plans, r.MovesDone, humanBytes(r.BytesMoved))
	util := func(v float64) string {
		if v < 0 {
			return "–"
		}
		return fmt.Sprintf("%.3f", v)
	}
	for i, p := range r.Each {
		if i == 12 {
			fmt.Fprintf(w, "    … %d more in actions.jsonl\n", len(r.Each)-i)
			break
		}
		fmt.Fprintf(w, "    %-15s %-22s %-10s %-11s moves %d/%d, %s moved (lower bound %s), GPU util %s → %s\n",
			p.Kind, p.Subject, p.State, orDash(p.Verdict), p.MovesDone, p.Moves, humanBytes(p.BytesMoved), humanBytes(p.LowerBoundBytes), util(p.GPUUtilBefore), util(p.GPUUtilAfter))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// loadRun loads the scenario of a twin run (demo, eval) and parses its
// --duration; an empty duration means the scenario's own (0).
func loadRun(scenario, duration string) (*twin.Scenario, time.Duration, error) {
	sc, err := twin.LoadScenario(scenario)
	if err != nil {
		return nil, 0, err
	}
	if duration == "" {
		return sc, 0, nil
	}
	dur, err := node.ParseDuration(duration)
	if err != nil || dur <= 0 {
		return nil, 0, fmt.Errorf("%w: --duration %q is not a positive duration", errUsage, duration)
	}
	return sc, dur, nil
}

// startCPUProfile starts a Go CPU profile into path (none when path is
// empty); the returned func stops it and closes the file.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cannot create CPU profile %q: %w", path, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot start CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
