package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/sim"
	"github.com/ballast-io/ballast/sim/score"
	"github.com/ballast-io/ballast/sim/twin"
)

const evalUsage = `Usage: ballast eval --scenario NAME|generated:N|FILE [--seed N] [--duration D] [--start T] [--method M] --out DIR
       ballast eval --scenario NAME|generated:N|FILE --print-scenario

Runs the cluster twin (a SIMULATED cluster) with the full mds pipeline and
every wired analyzer, then scores the findings against the twin's ground
truth (docs/evaluation.md says how): DIR/eval.json holds, per finding kind,
precision, recall and detection delays; checkpoint forecast errors;
workload label accuracy; and the share of storage-caused idle GPU-seconds
attributed to the right subject; and remediation (what the actions did to
the twin: GPU utilisation of the jobs a hotspot hurt and how soon it came
back, device load balance, bytes moved against the planner's lower bound,
stripes lost on failing drives, data moved inside checkpoint bursts, the
effect each plan measured). --method picks who acts: ballast (its
planners), none (actions off), count-balancer (a Ceph-upmap-style stripe
count balancer) or hottest-to-coolest (the operator's share moved from the
hottest data server to the coolest, PEAK:AIO Lattice style); the baselines
replace the rebalancer only and act through the same engine, guards and
mover. Two more turn off the read-ahead closed loop only:
static-kernel-default (every mount keeps the value it was mounted with,
Linux's 128 KiB unless the scenario says otherwise) and static-nfsrahead
(every mount at 15 × rsize from the start, as nfs-utils' nfsrahead sets
it); eval.json's readahead_scores hold each job's read throughput, GPU
utilisation and read latency and what became of each read-ahead change
(ballast eval readahead compares the three). The demo's outputs (summary.json,
truth.jsonl, findings.jsonl, actions.jsonl, the store in DIR/data) are
written beside it, with labels.jsonl and forecasts.jsonl.

The run uses simulated time only: for the same scenario, seed, duration and
--start, eval.json is byte-identical on any machine at any load (the wall
time, speed-up and samples stored are in summary.json, not in eval.json). Without --start
the run ends at the wall clock and the times in eval.json move with it.
It runs with GOGC=200 unless the GOGC environment variable is set;
--cpuprofile FILE writes a Go CPU profile of the run.

--print-scenario writes the scenario as YAML to stdout, every default filled
in, and runs nothing; the YAML loads back as the same scenario
(--scenario FILE), so a generated one can be read, kept or edited.

See also: ballast eval all (every scenario over several seeds).

Scenarios: %s; generated:N, a scenario generated from seed N (any whole
number; docs/scenarios.md#generated-scenarios says what it randomises, and
docs/evaluation.md why to score on seeds nobody tuned to; --seed stays the
twin's seed); or a path to a scenario file.`

func init() {
	register(&command{name: "eval", summary: "score the analyzers against the twin's ground truth on one scenario", run: runEval})
	register(&command{name: "eval all", summary: "score every shipped scenario over several seeds; write docs/EVALUATION.md", run: runEvalAll})
}

// evalGOGC is the garbage-collection target of ballast eval unless the
// GOGC environment variable sets one, as the agent's DefaultGOGC.
const evalGOGC = 200

// EvalReport is eval.json: the demo's summary with the scores.
type EvalReport struct {
	sim.DemoSummary
	Scores    score.Result    `json:"scores"`
	Remedy    score.Remedy    `json:"remediation_scores"`
	ReadAhead score.ReadAhead `json:"readahead_scores"`
	Command   string          `json:"command"`
	Tolerance time.Duration   `json:"tolerance_ns"`
}

