package drivehealth

import (
	"bytes"
	"flag"
	"os"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "retrain and rewrite model/drive-model.json (and other golden files)")

const backblazeCSV = "testdata/backblaze-2013/drives.csv"

var (
	drivesOnce sync.Once
	drivesData []Drive
	drivesErr  error
)

// loadDrives parses the Backblaze testdata once per test binary.
func loadDrives(t testing.TB) []Drive {
	t.Helper()
	drivesOnce.Do(func() {
		f, err := os.Open(backblazeCSV)
		if err != nil {
			drivesErr = err
			return
		}
		defer f.Close()
		drivesData, drivesErr = ParseBackblaze(f)
	})
	if drivesErr != nil {
		t.Fatal(drivesErr)
	}
	return drivesData
}

// TestModelReproducible retrains from the CSV and requires the shipped model
// file byte for byte; -update rewrites it.
func TestModelReproducible(t *testing.T) {
	m, err := TrainModel(loadDrives(t), DefaultTrainOptions())
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("model/drive-model.json", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := EmbeddedModelJSON()
	if !*update && !bytes.Equal(got, want) {
		t.Fatalf("retrained model differs from model/drive-model.json (%d vs %d bytes); run go test -run TestModelReproducible -update and review the diff", len(got), len(want))
	}
	if _, err := ParseModel(bytes.NewReader(got)); err != nil {
		t.Fatalf("retrained model does not parse: %v", err)
	}
	// Training twice in one process gives the same bytes too.
	m2, err := TrainModel(loadDrives(t), DefaultTrainOptions())
	if err != nil {
		t.Fatal(err)
	}
	again, _ := m2.Marshal()
	if !bytes.Equal(got, again) {
		t.Fatal("two trainings on the same data differ")
	}
}
