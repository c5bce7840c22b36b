package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ballast-io/ballast/sim"
	"github.com/ballast-io/ballast/sim/score"
)

const evalReadAheadUsage = `Usage: ballast eval readahead --out FILE [--seeds 5] [--jobs 2] [--duration 30m] [--scenario readahead]

Runs ballast eval on the twin's readahead scenario (a SIMULATED cluster: a
training job starved by a 128 KiB read-ahead on a 1 ms path, and an
inference service reading at random through a mapping on another node)
for seeds 1..N with three read-ahead methods, each as a subprocess of this
binary: static-kernel-default (every mount keeps 128 KiB),
static-nfsrahead (every mount at 15 × rsize from the start) and ballast
(the closed loop). Everything else is ballast's in all three. It writes a
markdown section (committed as docs/eval/readahead.md, appended to
EVALUATION.md by ballast eval all): per method the training job's read
throughput and GPU utilisation, the inference mount's read latency, and
the changes the loop made, each scored on the twin's ground truth; and
issue 14's targets per seed against static-kernel-default of the same
seed (docs/evaluation.md#read-ahead).`

// raStart is the simulated start of every read-ahead run, so that a
// section is reproducible.
const raStart = "2026-01-01T00:00:00Z"

func init() {
	register(&command{name: "eval readahead", summary: "compare the read-ahead closed loop with static values on the twin; write a markdown section", run: runEvalReadAhead})
}

func runEvalReadAhead(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "eval readahead", evalReadAheadUsage)
	out := fs.String("out", "", "markdown file to write (required; - for stdout)")
	seeds := fs.Int("seeds", 5, "seeds (1..N)")
	jobs := fs.Int("jobs", 2, "runs at once")
	duration := fs.Duration("duration", 30*time.Minute, "simulated time per run")
	scenario := fs.String("scenario", "readahead", "scenario name or file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkSeedsFlags(fs.Args(), *out, *seeds, *jobs); err != nil {
		return err
	}
	if *duration < score.RAUtilWithin+time.Minute {
		return fmt.Errorf("%w: --duration %s is too short: the targets are read %s in", errUsage, *duration, score.RAUtilWithin)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find this binary to run scenarios: %w", err)
	}
	dir, err := os.MkdirTemp("", "ballast-eval-readahead-")
	if err != nil {
		return fmt.Errorf("cannot create a work folder: %w", err)
	}
	defer os.RemoveAll(dir)
	var runs []*evalRun
	for s := 1; s <= *seeds; s++ {
		for _, m := range sim.ReadAheadMethods {
			runs = append(runs, &evalRun{scenario: *scenario, seed: s, method: m, dir: filepath.Join(dir, fmt.Sprintf("seed%d-%s", s, m)),
				extra: []string{"--duration", duration.String(), "--start", raStart}})
		}
	}
	runEvals(ctx, env, exe, *jobs, runs)
	res := raResults{}
	var errs []string
	for _, r := range runs {
		if r.err != nil {
			errs = append(errs, r.err.Error())
			continue
		}
		res.add(r.seed, r.method, r.rep)
	}
	var md bytes.Buffer
	writeReadAheadMarkdown(&md, "ballast eval readahead "+strings.Join(args, " "), *scenario, *duration, res, *seeds)
	if len(errs) > 0 {
		fmt.Fprintf(&md, "\nRuns that failed:\n\n")
		for _, e := range errs {
			fmt.Fprintf(&md, "- %s\n", strings.ReplaceAll(e, "\n", " "))
		}
	}
	if *out == "-" {
		_, err = env.stdout.Write(md.Bytes())
	} else {
		err = os.WriteFile(*out, md.Bytes(), 0o644)
	}
	if err != nil {
		return fmt.Errorf("cannot write %q: %w", *out, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d read-ahead runs failed", len(errs), len(runs))
	}
	return nil
}

// raRun is what one run's eval.json says of read-ahead.
type raRun struct {
	trainBps, trainUtil, trainAfter, trainReached float64
	infP99, infAmp                                float64
	changes, notHelped, rolledBack, kept          float64
}

// raResults holds every run by seed and method.
type raResults map[int]map[string]raRun

