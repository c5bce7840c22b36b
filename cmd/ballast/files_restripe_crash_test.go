package main

import (
	"testing"
)

// TestFilesDriverRestripeCrashSafety is acceptance 1 of issue 11 for
// restripes (restripe_file): a real ballast mds with the files driver and
// actuators.files.restripe on, in auto mode, restripes two files whose
// components are each hotter than the target (random content, both
// striped over the same two of the eight real exports in 64 KiB units,
// each read at 200 MB/s) over more devices, and is killed with SIGKILL right after
// each restripe phase is journaled and at random points inside the
// restripe copy, restripeKills times in all (make test: 10; -tags long:
// 50; kills that land on a stripe move of the same plan are not
// counted). After each round's last restart has finished every action:
// every file's logical bytes, read through its committed layout, equal
// the original (sha256); no component is lost, no retired component or
// part file is left; every restripe succeeded and was cleaned, or was
// aborted; and the layout hook (its restripe verb) applied every commit
// exactly once.
func TestFilesDriverRestripeCrashSafety(t *testing.T) {
	runCrashRig(t, crashCase{kills: restripeKills, phases: restripeKillPoints, restripes: true,
		rig: func(t *testing.T) *filesRig { return hotStriped(t, newFilesRigN(t, 0, 2, 2, "    restripe: true\n")) }})
}

// restripeKillPoints are where the restripe crash tests kill the mds, in
// turn: after each restripe phase is journaled, and inside its copy.
var restripeKillPoints = []string{"copying", "in-copy", "copied", "verified", "committed", "cleaned"}

// hotStriped adds to r (with cold files on ds1 … ds7, 2 each, 10 MB/s
// each) two hot files over ds0+ds1 (200 MB/s each): each hot component
// carries 100 MB/s, above 1.05 × the mean device load (about 68 MB/s), so
// no move can help it and the planner restripes. (Two hot devices of
// eight: the hotspot detector's robust z-score needs the peers' median
// to stay cool.)
func hotStriped(t *testing.T, r *filesRig) *filesRig {
	t.Helper()
	r.addStriped(t, "hot-a", []int{0, 1}, 2<<20, 64<<10, 200_000_000)
	r.addStriped(t, "hot-b", []int{0, 1}, 2<<20+12345, 64<<10, 200_000_000)
	return r
}