func runEval(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "eval", fmt.Sprintf(evalUsage, strings.Join(twin.ScenarioNames(), ", ")))
	scenario := fs.String("scenario", "", "shipped scenario name, generated:N or scenario file (required)")
	printScenario := fs.Bool("print-scenario", false, "write the scenario as YAML to stdout and run nothing")
	seed := fs.Uint64("seed", 1, "random seed")
	duration := fs.String("duration", "", "simulated time to run, e.g. 30m (default: the scenario's)")
	out := fs.String("out", "", "output directory (required)")
	quiet := fs.Bool("quiet", false, "no progress line")
	listen := fs.String("listen", "127.0.0.1:0", "HOST:PORT of the query API while it runs")
	start := fs.String("start", "", "start of simulated time, RFC 3339 (default: now minus the duration, so the run ends now)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the run (twin, mds pipeline and scoring) to this file (go tool pprof)")
	method := fs.String("method", sim.MethodBallast, "who acts: "+strings.Join(sim.Methods, ", ")+"; or the static read-ahead baselines "+strings.Join(sim.ReadAheadMethods[:2], ", "))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	case *scenario == "":
		return fmt.Errorf("%w: --scenario is required", errUsage)
	case *printScenario:
		sc, err := twin.LoadScenario(*scenario)
		if err != nil {
			return err
		}
		y, err := twin.MarshalScenario(sc)
		if err != nil {
			return err
		}
		_, err = env.stdout.Write(y)
		return err
	case *out == "":
		return fmt.Errorf("%w: --out is required", errUsage)
	}
	startAt, err := parseStart(*start)
	if err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" {
		// A run allocates several GB (scrapes rendered and parsed, the
		// store's flush buffers); at Go's default of 100 the collector
		// took about a fifth of its CPU. Eval is a batch job: half the
		// collections for about 40 % more memory (hot-shard 30 min:
		// 540 → 750 MB peak, 13 % less CPU). Results do not depend on it.
		// Restored after the run: tests run eval in their own process.
		defer debug.SetGCPercent(debug.SetGCPercent(evalGOGC))
	}
	sc, dur, err := loadRun(*scenario, *duration)
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	rep, err := evalOnce(ctx, env, sc, *seed, dur, startAt, *out, *listen, *method, *quiet)
	stopProfile()
	if err != nil {
		return err
	}
	rep.Command = "ballast eval " + strings.Join(args, " ")
	if err := writeJSON(filepath.Join(*out, "eval.json"), rep); err != nil {
		return err
	}
	printEval(env, rep, runSpeedUp(*out), *out)
	return nil
}

// dsNames learns, from the stripe deltas the mds receives, which DS address
// serves which pNFS device, so that scoring can name a DS address by the
// twin's host name (through the device the twin issued).
type dsNames struct {
	mu  sync.Mutex
	dev map[string]string // DS address → a device id it serves
}

func (n *dsNames) observe(ds []models.StripeDelta) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := range ds {
		if _, ok := n.dev[ds[i].DS]; !ok && ds[i].DS != "" {
			n.dev[ds[i].DS] = ds[i].DeviceID
		}
	}
}

func evalOnce(ctx context.Context, env *cmdEnv, sc *twin.Scenario, seed uint64, dur time.Duration, start time.Time, out, listen, method string, quiet bool) (*EvalReport, error) {
	names := &dsNames{dev: map[string]string{}}
	var samples []score.RemedySample
	opts := sim.DemoOptions{
		Scenario: sc, Seed: seed, Duration: dur, Start: start, OutDir: out, Listen: listen,
		Progress: progressPrinter(env.stderr, quiet),
		Logger:   newLogger(env.stderr, "warn"),
		Version:  version,
		Observe: func(tw *twin.Twin, now time.Time) {
			samples = append(samples, remedySample(tw, now))
		},
	}
	if err := sim.MethodOptions(&opts, method); err != nil {
		return nil, fmt.Errorf("%w: --method: %v", errUsage, err)
	}
	d, err := sim.NewDemo(opts)
	if err != nil {
		return nil, err
	}
	d.MDS().StripeHub().Subscribe(names.observe)
	sum, runErr := d.Run(ctx)
	if !quiet {
		fmt.Fprintln(env.stderr)
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	stopErr := d.Stop(sctx)
	if runErr != nil {
		return nil, runErr
	}
	if stopErr != nil {
		return nil, stopErr
	}
	an := d.MDS().Analysis()
	findings, err := readFindings(filepath.Join(out, "findings.jsonl"))
	if err != nil {
		return nil, err
	}
	tw := d.Twin()
	in := score.Input{
		Truth:         tw.Truth(),
		Findings:      findings,
		FirstReported: an.FirstReported(),
		Episodes:      []models.Finding{},
		Forecasts:     an.Forecasts(),
		Labels:        an.Labels(),
		Blame:         an.Blame(),
		JobNodes:      jobNodes(sc, tw.Nodes()),
		Names:         score.Names{Device: twinDeviceName(tw), Stripe: tw.StripeOfHandle, DS: map[string]string{}},
		Start:         sum.Start,
		End:           tw.Now(),
		Tolerance:     time.Minute,
	}
	// gpu_starvation is scored per episode, as before its findings folded
	// short episodes together (docs/evaluation.md).
	for _, e := range an.StarvationEpisodes() {
		in.Episodes = append(in.Episodes, e.Finding)
		if !e.Reported.IsZero() {
			in.FirstReported[e.Finding.ID] = e.Reported
		}
	}
	for addr, dev := range names.dev {
		if n, _, ok := strings.Cut(tw.DeviceName(dev), "/"); ok {
			in.Names.DS[addr] = n
		}
	}
	if err := writeJSONL(filepath.Join(out, "labels.jsonl"), in.Labels); err != nil {
		return nil, err
	}
	if err := writeJSONL(filepath.Join(out, "blame.jsonl"), in.Blame); err != nil {
		return nil, err
	}
	if err := writeJSONL(filepath.Join(out, "forecasts.jsonl"), in.Forecasts); err != nil {
		return nil, err
	}
	rin := score.RemedyInput{
		Method: method, Truth: in.Truth, Samples: samples, Devices: tw.DeviceLoads(), End: in.End,
		StorageIdleSeconds: storageIdle(tw.GPUStats().IdleByCause), StripesLeft: map[string]int{},
	}
	rin.UrgentInCheckpoints, rin.OtherInCheckpoints = tw.MigrationBytesInCheckpoints()
	rin.LostStripes, _ = tw.LostAtFailure()
	failed := map[string]bool{}
	for _, t := range in.Truth {
		if t.Kind == "drive_failed" {
			failed[t.Subject.ID] = true
		}
	}
	for _, t := range in.Truth {
		if t.Kind == "failing_drive" && !failed[t.Subject.ID] {
			rin.StripesLeft[t.Subject.ID] = tw.StripesOn(t.Subject.ID)
		}
	}
	if rin.Actions, err = readActions(filepath.Join(out, "actions.jsonl")); err != nil {
		return nil, err
	}
	// Wall-clock figures stay in summary.json: eval.json depends on the
	// simulation only. So does the count of stored samples: it includes the
	// mds's own process and storage-engine metrics (series such as
	// histogram buckets appear as the host's timing has it).
	rain := score.ReadAheadInput{Method: method, Samples: samples, Actions: rin.Actions}
	for i, w := range tw.Scenario().Workloads {
		rain.Jobs = append(rain.Jobs, score.RAJob{Name: w.Name, Kind: w.Kind, Nodes: in.JobNodes[w.Name], Index: i})
	}
	rep := &EvalReport{DemoSummary: *sum, Scores: score.Score(in), Remedy: score.ScoreRemedy(rin), ReadAhead: score.ScoreReadAhead(rain), Tolerance: in.Tolerance}
	rep.WallSeconds, rep.SpeedUp, rep.SamplesStored = 0, 0, 0
	return rep, nil
}

// parseStart reads --start of demo and eval: RFC 3339, or zero when empty.
func parseStart(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: --start %q is not RFC 3339 (e.g. 2026-01-02T15:04:05Z)", errUsage, s)
	}
	return t, nil
}