func (r raResults) add(seed int, method string, rep map[string]any) {
	nan := math.NaN()
	x := raRun{trainBps: nan, trainUtil: nan, trainAfter: nan, trainReached: nan, infP99: nan, infAmp: nan}
	ra, _ := rep["readahead_scores"].(map[string]any)
	get := func(m map[string]any, k string) float64 {
		if v, ok := m[k].(float64); ok {
			return v
		}
		return nan
	}
	if ra != nil {
		x.changes, x.notHelped, x.rolledBack, x.kept = get(ra, "changes"), get(ra, "not_helped"), get(ra, "rolled_back"), get(ra, "not_helped_kept")
		js, _ := ra["jobs"].([]any)
		train := false
		for _, j := range js {
			m, _ := j.(map[string]any)
			switch m["kind"] {
			case "training":
				// the first training job is the starved one the targets are
				// about (the scenario's train)
				if train {
					continue
				}
				train = true
				x.trainBps, x.trainUtil, x.trainAfter = get(m, "read_bytes_per_second"), get(m, "gpu_util"), get(m, "gpu_util_after_10m")
				x.trainReached = get(m, "gpu_util_95_reached_seconds")
				if math.IsNaN(x.trainReached) && !math.IsNaN(x.trainUtil) {
					x.trainReached = math.Inf(1) // never
				}
			case "inference":
				x.infP99, x.infAmp = get(m, "read_latency_p99_ms"), get(m, "amplification")
			}
		}
	}
	if r[seed] == nil {
		r[seed] = map[string]raRun{}
	}
	r[seed][method] = x
}

// raTarget is one of issue 14's targets, judged per seed.
type raTarget struct {
	name string
	// value is the seed's number (NaN: not defined); ok whether it meets
	// the goal
	value func(m, base raRun) float64
	ok    func(v float64) bool
	prec  int
}

var raTargets = []raTarget{
	{"training read throughput ÷ static-kernel-default's (≥ 1.5)", func(m, b raRun) float64 { return m.trainBps / b.trainBps }, func(v float64) bool { return v >= 1.5 }, 2},
	{"training GPU utilisation ≥ 95 % within 10 min (s to reach it and stay)", func(m, b raRun) float64 { return m.trainReached }, func(v float64) bool { return v <= score.RAUtilWithin.Seconds() }, 0},
	{"inference p99 read latency ÷ static-kernel-default's (≤ 1.05)", func(m, b raRun) float64 { return m.infP99 / b.infP99 }, func(v float64) bool { return v <= 1.05 }, 3},
	{"changes that did not help and were not rolled back (0)", func(m, b raRun) float64 { return m.kept }, func(v float64) bool { return v == 0 }, 0},
}

func fmtRA(v float64, prec int) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		return "never"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// meanSD formats the mean ± standard deviation of the finite values.
func meanSD(xs []float64, prec int) string {
	var fin []float64
	never := 0
	for _, x := range xs {
		switch {
		case math.IsInf(x, 1):
			never++
		case !math.IsNaN(x):
			fin = append(fin, x)
		}
	}
	if len(fin) == 0 {
		if never > 0 {
			return "never"
		}
		return "–"
	}
	mean := 0.0
	for _, x := range fin {
		mean += x
	}
	mean /= float64(len(fin))
	sd := 0.0
	for _, x := range fin {
		sd += (x - mean) * (x - mean)
	}
	if len(fin) > 1 {
		sd = math.Sqrt(sd / float64(len(fin)-1))
	}
	s := fmt.Sprintf("%.*f ± %.*f", prec, mean, prec, sd)
	if never > 0 {
		s += fmt.Sprintf(" (never in %d)", never)
	}
	return s
}

