package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ballast-io/ballast/actuator"
)

// TestExecDriverCrashSafety: the exec driver (issue 11) under
// runCrashRig. A real mds with actuators.driver: exec runs
// actuator/testdata/exec-mds.sh for every step over a toy MDS in files,
// its copies paced (a killed mds's copy command runs on, as an MDS's tool
// would), and dies by SIGKILL execCrashKills times (make test: 6; -tags
// long: 30) at moveKillPoints. Beyond the files driver's checks, the
// script must never have been asked again for a commit it had applied
// (filesRig.applied).
func TestExecDriverCrashSafety(t *testing.T) {
	runCrashRig(t, crashCase{kills: execCrashKills, phases: moveKillPoints,
		rig: func(t *testing.T) *filesRig { return newExecRig(t, 16, 2, false, "") }})
}

// TestExecDriverRestripeCrashSafety: TestFilesDriverRestripeCrashSafety's
// restripes (hotStriped) with the exec driver and actuators.exec.restripe
// on, through the toy MDS script's restripe_* steps: execRestripeKills
// kills (make test: 5; -tags long: 30) inside restripes at
// restripeKillPoints, each checked as TestExecDriverCrashSafety.
func TestExecDriverRestripeCrashSafety(t *testing.T) {
	runCrashRig(t, crashCase{kills: execRestripeKills, phases: restripeKillPoints, restripes: true,
		rig: func(t *testing.T) *filesRig { return hotStriped(t, newExecRig(t, 0, 2, true, "")) }})
}

// newExecRig is newFilesRigN's cluster for the exec driver: the same eight
// devices (one a DS, 4 MB/s) and files (hot on ds0, cold on each other),
// kept by the toy MDS script under dir/mds, the mds config's exec commands
// running it with copies paced (its pace file); with restripe, the
// restripe_* commands too. ha, when given, is the mds config's ha:
// section, and the config then has the script's takeover command (the
// exec driver's Successor, docs/ha.md).
func newExecRig(t *testing.T, hot, cold int, restripe bool, ha string) *filesRig {
	t.Helper()
	script, err := filepath.Abs("../../actuator/testdata/exec-mds.sh")
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, "mds")
	devs := r.makeDevices(t, func(int) string { return "capacity_bytes: 1000000000000" })
	meta := filepath.Join(r.toy, "meta")
	if err := os.MkdirAll(meta, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.toy, "pace"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r.placeFiles(t, hot, cold, "set%d-shard-%03d") // the script's meta has no subdirectories
	move := []string{"{{.File}}", "{{.Mirror}}", "{{.Component}}", "{{.From}}", "{{.To}}", "{{.Generation}}"}
	steps := [][]string{{"locate", "{{.File}}"}, {"stripes", "{{.Device}}"}, {"devices"}}
	for _, s := range []string{"copy", "verify", "commit", "cleanup", "abort"} {
		steps = append(steps, append([]string{s}, move...))
	}
	if restripe {
		for _, s := range actuator.ExecRestripeSteps {
			steps = append(steps, []string{s}) // their values in BALLAST_*
		}
	}
	if ha != "" {
		steps = append(steps, []string{"takeover"}) // the epoch in BALLAST_EPOCH
	}
	var cmds strings.Builder
	for _, c := range steps {
		argv := []string{strconv.Quote("bash"), strconv.Quote(script), strconv.Quote(r.toy)}
		for _, a := range c {
			argv = append(argv, strconv.Quote(a))
		}
		fmt.Fprintf(&cmds, "      %s: [%s]\n", c[0], strings.Join(argv, ", "))
	}
	r.writeConfig(t, 2, fmt.Sprintf(`  driver: exec
  exec:
    timeout: 30s
    restripe: %t
    devices:
%s    commands:
%s`, restripe, devs, cmds.String())+ha)
	return r
}

// writeToyLayout writes l as the toy MDS script keeps it in meta:
// FILE.gen, FILE.unit and FILE.mM, a line "DEVICE HANDLE BYTES PATH" a
// component (PATH the file's name unless given).
func writeToyLayout(meta string, l actuator.Layout) error {
	vs := map[string]string{"gen": strconv.FormatUint(l.Generation, 10), "unit": strconv.FormatInt(cmp.Or(l.StripeUnit, rigFileBytes), 10)}
	for m, comps := range l.Mirrors {
		var b strings.Builder
		for _, c := range comps {
			fmt.Fprintf(&b, "%s %s %d %s\n", c.Device, c.Handle, c.Bytes, cmp.Or(c.Path, l.File))
		}
		vs[fmt.Sprintf("m%d", m)] = b.String()
	}
	for ext, v := range vs {
		if err := os.WriteFile(filepath.Join(meta, l.File+"."+ext), []byte(strings.TrimSuffix(v, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readToyLayouts reads every layout the toy MDS script keeps (FILE.gen,
// FILE.unit, FILE.mM lines "DEVICE HANDLE BYTES PATH"; FILE.retired, the
// components a restripe retired until its cleanup).
func (r *filesRig) readToyLayouts() (map[string]rigLayout, error) {
	meta := filepath.Join(r.toy, "meta")
	gens, err := filepath.Glob(filepath.Join(meta, "*.gen"))
	if err != nil {
		return nil, err
	}
	out := map[string]rigLayout{}
	for _, p := range gens {
		var l rigLayout
		l.File = strings.TrimSuffix(filepath.Base(p), ".gen")
		base := filepath.Join(meta, l.File)
		if err := readUint(base+".gen", &l.Generation); err != nil {
			return nil, err
		}
		var unit uint64
		if err := readUint(base+".unit", &unit); err != nil {
			return nil, err
		}
		l.StripeUnit = int64(unit)
		for m := 0; ; m++ {
			b, err := os.ReadFile(fmt.Sprintf("%s.m%d", base, m))
			if os.IsNotExist(err) && m > 0 {
				break
			}
			if err != nil {
				return nil, err
			}
			var comps []actuator.Component
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var c actuator.Component
				if _, err := fmt.Sscan(line, &c.Device, &c.Handle, &c.Bytes, &c.Path); err != nil {
					return nil, fmt.Errorf("%s.m%d line %q: %w", base, m, line, err)
				}
				comps = append(comps, c)
			}
			l.Mirrors = append(l.Mirrors, comps)
		}
		for _, line := range fileLines(base + ".retired") {
			var c actuator.Component
			fmt.Sscan(line, &c.Device, &c.Path)
			l.Retired = append(l.Retired, c)
		}
		out[l.File] = l
	}
	return out, nil
}

func readUint(p string, v *uint64) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	*v, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return err
}

// toyInFlight is the moves the toy MDS holds in flight (copy begun, not
// cleaned up or aborted): the ids in its inflight/*.json records, each the
// copy step's JSON with in_flight, which its takeover command prints.
func toyInFlight(t *testing.T, r *filesRig) map[string]bool {
	t.Helper()
	recs, err := filepath.Glob(filepath.Join(r.toy, "inflight", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range recs {
		var s actuator.ExecStep
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue // cleaned up or aborted since the glob
		}
		if err != nil || json.Unmarshal(b, &s) != nil || s.InFlight == nil {
			t.Fatalf("in-flight record %s (%v): %q; want a copy step's JSON with in_flight", p, err, b)
		}
		out[s.InFlight.ID] = true
	}
	return out
}
