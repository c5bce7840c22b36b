package collector

import (
	"bytes"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestGolden renders what every fixture yields as exposition text and
// compares it with testdata/golden (go test -update rewrites them). A
// fixture that fails to parse records its error in the golden file, so a
// parser regression shows as a diff either way.
func TestGolden(t *testing.T) {
	// Fixtures that are not valid input; the golden file keeps the error.
	wantErr := map[string]string{
		// The evidence file was abbreviated by hand (labels replaced by
		// "...") after its first lines, so it is not exposition text.
		"gpu/dcgm-exporter/cncf-k8s-ai-conformance__v1.35__viettel-ai-platform__accelerator_metrics.prom": "invalid label name",
	}
	for _, c := range fixtureCases(t) {
		t.Run(c.Fixture, func(t *testing.T) {
			samples, err := c.Read(t)
			var buf bytes.Buffer
			if werr := WriteText(&buf, samples); werr != nil {
				t.Fatalf("cannot render samples of %s: %v", c.Fixture, werr)
			}
			if err != nil {
				buf.WriteString("# error: " + err.Error() + "\n")
			}
			switch want := wantErr[c.Fixture]; {
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Errorf("%s: got error %v; want one containing %q", c.Fixture, err, want)
			case want == "" && err != nil:
				t.Errorf("%s: %v", c.Fixture, err)
			case want == "" && len(samples) == 0 && c.Fixture != "procfs/mountstats/pcp_nonfsmounts.qa":
				// (that capture has no NFS mount, so nothing is right)
				t.Errorf("%s yields no samples", c.Fixture)
			}
			checkGolden(t, c.Golden, buf.Bytes())
		})
	}
}

// TestFixturesCovered fails when a file under testdata/fixtures is not
// read by any golden case.
func TestFixturesCovered(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range fixtureCases(t) {
		covered[c.Fixture] = true
	}
	err := filepath.WalkDir("testdata/fixtures", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(filepath.ToSlash(p), "testdata/fixtures/")
		if d.Name() == "README.md" || d.Name() == "OBSERVED_HEALTH.csv" {
			return nil
		}
		if !covered[rel] {
			t.Errorf("fixture %s is not covered by a golden case", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