func writeReadAheadMarkdown(w *bytes.Buffer, cmdLine, scenario string, dur time.Duration, res raResults, seeds int) {
	fmt.Fprintf(w, "## Read-ahead (issue 14)\n\n")
	fmt.Fprintf(w, "Generated by `%s`. Do not edit by hand; the method is in docs/evaluation.md, section Read-ahead. What the read-ahead methods did on the twin's `%s` scenario (**simulated**), %s each from %s, seeds 1..%d, scored on the twin's ground truth. Methods, each in its own run of the same seed: **%s** (every mount keeps 128 KiB), **%s** (every mount at %d × rsize from the start, as nfsrahead sets it), **%s** (the closed loop, docs/readahead.md).\n\n",
		cmdLine, scenario, dur, raStart, seeds, sim.MethodRAKernel, sim.MethodRANfsrahead, sim.NfsraheadRsizeFactor, sim.MethodBallast)
	fmt.Fprintf(w, "### Targets (the closed loop against %s, per seed)\n\n| target | ", sim.MethodRAKernel)
	for s := 1; s <= seeds; s++ {
		fmt.Fprintf(w, "seed %d | ", s)
	}
	fmt.Fprintf(w, "seeds meeting it |\n|---|")
	for s := 0; s <= seeds; s++ {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintln(w)
	for _, t := range raTargets {
		fmt.Fprintf(w, "| %s | ", t.name)
		met, n := 0, 0
		for s := 1; s <= seeds; s++ {
			m, ok1 := res[s][sim.MethodBallast]
			b, ok2 := res[s][sim.MethodRAKernel]
			if !ok1 || !ok2 {
				fmt.Fprintf(w, "no run | ")
				continue
			}
			v := t.value(m, b)
			fmt.Fprintf(w, "%s | ", fmtRA(v, t.prec))
			if !math.IsNaN(v) {
				n++
				if t.ok(v) {
					met++
				}
			}
		}
		fmt.Fprintf(w, "%d of %d |\n", met, n)
	}
	fmt.Fprintf(w, "\n### Per method (mean ± sd over seeds)\n\n")
	fmt.Fprintf(w, "Training: the job's application read throughput over the run, its GPU utilisation over the run and from 10 min on, and the time from which every minute's utilisation is ≥ 95 %%. Inference: p99 over 10-second intervals of the mount's mean READ round trip, and server bytes per application byte. Changes: set_read_ahead actions the method made; not helped: verdict ineffective or worse; rolled back; kept though it did not help.\n\n")
	fmt.Fprintf(w, "| method | training GB/s | ÷ %s | GPU util | util from 10 min | ≥ 95 %% from s | inference p99 ms | ÷ %s | inference amplification | changes | not helped | rolled back | kept not helping |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", sim.MethodRAKernel, sim.MethodRAKernel)
	for _, meth := range sim.ReadAheadMethods {
		col := func(f func(m, b raRun) float64) []float64 {
			var xs []float64
			for s := 1; s <= seeds; s++ {
				m, ok := res[s][meth]
				if !ok {
					continue
				}
				xs = append(xs, f(m, res[s][sim.MethodRAKernel]))
			}
			return xs
		}
		if len(col(func(m, b raRun) float64 { return 0 })) == 0 {
			fmt.Fprintf(w, "| %s | no run finished |  |  |  |  |  |  |  |  |  |  |  |\n", meth)
			continue
		}
		sum := func(f func(m raRun) float64) string {
			t := 0.0
			for _, x := range col(func(m, b raRun) float64 { return f(m) }) {
				if !math.IsNaN(x) {
					t += x
				}
			}
			return fmtRA(t, 0)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", meth,
			meanSD(col(func(m, b raRun) float64 { return m.trainBps / 1e9 }), 2),
			meanSD(col(func(m, b raRun) float64 { return m.trainBps / b.trainBps }), 2),
			meanSD(col(func(m, b raRun) float64 { return m.trainUtil }), 3),
			meanSD(col(func(m, b raRun) float64 { return m.trainAfter }), 3),
			meanSD(col(func(m, b raRun) float64 { return m.trainReached }), 0),
			meanSD(col(func(m, b raRun) float64 { return m.infP99 }), 3),
			meanSD(col(func(m, b raRun) float64 { return m.infP99 / b.infP99 }), 3),
			meanSD(col(func(m, b raRun) float64 { return m.infAmp }), 2),
			sum(func(m raRun) float64 { return m.changes }), sum(func(m raRun) float64 { return m.notHelped }),
			sum(func(m raRun) float64 { return m.rolledBack }), sum(func(m raRun) float64 { return m.kept }))
	}
}