// remedySample reads the twin's remediation counters (ground truth).
func remedySample(tw *twin.Twin, now time.Time) score.RemedySample {
	dl := tw.DeviceLoads()
	s := score.RemedySample{At: now, Jobs: tw.JobGPUSeconds(), DeviceBytes: make([]float64, len(dl)), Active: make([]bool, len(dl)), Reads: tw.ClientReads()}
	for i, d := range dl {
		s.DeviceBytes[i], s.Active[i] = d.UserBytes, d.Active
	}
	return s
}

// storageIdle sums the idle GPU-seconds with a storage cause.
func storageIdle(byCause map[string]float64) float64 {
	sum := 0.0
	// In key order: a float sum in map order differs in its last bits from
	// run to run, and eval.json must be byte-identical for a seed.
	for _, c := range slices.Sorted(maps.Keys(byCause)) {
		if score.StorageCause(c) {
			sum += byCause[c]
		}
	}
	return sum
}

// twinDeviceName maps what the mds may call a device while its device
// table has not resolved the drive — the pNFS device id, "<ds>:<id>" or
// "<ds>:<export>" — to the twin's drive name; "" when it is none of those
// (a resolved name is already the twin's).
func twinDeviceName(tw *twin.Twin) func(string) string {
	return func(id string) string {
		ds, rest, ok := strings.Cut(id, ":")
		if !ok {
			return tw.DeviceName(id)
		}
		if k, ok := strings.CutPrefix(rest, twin.ExportRoot+"/"); ok {
			return ds + "/" + k
		}
		return tw.DeviceName(rest)
	}
}

// jobNodes lists the client nodes of every workload: the nodes of its
// client group (host names are the group's prefix and an index), from
// first, count of them (0 = the rest).
func jobNodes(sc *twin.Scenario, nodes []twin.Node) map[string][]string {
	groups := map[string][]string{}
	for _, n := range nodes {
		if n.Role != twin.RoleClient {
			continue
		}
		for _, g := range sc.Topology.Clients {
			rest := strings.TrimPrefix(n.Name, g.NamePrefix)
			if rest != n.Name && rest != "" && strings.Trim(rest, "0123456789") == "" {
				groups[g.NamePrefix] = append(groups[g.NamePrefix], n.Name)
			}
		}
	}
	out := map[string][]string{}
	for _, w := range sc.Workloads {
		g := groups[w.Clients]
		lo := min(w.First, len(g))
		hi := len(g)
		if w.Count > 0 {
			hi = min(lo+w.Count, len(g))
		}
		out[w.Name] = append([]string(nil), g[lo:hi]...)
	}
	return out
}

