package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/ballast-io/ballast/analyzer/drivehealth"
)

// Default inputs of `ballast eval drives`, relative to the repository root
// where `make eval` runs.
const (
	defaultBackblazeCSV = "analyzer/drivehealth/testdata/backblaze-2013/drives.csv"
	defaultSmartctlDir  = "analyzer/drivehealth/testdata/smartctl"
)

func init() {
	register(&command{
		name:    "train drive-model",
		summary: "train the failing-drive model from a Backblaze CSV",
		run:     runTrainDriveModel,
	})
	register(&command{
		name:    "drives score",
		summary: "score every drive-day of a Backblaze CSV (JSON lines)",
		run:     runDrivesScore,
	})
	register(&command{
		name:    "eval drives",
		summary: "evaluate failing-drive prediction; write a markdown section",
		run:     runEvalDrives,
	})
}

func runTrainDriveModel(_ context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "train drive-model", `Usage: ballast train drive-model --backblaze CSV --out FILE

Trains the logistic-regression drive-failure model on the train split of a
Backblaze "Hard Drive Data and Stats" CSV (drives whose serial hashes into
the test split are never used) and writes the model as JSON. The same CSV
and options always give a byte-identical file; the shipped model is
analyzer/drivehealth/model/drive-model.json.`)
	def := drivehealth.DefaultTrainOptions()
	csvPath := fs.String("backblaze", "", "Backblaze CSV to train on (required)")
	out := fs.String("out", "", "where to write the model JSON (required; - for stdout)")
	horizon := fs.Int("horizon-days", def.HorizonDays, "a day is a positive example when its drive fails within this many days")
	l2 := fs.Float64("l2", def.L2, "ridge penalty on the standardised weights")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *csvPath == "" || *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: train drive-model needs --backblaze and --out and no arguments", errUsage)
	}
	if *horizon <= 0 || *l2 < 0 {
		return fmt.Errorf("%w: --horizon-days must be > 0 and --l2 >= 0, got %d and %g", errUsage, *horizon, *l2)
	}
	drives, err := readBackblaze(*csvPath)
	if err != nil {
		return err
	}
	opt := def
	opt.HorizonDays, opt.L2 = *horizon, *l2
	m, err := drivehealth.TrainModel(drives, opt)
	if err != nil {
		return err
	}
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	if err := writeOut(env, *out, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "trained on %d drives (%d failed), %d drive-days (%d positive)\n",
		m.Train.Drives, m.Train.FailedDrives, m.Train.Days, m.Train.PositiveDays)
	return nil
}

