// Command benchall measures ballast's foundation against the storage it
// embeds and writes the results into the foundation section of
// BENCHMARKS.md (see bench/README.md):
//
//   - raw VictoriaMetrics lib/storage Storage.AddRows, opened in this process;
//   - `ballast mds` (started from -ballast) through /api/v1/import/prometheus
//     and /api/v1/write;
//   - VictoriaMetrics single-node, built from the module cache, through the
//     same two endpoints on the same payloads;
//   - query_range latency of both servers for 1 and 1,000 series over 1 h at
//     1 s.
//
// Everything listens on 127.0.0.1; every loop is bounded in count and time;
// the servers are stopped (killed if need be) and the temporary directories
// removed on every way out, including interrupts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/logger"
)

// Flags live on flag.CommandLine because VictoriaMetrics' packages register
// theirs there (none of these names collide) and lib/storage needs it
// parsed before it opens.
var (
	ballastBin   = flag.String("ballast", "", "path of the ballast binary to benchmark (required; make bench builds bin/ballast)")
	outPath      = flag.String("out", "BENCHMARKS.md", "markdown file whose foundation section is rewritten; \"-\" prints the section to stdout")
	quick        = flag.Bool("quick", false, "tiny datasets (seconds, not minutes): a smoke run of the harness, not a measurement")
	vmBin        = flag.String("vm", "", "VictoriaMetrics single-node binary to compare with (default: build it from the module cache)")
	writers      = flag.Int("writers", 2, "concurrent writers: AddRows goroutines and HTTP client goroutines")
	queryN       = flag.Int("query-requests", 200, "timed requests per query and server")
	totalTimeout = flag.Duration("timeout", 30*time.Minute, "abort the whole run after this long")
	only         = flag.String("only", "", "comma-separated subset to run, for diagnosis: raw, ballast-import, ballast-rw, vm-import, vm-rw, query (default: all)")
	cpuProfile   = flag.String("cpuprofile", "", "write a CPU profile of this process (raw AddRows, rendering, the client) to this file")
	datasetsFlag = flag.String("datasets", "", "comma-separated ingest datasets to run, for diagnosis: 10k, 1M (default: both)")
)

// datasetNames maps -datasets names to the index of the dataset in datasets().
var datasetNames = map[string]int{"10k": 0, "1M": 1}

// parseDatasets returns the selected dataset indexes; nil means all.
func parseDatasets(s string) (map[int]bool, error) {
	return parseSelection("datasets", s, datasetNames, "10k, 1M")
}

// onlyNames maps -only names to the paths they select.
var onlyNames = map[string]string{
	"raw": pathRaw, "ballast-import": pathBallastImport, "ballast-rw": pathBallastRW,
	"vm-import": pathVMImport, "vm-rw": pathVMRW, "query": "query",
}

// parseOnly returns the selected paths; nil means all.
func parseOnly(s string) (map[string]bool, error) {
	return parseSelection("only", s, onlyNames, "raw, ballast-import, ballast-rw, vm-import, vm-rw, query")
}

// parseSelection parses the comma-separated names given to flag -name
// into what names maps them to; "" selects everything (nil).
func parseSelection[T comparable](name, s string, names map[string]T, valid string) (map[T]bool, error) {
	if s == "" {
		return nil, nil
	}
	sel := map[T]bool{}
	for _, n := range strings.Split(s, ",") {
		v, ok := names[strings.TrimSpace(n)]
		if !ok {
			return nil, fmt.Errorf("flag -%s: %q is not one of %s", name, n, valid)
		}
		sel[v] = true
	}
	return sel, nil
}

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: go run ./bench/cmd/benchall -ballast bin/ballast [-out BENCHMARKS.md] [-quick] [-vm PATH]\n\n"+
			"Benchmarks ballast's ingest and query paths against raw VictoriaMetrics lib/storage and\n"+
			"VictoriaMetrics single-node, and rewrites the foundation section of -out.\n\nFlags:\n")
		for _, name := range []string{"ballast", "out", "quick", "vm", "writers", "query-requests", "timeout", "only", "datasets", "cpuprofile"} {
			f := flag.Lookup(name)
			fmt.Fprintf(flag.CommandLine.Output(), "  -%s\n    \t%s (default %q)\n", f.Name, f.Usage, f.DefValue)
		}
		fmt.Fprintf(flag.CommandLine.Output(), "\nVictoriaMetrics' own flags (-loggerLevel, -memory.allowedPercent, …) apply to the in-process lib/storage.\n")
	}
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "benchall: %v\n", err)
		os.Exit(1)
	}
}

