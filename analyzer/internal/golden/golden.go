// Package golden compares analyzer scenario output with golden JSON files in
// a package's testdata. Run the tests with -update to rewrite the files, then
// review the diff. Only test binaries import it, so its flag never reaches the
// ballast binary.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files with the current output")

// Check marshals got as indented JSON and compares it with testdata/name.
func Check(t testing.TB, name string, got any) {
	t.Helper()
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatalf("cannot marshal output for golden %q: %v", name, err)
	}
	b = append(b, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("cannot create golden directory %q: %v", filepath.Dir(path), err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatalf("cannot write golden file %q: %v", path, err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("cannot read golden file %q (run with -update to create it): %v", path, err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("output differs from golden file %q (run with -update and review the diff)\ngot:\n%s", path, b)
	}
}