func readFindings(path string) ([]models.Finding, error) {
	return readJSONL[models.Finding]("findings", path)
}

func readActions(path string) ([]models.Action, error) {
	return readJSONL[models.Action]("actions", path)
}

func readJSONL[T any](what, path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s %q: %w", what, path, err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		var x T
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			return nil, fmt.Errorf("cannot read %s %q: line %d: %w", what, path, line, err)
		}
		out = append(out, x)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read %s %q: %w", what, path, err)
	}
	return out, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot encode %s: %w", filepath.Base(path), err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("cannot write %q: %w", path, err)
	}
	return nil
}

func writeJSONL[T any](path string, items []T) error {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for i := range items {
		if err := enc.Encode(&items[i]); err != nil {
			return fmt.Errorf("cannot encode %s: %w", filepath.Base(path), err)
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("cannot write %q: %w", path, err)
	}
	return nil
}

// runSpeedUp reads the speed-up of the run in out from its summary.json
// (eval.json keeps no wall-clock figures); 0 when unknown.
func runSpeedUp(out string) float64 {
	var s struct {
		SpeedUp float64 `json:"speed_up"`
	}
	if b, err := os.ReadFile(filepath.Join(out, "summary.json")); err == nil {
		_ = json.Unmarshal(b, &s)
	}
	return s.SpeedUp
}

func printEval(env *cmdEnv, r *EvalReport, speedUp float64, out string) {
	fmt.Fprintf(env.stdout, "ballast eval on the cluster twin (simulated) — scenario %s, seed %d, %s simulated at ×%.0f\n",
		r.Scenario, r.Seed, fmtDur(time.Duration(r.SimSeconds*float64(time.Second))), speedUp)
	for _, k := range sortedKeys(r.Scores.Kinds) {
		ks := r.Scores.Kinds[k]
		fmt.Fprintf(env.stdout, "  %-20s findings %4d  precision %s  recall %s (%d/%d)  delay median %s s, p95 %s s  false/h %s\n",
			k, ks.Findings, fmtNum(ks.Precision), fmtNum(ks.Recall), ks.Detected, ks.Targets, fmtNum(ks.MedianDelay), fmtNum(ks.P95Delay), fmtNum(ks.FalsePerHour))
	}
	f := r.Scores.Forecast
	fmt.Fprintf(env.stdout, "  checkpoint_forecast  predictions %d  period error %s  next-start error %s (of the period, medians)\n",
		f.Predictions, fmtNum(f.PeriodErrorMedian), fmtNum(f.NextStartErrorMedian))
	w := r.Scores.Workload
	fmt.Fprintf(env.stdout, "  workload labels      %d windows, accuracy %s\n", w.Windows, fmtNum(w.Accuracy))
	a := r.Scores.Attribution
	fmt.Fprintf(env.stdout, "  gpu attribution      %.0f storage-caused idle GPU-s, %s attributed right; healthy idle blamed on storage %s\n",
		float64(a.StorageIdleSeconds), fmtNum(a.Share), fmtNum(a.HealthyBlamedShare))
	m := r.Remedy
	fmt.Fprintf(env.stdout, "  remediation (%s)  hotspots %d, recovered ≥ %.0f %% within %s: %d of %d affected (median %s s); max/mean load after %s; bytes moved %d ÷ lower bound %d = %s; stripes lost %d (left on failing drives %d); non-urgent bytes in checkpoint bursts %.0f; effects measured %d of %d plans that acted\n",
		m.Method, m.Hotspots, 100*score.RecoverUtil, score.RecoverWithin, m.Recovered, m.Affected, fmtNum(m.RecoverMedian), fmtNum(m.MaxMean),
		m.BytesMoved, m.LowerBound, fmtNum(m.CostRatio), m.StripesLost, m.StripesLeft, m.CheckpointBytes, m.Measured, m.Acted)
	fmt.Fprintf(env.stdout, "Outputs: %s/eval.json (and the demo's files beside it)\n", out)
}

func fmtNum(n score.Num) string {
	b, _ := n.MarshalJSON()
	if string(b) == "null" {
		return "–"
	}
	return fmt.Sprintf("%.3g", float64(n))
}
