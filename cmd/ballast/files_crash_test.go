package main

import (
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ballast-io/ballast/cluster"
	"github.com/ballast-io/ballast/models"
)

// TestFilesDriverCrashSafety is issue 11's acceptance 1: a real ballast
// mds with the files driver moves real files (random content) between two
// or more real directories standing for DS exports, planned from
// LAYOUTSTATS like on a cluster, and is killed with SIGKILL at every step
// boundary (the test-only BALLAST_TEST_STEPS hook stops it right after a
// phase is journaled) and at random points inside copies, crashKills
// times in all (make test: 10; -tags long: 50). After the last restart
// has finished every move: every file's bytes equal the original
// (sha256), no file is lost or left twice, every move succeeded or was
// aborted, and the layout hook applied every commit exactly once
// (TestExecDriverCrashSafety: the same for the exec driver).
func TestFilesDriverCrashSafety(t *testing.T) {
	runCrashRig(t, crashCase{
		kills:  crashKills,
		phases: moveKillPoints,
		rig:    func(t *testing.T) *filesRig { return newFilesRig(t, "") },
	})
}

// moveKillPoints are where the stripe-move crash tests kill the mds, in
// turn: after each phase is journaled, and inside a copy.
var moveKillPoints = []string{"copying", "in-copy", "copied", "verified", "committed", "cleaned", "in-copy"}

// crashCase is one kill -9 rig: how many kills, at which points in turn
// (a phase the step hook stops after, or "in-copy"), the cluster of each
// round, and whether the kills count only when they land in a restripe
// (restripe_file) and each round must commit one.
type crashCase struct {
	kills     int
	phases    []string
	rig       func(t *testing.T) *filesRig
	restripes bool
}

// runCrashRig kills a real mds c.kills times at c.phases in turn, round
// after round (a fresh cluster once every action of one has ended), and
// after each round's last, hook-free restart has finished every action
// checks the files (filesRig.check) and that every move and restripe
// succeeded and was cleaned, or was aborted, as many as the layouts
// committed. It is skipped with -short.
func runCrashRig(t *testing.T, c crashCase) {
	t.Helper()
	if testing.Short() {
		t.Skip("kills and restarts a real mds many times")
	}
	kills, round := 0, 0
	stats := map[string]int{}
	var total struct{ files, commits, succeeded, aborted, hookCalls, restripes, restripeAborts, other int }
	for kills < c.kills {
		round++
		r := c.rig(t)
		data := filepath.Join(r.dir, "data")
		var mu sync.Mutex
		addr := ""
		stop := make(chan struct{})
		go r.poster(func() []string {
			mu.Lock()
			defer mu.Unlock()
			if addr == "" {
				return nil
			}
			return []string{addr}
		}, stop)
		setAddr := func(a string) { mu.Lock(); addr = a; mu.Unlock() }
		for kills < c.kills {
			kind := c.phases[kills%len(c.phases)]
			env := cluster.EnvTestSteps + "=log"
			if kind != "in-copy" {
				env = cluster.EnvTestSteps + "=stop:" + kind
			}
			p := startMDSEnv(t, []string{env}, data, "--config", r.cfg)
			setAddr(p.addr)
			line, exhausted := waitTrigger(t, p, kind, c.restripes)
			p.cmd.Process.Kill()
			<-p.done
			setAddr("")
			if exhausted {
				break // every action of this cluster has ended: a new round
			}
			if c.restripes && !strings.Contains(line, ":r:") {
				total.other++ // a stripe move stopped at the boundary: not counted
				continue
			}
			kills++
			stats[kind]++
		}
		// the last start runs without the hook until every action ended
		p := startMDS(t, data, "--config", r.cfg)
		setAddr(p.addr)
		ms := waitQuiet(t, p, 90*time.Second)
		close(stop)
		if err := p.stop(t, 15); err != nil {
			t.Logf("mds exit: %v", err)
		}
		commits := r.check(t)
		succ, ab, rsucc, rab := 0, 0, 0, 0
		for _, m := range ms {
			rs := m.Kind == models.ActionRestripeFile
			switch {
			case m.State == models.ActionSucceeded && m.Move.Phase == models.PhaseCleaned:
				succ++
				if rs {
					rsucc++
				}
			case m.Move.Phase == models.PhaseAborted:
				ab++
				if rs {
					rab++
				}
			default:
				t.Errorf("%s %s ended %s in phase %s (%s); want succeeded and cleaned, or aborted", m.Kind, m.ID, m.State, m.Move.Phase, m.Reason)
			}
		}
		if succ != commits {
			t.Errorf("round %d: %d moves and restripes succeeded, but the layouts show %d commits", round, succ, commits)
		}
		if commits == 0 {
			t.Fatalf("round %d: nothing was committed; the test proves nothing\n%s", round, p.logs)
		}
		if c.restripes && rsucc == 0 {
			t.Fatalf("round %d: no restripe was committed; the test proves nothing\n%s", round, p.logs)
		}
		total.files += len(r.sums)
		total.commits += commits
		total.succeeded += succ
		total.aborted += ab
		total.restripes += rsucc
		total.restripeAborts += rab
		total.hookCalls += r.calls()
		if t.Failed() {
			t.Fatalf("round %d failed; last mds log:\n%s", round, p.logs)
		}
	}
	t.Logf("%d kills (-9) in %d rounds, by point: %v (%d more landed on stripe moves); %d files checked by sha256 after the last restart of each round; %d commits (each applied once by the MDS, %d hook or script calls), %d moves and restripes succeeded (%d restripes), %d aborted (%d restripes)",
		kills, round, stats, total.other, total.files, total.commits, total.hookCalls, total.succeeded, total.restripes, total.aborted, total.restripeAborts)
}

