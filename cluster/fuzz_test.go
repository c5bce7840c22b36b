package cluster

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/ballast-io/ballast/cluster/node"
)

// yamlBlock is a fenced YAML example in the docs.
var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// FuzzConfig decodes and validates fuzzed mds and agent config files, as
// `ballast mds|ds|client --config` and `ballast config check` do: nothing
// panics, and an error names what was wrong. Seeded with the shipped
// configs (deploy/) and every YAML example in docs/.
func FuzzConfig(f *testing.F) {
	for _, glob := range []string{"../deploy/*/*.yml", "../docs/*.md"} {
		files, _ := filepath.Glob(glob)
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			if filepath.Ext(p) != ".md" {
				f.Add(b)
				continue
			}
			for _, m := range yamlBlock.FindAllSubmatch(b, -1) {
				f.Add(m[1])
			}
		}
	}
	f.Add([]byte("role: mds\nstorage: {retention: 1h}\nauth: {anonymous: [admin]}\n---\nrole: ds\n"))
	// one file per fuzzing process, overwritten by each input (a
	// directory per input costs more than the decoding it feeds)
	p := filepath.Join(f.TempDir(), "ballast.yml")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadMDSConfig(p); err != nil && err.Error() == "" {
			t.Fatalf("mds config error without a message")
		}
		for _, role := range []string{RoleDS, RoleClient} {
			if _, err := node.LoadAgentConfig(p, role); err != nil && err.Error() == "" {
				t.Fatalf("%s config error without a message", role)
			}
		}
		FileRole(p)
	})
}
