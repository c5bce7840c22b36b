package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &cmdEnv{stdout: &out, stderr: &errb})
	return code, out.String(), errb.String()
}

func TestEveryCommandHasHelp(t *testing.T) {
	code, out, _ := runCLI("--help")
	if code != 0 || !strings.Contains(out, "Commands:") {
		t.Fatalf("ballast --help: got %d %q", code, out)
	}
	for name := range commands {
		args := append(strings.Fields(name), "--help")
		code, out, errs := runCLI(args...)
		if code != 0 {
			t.Errorf("ballast %s --help: exit %d, stderr %q; want 0", name, code, errs)
		}
		if !strings.Contains(out, "Usage: ballast "+name) {
			t.Errorf("ballast %s --help: got %q; want a Usage line", name, out)
		}
	}
	code, out, _ = runCLI("mds", "--help")
	for _, want := range []string{"-listen", `(default "127.0.0.1:9750")`, "-data-dir", "-config"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("ballast mds --help lacks %q", want)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{"frobnicate"}, {"mds", "--no-such-flag"}, {"config", "check"}, {"mds", "--retention", "1h"}} {
		code, _, errs := runCLI(args...)
		want := 2
		if args[0] == "mds" && args[1] == "--retention" {
			want = 1 // a bad value, reported with the field name
			if !strings.Contains(errs, "storage.retention: 1h0m0s is below the minimum of 24h") {
				t.Errorf("ballast %v: stderr %q; want the field and value named", args, errs)
			}
		}
		if code != want {
			t.Errorf("ballast %v: exit %d (stderr %q); want %d", args, code, errs, want)
		}
	}
}

// TestCommandGroupsNameTheirSubcommands: "ballast actions" alone, with
// --help or with a wrong subcommand lists the group's subcommands.
func TestCommandGroupsNameTheirSubcommands(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"actions"}, 2, "needs a subcommand"},
		{[]string{"actions", "--help"}, 0, "Subcommands:"},
		{[]string{"actions", "frobnicate"}, 2, `unknown subcommand "frobnicate"`},
	} {
		code, out, errs := runCLI(c.args...)
		if code != c.code || !strings.Contains(out+errs, c.says) || !strings.Contains(out+errs, "actions approve") {
			t.Errorf("ballast %v: exit %d, %q %q; want exit %d saying %q and listing actions approve", c.args, code, out, errs, c.code, c.says)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yml")
	os.WriteFile(good, []byte("role: mds\nlisten: 127.0.0.1:9750\n"), 0o644)
	if code, out, errs := runCLI("config", "check", good); code != 0 || !strings.Contains(out, "valid mds config") {
		t.Errorf("good config: exit %d, %q %q", code, out, errs)
	}
	bad := filepath.Join(dir, "bad.yml")
	os.WriteFile(bad, []byte("role: ds\nlisten: 127.0.0.1:9751\nroots:\n  prc: /host/proc\n"), 0o644)
	code, _, errs := runCLI("config", "check", bad)
	if code != 1 || !strings.Contains(errs, "field prc not found") {
		t.Errorf("bad config: exit %d, stderr %q; want 1 naming field prc", code, errs)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI("version")
	if code != 0 || !strings.HasPrefix(out, "ballast ") {
		t.Errorf("version: got %d %q", code, out)
	}
}
