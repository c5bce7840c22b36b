package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestAgentBuildLinksNoStore fails when a change makes the agent binary
// import the mds side: VictoriaMetrics' storage and query engine
// (lib/storage, app/vmselect, app/vmstorage, lib/promscrape, … — every
// package of the VictoriaMetrics server module) or the ballast packages
// that wrap it or run only on the mds. github.com/VictoriaMetrics/metrics,
// the small metrics library, is allowed.
func TestAgentBuildLinksNoStore(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	forbidden := []string{
		"github.com/VictoriaMetrics/VictoriaMetrics/",
		"github.com/ballast-io/ballast/storage",
		"github.com/ballast-io/ballast/analyzer",
		"github.com/ballast-io/ballast/actuator",
		"github.com/ballast-io/ballast/sim",
		"github.com/ballast-io/ballast/collector/layoutstats",
		"go.etcd.io/",
	}
	var bad []string
	for _, d := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(d, f) {
				bad = append(bad, d)
			}
		}
		if d == "github.com/ballast-io/ballast/cluster" {
			bad = append(bad, d)
		}
	}
	if len(bad) > 0 {
		t.Errorf("ballast-agent imports %d packages of the mds side; got %s; want none (docs/decisions.md: the agent binary links no store)", len(bad), strings.Join(bad, ", "))
	}
	// The check must see the agent itself, or it proves nothing.
	if !strings.Contains(string(out), "github.com/ballast-io/ballast/cluster/agent\n") || !strings.Contains(string(out), "github.com/ballast-io/ballast/collector\n") {
		t.Errorf("go list -deps lacks cluster/agent or collector; got %d packages", len(deps))
	}
}

func TestRunExitCodes(t *testing.T) {
	for _, c := range []struct {
		args     []string
		code     int
		contains string
	}{
		{nil, 0, "Usage: ballast-agent COMMAND"},
		{[]string{"version"}, 0, "ballast-agent dev"},
		{[]string{"ds", "--help"}, 0, "Usage: ballast-agent ds [flags]"},
		{[]string{"client", "--help"}, 0, "-collector.dcgm"},
		{[]string{"mds"}, 2, `unknown command "mds"`},
		{[]string{"ds", "--no-such-flag"}, 2, "flag provided but not defined: -no-such-flag"},
		{[]string{"ds", "--proc-root", "/nonexistent-ballast-test"}, 1, `roots.proc: "/nonexistent-ballast-test" is not a directory`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.contains) {
			t.Errorf("ballast-agent %q: got exit %d, output %q; want exit %d and %q", c.args, code, stdout.String()+stderr.String(), c.code, c.contains)
		}
	}
}