// waitTrigger waits until p reaches the kill point kind: "in-copy" is a
// random moment within 1.8 s of a copy's start (a copy takes about 2 s;
// with restripes, a restripe's copy), any other kind the hook's stop
// after that phase was journaled; line is the hook's log line.
// exhausted is true when every action has ended and no new one comes.
func waitTrigger(t *testing.T, p *mdsProc, kind string, restripes bool) (line string, exhausted bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	quiet := 0
	for {
		select {
		case line := <-p.lines:
			switch {
			case kind == "in-copy" && strings.Contains(line, `msg="test step"`) && strings.Contains(line, "phase=copying") &&
				(!restripes || strings.Contains(line, ":r:")):
				time.Sleep(time.Duration(mrand.Int64N(int64(1800 * time.Millisecond))))
				return line, false
			case kind != "in-copy" && strings.Contains(line, `msg="test step stopped"`):
				return line, false
			}
		case err := <-p.done:
			t.Fatalf("mds exited on its own: %v\n%s", err, p.logs)
		case <-poll.C:
			ms, err := allActions(p.addr)
			if err != nil || len(ms) == 0 {
				quiet = 0
				break
			}
			open := 0
			for _, m := range ms {
				if busy(m) {
					open++
				}
			}
			if open == 0 {
				quiet++
			} else {
				quiet = 0
			}
			if quiet >= 15 {
				return "", true
			}
		}
		if time.Now().After(deadline) {
			all, _ := allActions(p.addr)
			var open []string
			for _, a := range all {
				if busy(a) {
					ph := ""
					if a.Move != nil {
						ph = string(a.Move.Phase)
					}
					open = append(open, fmt.Sprintf("%s %s %s blocked=%q err=%q reason=%q", a.ID, a.State, ph, a.Blocked, a.Error, a.Reason))
				}
			}
			p.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, to see what waits
			<-p.done
			t.Fatalf("no %s point within 60s; open actions:\n%s\n%s", kind, strings.Join(open, "\n"), p.logs)
		}
	}
}

// waitQuiet waits until the mds has moves or restripes and every action
// has ended and stayed so for 5 s, and returns its moves and restripes.
func waitQuiet(t *testing.T, p *mdsProc, within time.Duration) []models.Action {
	t.Helper()
	deadline := time.Now().Add(within)
	quiet := 0
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		all, err := allActions(p.addr)
		if err != nil {
			continue
		}
		ms, open := movesOf(all), 0
		for _, a := range all {
			if busy(a) {
				open++
			}
		}
		if len(ms) > 0 && open == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if quiet >= 5 {
			return ms
		}
	}
	all, _ := allActions(p.addr)
	t.Fatalf("actions still open after %s: %s\n%s", within, movesSummary(movesOf(all)), p.logs)
	return nil
}

// movesOf keeps the stripe moves and restripes of as.
func movesOf(as []models.Action) []models.Action {
	var out []models.Action
	for _, a := range as {
		if a.Move != nil && (a.Kind == models.ActionMoveStripe || a.Kind == models.ActionRestripeFile) {
			out = append(out, a)
		}
	}
	return out
}

// busy says whether a is still under way: not ended, and not a plan
// whose moves have all ended and that only waits for its effect (its
// after-window starts the LAYOUTSTATS hold, 3m45s, past its last commit).
func busy(a models.Action) bool {
	return !a.State.Terminal() && a.State != models.ActionVerifying
}

func allActions(addr string) ([]models.Action, error) { return actionsAt(addr, "") }