func runDrivesScore(_ context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "drives score", `Usage: ballast drives score --backblaze CSV --out FILE.jsonl [--model FILE]

Scores every drive on every day of a Backblaze CSV with the rules and the
model combined, each day from the data up to that day only, and writes one
JSON object per drive per day, ordered by serial then date:

  {"serial":…, "date":"YYYY-MM-DD", "risk":0..1, "explanation":[…]}

explanation lists the rules that fired and the model features that raise the
risk most, each with its value and how unusual it is among healthy drives.`)
	csvPath := fs.String("backblaze", "", "Backblaze CSV to score (required)")
	out := fs.String("out", "", "where to write the JSON lines (required; - for stdout)")
	modelPath := fs.String("model", "", "model JSON to use (default: the model built into the binary)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *csvPath == "" || *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: drives score needs --backblaze and --out and no arguments", errUsage)
	}
	m, drives, err := loadModelAndDrives(*modelPath, *csvPath)
	if err != nil {
		return err
	}
	opt := drivehealth.DefaultRuleOptions()
	return writeOut(env, *out, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for i := range drives {
			for _, s := range drivehealth.ScoreDrive(&drives[i], m, opt) {
				if err := enc.Encode(s); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func runEvalDrives(_ context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "eval drives", `Usage: ballast eval drives --out FILE [--backblaze CSV] [--smartctl DIR] [--model FILE]

Evaluates failing-drive prediction on the held-out drives (split by serial)
of a Backblaze CSV — the rules and model combined, the model alone, a
smartctl_exporter-style static-rule baseline and a Ceph-style
day-to-day-difference baseline, in the same run — then runs every
smartctl --json capture in DIR through the rules, and writes the markdown
section that make eval puts into docs/EVALUATION.md. Defaults are the
repository's test data, so run it from the repository root.`)
	out := fs.String("out", "", "where to write the markdown (required; - for stdout)")
	csvPath := fs.String("backblaze", defaultBackblazeCSV, "Backblaze CSV to evaluate on")
	dir := fs.String("smartctl", defaultSmartctlDir, "folder of smartctl --json captures (*.json); empty to skip")
	modelPath := fs.String("model", "", "model JSON to evaluate (default: the model built into the binary)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: eval drives needs --out and no arguments", errUsage)
	}
	m, drives, err := loadModelAndDrives(*modelPath, *csvPath)
	if err != nil {
		return err
	}
	opt := drivehealth.DefaultRuleOptions()
	res := drivehealth.Evaluate(drives, []drivehealth.Method{
		drivehealth.BallastMethod(m, opt), drivehealth.ModelMethod(m),
		drivehealth.StaticRuleMethod(), drivehealth.CephDiffMethod(),
	})
	var captures []drivehealth.CaptureResult
	if *dir != "" {
		if captures, err = checkCaptures(*dir, m, opt); err != nil {
			return err
		}
	}
	return writeOut(env, *out, func(w io.Writer) error { return res.WriteMarkdown(w, captures) })
}

// checkCaptures runs every *.json capture in dir through the rules, in
// file-name order.
func checkCaptures(dir string, m *drivehealth.Model, opt drivehealth.RuleOptions) ([]drivehealth.CaptureResult, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("cannot list smartctl captures in %q: %w", dir, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("cannot check smartctl captures: no *.json in %q", dir)
	}
	sort.Strings(names)
	var out []drivehealth.CaptureResult
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("cannot read smartctl capture %q: %w", n, err)
		}
		r, err := drivehealth.CheckCapture(filepath.Base(n), bytes.NewReader(b), m, opt)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func readBackblaze(path string) ([]drivehealth.Drive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open backblaze csv %q: %w", path, err)
	}
	defer f.Close()
	drives, err := drivehealth.ParseBackblaze(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("cannot load %q: %w", path, err)
	}
	return drives, nil
}

// loadModelAndDrives loads the model (the built-in one when modelPath is
// empty) and the Backblaze CSV to run it on.
func loadModelAndDrives(modelPath, csvPath string) (*drivehealth.Model, []drivehealth.Drive, error) {
	m, err := loadDriveModel(modelPath)
	if err != nil {
		return nil, nil, err
	}
	drives, err := readBackblaze(csvPath)
	return m, drives, err
}

func loadDriveModel(path string) (*drivehealth.Model, error) {
	if path == "" {
		return drivehealth.DefaultModel()
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open drive model %q: %w", path, err)
	}
	defer f.Close()
	m, err := drivehealth.ParseModel(f)
	if err != nil {
		return nil, fmt.Errorf("cannot load drive model %q: %w", path, err)
	}
	return m, nil
}

// writeOut runs write against path ("-" is stdout) through a buffer and
// reports close errors, so a full disk is not a silent success.
func writeOut(env *cmdEnv, path string, write func(io.Writer) error) error {
	if path == "-" {
		bw := bufio.NewWriter(env.stdout)
		if err := write(bw); err != nil {
			return fmt.Errorf("cannot write output: %w", err)
		}
		return bw.Flush()
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cannot create folder %q: %w", dir, err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("cannot create %q: %w", path, err)
	}
	bw := bufio.NewWriter(f)
	if err := write(bw); err != nil {
		f.Close()
		return fmt.Errorf("cannot write %q: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("cannot write %q: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot close %q: %w", path, err)
	}
	return nil
}
