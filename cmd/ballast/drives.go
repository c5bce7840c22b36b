package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ballast-io/ballast/analyzer/drivehealth"
	"github.com/ballast-io/ballast/cluster/analysis"
	"github.com/ballast-io/ballast/models"
)

// Default inputs of `ballast eval drives`, relative to the repository root
// where `make eval` runs.
const (
	defaultBackblazeCSV = "analyzer/drivehealth/testdata/backblaze-2013/drives.csv"
	defaultSmartctlDir  = "analyzer/drivehealth/testdata/smartctl"
	defaultVariants     = "analyzer/drivehealth/testdata/smartctl-variants.json"
)

func init() {
	register(&command{
		name:    "train drive-model",
		summary: "train the failing-drive model from a Backblaze CSV",
		run:     runTrainDriveModel,
	})
	register(&command{
		name:    "drives score",
		summary: "judge drives from a Backblaze CSV or a folder of smartctl JSON (JSON lines)",
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
	fs := newFlagSet(env, "drives score", `Usage: ballast drives score (--backblaze CSV | --smartctl DIR) --out FILE.jsonl [--model FILE]

Judges drives offline with the same drive-health code the mds runs on its
agents' series (rules and model), and writes JSON lines.

--backblaze: every drive on every day of a Backblaze "Hard Drive Data and
Stats" CSV, each day from the data up to that day only, ordered by serial
then date:

  {"serial":…, "date":"YYYY-MM-DD", "risk":0..1, "explanation":[…]}

--smartctl: a folder of 'smartctl --json --xall' (or 'nvme smart-log -o
json') files, decoded by the agent's smartctl collector. Every *.json file
directly in DIR is one drive's lone reading; every subfolder is one drive's
readings over time (files at their smartctl local_time, else their
modification time). One line per drive, at its latest reading, in name order:

  {"drive":…, "model":…, "protocol":…, "readings":N, "risk":0..1,
   "explanation":[…], "findings":[…]}

Files that are not drive reports (smartctl --scan output, smartctl error
documents, other JSON) are skipped with the reason on stderr.

explanation lists the rules that fired and the model features that raise the
risk most, each with its value and how unusual it is among healthy drives;
findings are what the mds would report (drive_failure_risk, drive_wearout),
with their evidence.`)
	csvPath := fs.String("backblaze", "", "Backblaze CSV to score")
	dir := fs.String("smartctl", "", "folder of smartctl or nvme-cli JSON files to judge")
	out := fs.String("out", "", "where to write the JSON lines (required; - for stdout)")
	modelPath := fs.String("model", "", "model JSON to use (default: the model built into the binary)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if (*csvPath == "") == (*dir == "") || *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: drives score needs one of --backblaze or --smartctl, --out and no arguments", errUsage)
	}
	opt := drivehealth.DefaultRuleOptions()
	if *dir != "" {
		return scoreDriveFiles(env, *dir, *out, *modelPath, opt)
	}
	m, drives, err := loadModelAndDrives(*modelPath, *csvPath)
	if err != nil {
		return err
	}
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

// driveScore is one line of `drives score --smartctl`.
type driveScore struct {
	Drive       string                    `json:"drive"`
	Model       string                    `json:"model,omitempty"`
	Protocol    string                    `json:"protocol"`
	Readings    int                       `json:"readings"`
	Risk        float64                   `json:"risk"`
	Explanation []drivehealth.Explanation `json:"explanation"`
	Findings    []models.Finding          `json:"findings"`
}

// scoreDriveFiles judges every drive of a folder of drive files.
func scoreDriveFiles(env *cmdEnv, dir, out, modelPath string, opt drivehealth.RuleOptions) error {
	m, err := loadDriveModel(modelPath)
	if err != nil {
		return err
	}
	drives, skipped, err := analysis.ReadDriveFiles(dir)
	if err != nil {
		return err
	}
	for _, s := range skipped {
		fmt.Fprintf(env.stderr, "skipped %s: %s\n", s.File, s.Reason)
	}
	err = writeOut(env, out, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for _, d := range drives {
			last := d.History[len(d.History)-1]
			a := drivehealth.Assess(d.History, last.Time, m, opt)
			fs := drivehealth.Findings(models.Subject{Kind: models.SubjectDevice, ID: d.Name}, a, m, last.Time)
			line := driveScore{Drive: d.Name, Model: d.Model, Protocol: string(last.Protocol), Readings: len(d.History),
				Risk: math.Round(a.Risk*1e6) / 1e6, Explanation: a.Explanation, Findings: fs}
			if line.Explanation == nil {
				line.Explanation = []drivehealth.Explanation{}
			}
			if line.Findings == nil {
				line.Findings = []models.Finding{}
			}
			if err := enc.Encode(line); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "judged %d drives from %s, skipped %d files\n", len(drives), dir, len(skipped))
	return nil
}

func runEvalDrives(_ context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "eval drives", `Usage: ballast eval drives --out FILE [--backblaze CSV] [--smartctl DIR] [--variants FILE] [--model FILE]

Evaluates failing-drive prediction on the held-out drives (split by serial)
of a Backblaze CSV — the rules and model combined, the model alone, a
smartctl_exporter-style static-rule baseline and a Ceph-style
day-to-day-difference baseline, in the same run — then judges every
smartctl --json capture in DIR as 'drives score --smartctl' does (plus the
derived readings of --variants: real captures with a field changed, for
conditions no capture shows), and writes the markdown section that make
eval puts into docs/EVALUATION.md and that docs/eval/drives.md holds.
Defaults are the repository's test data, so run it from the repository root.`)
	out := fs.String("out", "", "where to write the markdown (required; - for stdout)")
	csvPath := fs.String("backblaze", defaultBackblazeCSV, "Backblaze CSV to evaluate on")
	dir := fs.String("smartctl", defaultSmartctlDir, "folder of smartctl --json captures (*.json); empty to skip")
	variants := fs.String("variants", defaultVariants, "JSON list of derived readings of captures in --smartctl; empty for none")
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
	var caps *drivehealth.Captures
	if *dir != "" {
		if caps, err = checkCaptures(*dir, *variants, m, opt); err != nil {
			return err
		}
	}
	return writeOut(env, *out, func(w io.Writer) error { return res.WriteMarkdown(w, caps) })
}

// checkCaptures judges every drive of a folder of captures, and the
// derived readings of the variants file, in name order.
func checkCaptures(dir, variants string, m *drivehealth.Model, opt drivehealth.RuleOptions) (*drivehealth.Captures, error) {
	drives, skipped, err := analysis.ReadDriveFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(drives) == 0 {
		return nil, fmt.Errorf("cannot check smartctl captures: no drive report in %q", dir)
	}
	c := &drivehealth.Captures{Dir: filepath.ToSlash(filepath.Clean(dir)) + "/", Skipped: skipped}
	if strings.HasPrefix(c.Dir, "../") {
		c.Dir = strings.TrimLeft(c.Dir, "./") // tests run from cmd/ballast
	}
	for _, d := range drives {
		c.Results = append(c.Results, drivehealth.CheckDrive(d.Name, d.Model, d.History, m, opt))
	}
	if variants == "" {
		return c, nil
	}
	derived, vs, err := analysis.ReadDriveVariants(variants, dir)
	if err != nil {
		return nil, err
	}
	for i, d := range derived {
		r := drivehealth.CheckDrive(vs[i].Base, d.Model, d.History, m, opt)
		var set []string
		for k, v := range vs[i].Set {
			set = append(set, fmt.Sprintf("%s set to %g", k, v))
		}
		sort.Strings(set)
		r.Derived = strings.Join(set, ", ") + " (" + vs[i].Why + ")"
		c.Variants = append(c.Variants, r)
	}
	return c, nil
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