func run() (err error) {
	if *ballastBin == "" {
		return errors.New("flag -ballast is required: the path of the ballast binary (make bench passes bin/ballast)")
	}
	if *writers < 1 || *queryN < 1 {
		return fmt.Errorf("flags -writers %d and -query-requests %d must be at least 1", *writers, *queryN)
	}
	sel, err := parseOnly(*only)
	if err != nil {
		return err
	}
	dsel, err := parseDatasets(*datasetsFlag)
	if err != nil {
		return err
	}
	bin, err := filepath.Abs(*ballastBin)
	if err != nil {
		return fmt.Errorf("cannot resolve ballast binary %q: %w", *ballastBin, err)
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		return fmt.Errorf("cannot use ballast binary %q: not a file (run make build first)", *ballastBin)
	}
	if flag.Lookup("loggerLevel").Value.String() == "INFO" && !flagSet("loggerLevel") {
		flag.Set("loggerLevel", "ERROR")
	}
	logger.InitNoLogFlags()

	ctx, cancel := context.WithTimeout(context.Background(), *totalTimeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	tmp, err := os.MkdirTemp("", "ballast-bench-")
	if err != nil {
		return fmt.Errorf("cannot create a temporary directory: %w", err)
	}
	// Deferred in this order: servers die first, then their directories go.
	defer os.RemoveAll(tmp)
	defer killAll()
	defer func() {
		if p := recover(); p != nil {
			killAll()
			os.RemoveAll(tmp)
			panic(p)
		}
	}()

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("cannot create CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cannot start CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	h := &harness{ballast: bin, tmp: tmp, writers: *writers, client: newClient(*writers), only: sel}
	rep := &report{
		Only:    *only,
		Sets:    *datasetsFlag,
		Command: commandLine(),
		Started: time.Now().UTC(),
		Machine: readMachine(),
		Quick:   *quick,
		Writers: *writers,
	}
	rep.BallastVersion = firstLine(output(bin, "version"))
	rep.VMModule = vmModuleVersion()

	if *vmBin != "" {
		h.vm, err = filepath.Abs(*vmBin)
		if err != nil {
			return fmt.Errorf("cannot resolve VictoriaMetrics binary %q: %w", *vmBin, err)
		}
	} else {
		h.vm = filepath.Join(tmp, "victoria-metrics")
		progress("building VictoriaMetrics single-node from the module cache")
		t := time.Now()
		if err := buildVM(ctx, h.vm); err != nil {
			return err
		}
		rep.VMBuild = time.Since(t)
	}
	if rep.VMVersion = firstLine(output(h.vm, "-version")); rep.VMVersion == "" {
		rep.VMVersion = "(-version printed nothing)"
	}

	sets := datasets(*quick, time.Now())
	for i, d := range sets {
		if dsel != nil && !dsel[i] {
			continue
		}
		rep.Datasets = append(rep.Datasets, h.runDataset(ctx, d))
		if ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() == nil && h.selected("query") {
		rep.Query = h.runQueries(ctx, queryDataset(*quick, time.Now()), queries(*quick, *queryN))
	}
	rep.Finished = time.Now().UTC()
	rep.LoadEnd = readLoad()
	if ctx.Err() != nil {
		return fmt.Errorf("run aborted, %s not written: %w", *outPath, context.Cause(ctx))
	}

	section := rep.markdown()
	if *outPath == "-" {
		fmt.Print(section)
	} else if err := writeSection(*outPath, section); err != nil {
		return err
	}
	progress("wrote %s in %s", *outPath, rep.Finished.Sub(rep.Started).Round(time.Second))
	if errs := rep.errors(); len(errs) > 0 {
		return fmt.Errorf("%d measurements failed (see %s):\n%w", len(errs), *outPath, errors.Join(errs...))
	}
	return nil
}

// flagSet reports whether name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// datasets are the two ingest workloads of the issue: 10k series at 1 s and
// 1M series at 10 s, ending a minute before now (recent data, as pushed by
// live agents), in bodies of 10k samples.
//
// Quick datasets end two hours before now instead: VictoriaMetrics refreshes
// its current-hour series set only every ~10 s (Storage.currHourMetricIDsUpdater),
// so new series of the current hour take up to ~11 s to become searchable,
// older ones ~2 s; the smoke run would otherwise spend most of its time
// waiting.
func datasets(quick bool, now time.Time) []*dataset {
	a := &dataset{Name: "10k series @ 1 s", Metric: "bench_ingest", Series: 10_000, Points: 300, Step: time.Second, BatchSeries: 10_000, TargetRawRatio: 0.5}
	b := &dataset{Name: "1M series @ 10 s", Metric: "bench_ingest", Series: 1_000_000, Points: 5, Step: 10 * time.Second, BatchSeries: 10_000, TargetRawRatio: 0.7}
	if quick {
		a.Name, a.Series, a.Points, a.BatchSeries = "quick: 1k series @ 1 s", 1_000, 30, 1_000
		b.Name, b.Series, b.Points, b.BatchSeries = "quick: 12k series @ 10 s", 12_000, 3, 5_000
	}
	ago := time.Minute
	if quick {
		ago = 2 * time.Hour
	}
	for _, d := range []*dataset{a, b} {
		end := now.Truncate(d.Step).Add(-ago)
		d.Start = end.Add(-time.Duration(d.Points-1) * d.Step).UnixMilli()
	}
	return []*dataset{a, b}
}

// queryDataset is 1,000 series × 1 h at 1 s ending a minute before now,
// pushed in bodies of 10 timestamps × 1,000 series.
func queryDataset(quick bool, now time.Time) *dataset {
	d := &dataset{Name: "1,000 series × 1 h @ 1 s", Metric: "bench_query", Series: 1000, Points: 3600, Step: time.Second, BatchSeries: 1000, BatchPoints: 10}
	ago := time.Minute
	if quick {
		d.Name, d.Series, d.Points = "quick: 100 series × 5 min @ 1 s", 100, 300
		ago = 2 * time.Hour
	}
	end := now.Truncate(time.Second).Add(-ago)
	d.Start = end.Add(-time.Duration(d.Points-1) * time.Second).UnixMilli()
	return d
}

// queries are the timed query_range expressions.
func queries(quick bool, n int) []querySpec {
	series := "1,000"
	if quick {
		series = "100"
		n = min(n, 20)
	}
	return []querySpec{
		{Name: "1 series", Expr: `bench_query{series="0000042"}`, WantSeries: 1, N: n, Budget: time.Minute},
		{Name: series + " series, sum()", Expr: `sum(bench_query)`, WantSeries: 1, N: n, Budget: time.Minute, Note: "reads every series, answers one"},
		// Each answer is ~75 MB of JSON (~1 s), so fewer requests.
		{Name: series + " series", Expr: `bench_query`, WantSeries: -1, N: min(n, 50), Budget: time.Minute, Note: "every point of every series in the JSON answer"},
	}
}

// harness holds what every measurement needs.
type harness struct {
	ballast, vm string
	tmp         string
	writers     int
	client      *http.Client
	only        map[string]bool // nil: everything
}

// selected reports whether path (one of ingestPaths, or "query") runs.
func (h *harness) selected(path string) bool { return h.only == nil || h.only[path] }

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s benchall: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// buildVM builds VictoriaMetrics single-node from the module cache, at the
// version go.mod requires.
func buildVM(ctx context.Context, out string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("cannot build VictoriaMetrics single-node: %w (or pass a binary with -vm)", err)
	}
	ldflags := "-X github.com/VictoriaMetrics/VictoriaMetrics/lib/buildinfo.Version=victoria-metrics-" + vmModuleVersion() + "-built-by-benchall"
	cmd := exec.CommandContext(ctx, goBin, "build", "-ldflags", ldflags, "-o", out, "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cannot build VictoriaMetrics single-node: %w\n%s", err, b)
	}
	return nil
}

// output runs a short command and returns its output, or the error text.
func output(bin string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(%s %s failed: %v)", filepath.Base(bin), strings.Join(args, " "), err)
	}
	return string(b)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// commandLine is how this run was invoked, as a reader would retype it.
func commandLine() string {
	cmd := os.Args[0]
	if strings.Contains(cmd, "go-build") || strings.HasPrefix(cmd, os.TempDir()) {
		cmd = "go run ./bench/cmd/benchall"
	}
	return strings.Join(append([]string{cmd}, os.Args[1:]...), " ")
}
