package twin

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseScenario: whatever a scenario file holds (`ballast demo
// --scenario FILE`), parsing and validation do not panic. Seeded with
// every shipped scenario and the benchmark fleets.
func FuzzParseScenario(f *testing.F) {
	for _, glob := range []string{"scenarios/*.yaml", "../../bench/scenarios/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseScenario(bytes.NewReader(b), "fuzz")
	})
}
