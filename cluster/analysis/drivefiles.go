package analysis

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/analyzer/drivehealth"
	"github.com/ballast-io/ballast/collector"
	"github.com/ballast-io/ballast/models"
)

// DriveFile is one drive read from smartctl or nvme-cli JSON files.
type DriveFile struct {
	// Name is the file (a lone reading) or the folder (a drive's readings
	// over time) the drive was read from, relative to the folder read.
	Name string
	// Model is the drive model the files name, when they do.
	Model string
	// History is the drive's observations, sorted by time.
	History []drivehealth.Observation
}

// ReadDriveFiles reads a folder of drive files into drive-health
// histories, the offline twin of the mds drive stage: each file is decoded
// by the agent's own smartctl collector (collector.ParseDriveReport) and
// its series go through the same series → observation mapping the stage
// uses (drivehealth.Readings). Every *.json file directly in dir is one
// drive's lone reading, named by the file; every subfolder is one drive's
// readings over time (its *.json files, each at its capture time: smartctl's
// local_time, else the file's modification time), named by the folder.
// Drives are identified by where their files are, not by serial number:
// captures shared for debugging often have the serial redacted.
//
// A file that is not a drive report (`smartctl --scan` output, a smartctl
// error document, other JSON), or cannot be read or decoded, is skipped
// with the reason; only an unreadable dir is an error.
func ReadDriveFiles(dir string) ([]DriveFile, []drivehealth.SkippedFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read drive files in %q: %w", dir, err)
	}
	var out []DriveFile
	var skipped []drivehealth.SkippedFile
	for _, e := range entries {
		var files []string
		switch {
		case e.IsDir():
			names, err := filepath.Glob(filepath.Join(dir, e.Name(), "*.json"))
			if err != nil {
				return nil, nil, fmt.Errorf("cannot list drive files in %q: %w", filepath.Join(dir, e.Name()), err)
			}
			sort.Strings(names)
			files = names
		case strings.HasSuffix(e.Name(), ".json"):
			files = []string{filepath.Join(dir, e.Name())}
		default:
			continue
		}
		d := DriveFile{Name: e.Name()}
		var r drivehealth.Readings
		for _, f := range files {
			model, err := readDriveFile(&r, d.Name, f)
			if err != nil {
				rel, _ := filepath.Rel(dir, f)
				skipped = append(skipped, drivehealth.SkippedFile{File: rel, Reason: skipReason(err)})
				continue
			}
			if model != "" {
				d.Model = model
			}
		}
		if h := r.Histories()[d.Name]; len(h) > 0 {
			d.History = h
			out = append(out, d)
		}
	}
	return out, skipped, nil
}

// readDriveFile adds the readings of one file to r under drive and returns
// the model it names.
func readDriveFile(r *drivehealth.Readings, drive, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	rep, err := collector.ParseDriveReport(b, strings.TrimSuffix(filepath.Base(path), ".json"))
	if err != nil {
		return "", err
	}
	at := rep.Time
	if at.IsZero() {
		st, err := os.Stat(path)
		if err != nil {
			return "", err
		}
		at = st.ModTime().UTC()
	}
	return addReport(r, drive, rep, at), nil
}

// addReport adds a decoded report's series to r under drive at time at
// and returns the model the report names.
func addReport(r *drivehealth.Readings, drive string, rep collector.DriveReport, at time.Time) string {
	var model string
	for _, s := range rep.Samples {
		labels := s.Labels()
		if s.Name == models.MetricDriveInfo {
			model = models.LabelValue(labels, "model")
		}
		r.Add(drive, at, s.Name, labels, s.Value)
	}
	return model
}

// DriveVariant is a derived reading: a real capture with some numeric
// fields changed, for a condition no capture in the repository shows (no
// public NVMe capture has media errors). The evaluation lists variants
// apart from the captures, with what was changed and why.
type DriveVariant struct {
	// Name names the derived drive.
	Name string `json:"name"`
	// Base is the capture it is derived from, a file in the captures folder.
	Base string `json:"base"`
	// Set maps dotted JSON paths (nvme_smart_health_information_log.media_errors)
	// to the values they take.
	Set map[string]float64 `json:"set"`
	// Why says why the variant exists.
	Why string `json:"why"`
}

// ReadDriveVariants reads a JSON list of DriveVariant from path and derives
// each from its base file in dir, decoded and mapped as ReadDriveFiles
// does. Unlike a capture that is not a drive report, a variant that cannot
// be derived is an error: the list is ours.
func ReadDriveVariants(path, dir string) ([]DriveFile, []DriveVariant, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read drive variants %q: %w", path, err)
	}
	var vs []DriveVariant
	if err := json.Unmarshal(b, &vs); err != nil {
		return nil, nil, fmt.Errorf("cannot parse drive variants %q: %w", path, err)
	}
	out := make([]DriveFile, 0, len(vs))
	for _, v := range vs {
		base, err := os.ReadFile(filepath.Join(dir, v.Base))
		if err != nil {
			return nil, nil, fmt.Errorf("cannot derive drive variant %q: %w", v.Name, err)
		}
		var doc map[string]any
		if err := json.Unmarshal(base, &doc); err != nil {
			return nil, nil, fmt.Errorf("cannot derive drive variant %q from %q: %w", v.Name, v.Base, err)
		}
		for p, x := range v.Set {
			if err := setPath(doc, p, x); err != nil {
				return nil, nil, fmt.Errorf("cannot derive drive variant %q: %w", v.Name, err)
			}
		}
		derived, err := json.Marshal(doc)
		if err != nil {
			return nil, nil, fmt.Errorf("cannot derive drive variant %q: %w", v.Name, err)
		}
		rep, err := collector.ParseDriveReport(derived, strings.TrimSuffix(v.Base, ".json"))
		if err != nil {
			return nil, nil, fmt.Errorf("cannot decode drive variant %q: %w", v.Name, err)
		}
		d := DriveFile{Name: v.Name}
		var r drivehealth.Readings
		d.Model = addReport(&r, v.Name, rep, rep.Time)
		d.History = r.Histories()[v.Name]
		out = append(out, d)
	}
	return out, vs, nil
}

// setPath sets the existing numeric member at a dotted path of doc.
func setPath(doc map[string]any, path string, v float64) error {
	parts := strings.Split(path, ".")
	m := doc
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			return fmt.Errorf("cannot set %q: no object %q", path, p)
		}
		m = next
	}
	last := parts[len(parts)-1]
	if _, ok := m[last].(float64); !ok {
		return fmt.Errorf("cannot set %q: no number %q", path, last)
	}
	m[last] = v
	return nil
}

// skipReason words why a file was skipped, without the prefix every
// decoding error shares.
func skipReason(err error) string {
	msg := err.Error()
	if errors.Is(err, collector.ErrNotDriveReport) {
		if _, after, ok := strings.Cut(msg, collector.ErrNotDriveReport.Error()+": "); ok {
			return "not a drive report: " + after
		}
	}
	return msg
}
