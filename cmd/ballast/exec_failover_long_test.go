//go:build long

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// execFailoverKills is how many times TestExecDriverFailover kills the
// leader (make test-long; the test is not in make test).
const execFailoverKills = 10

// TestExecDriverFailover is TestFilesDriverFailover for the exec driver
// (issue 11 "Drivers", docs/ha.md): etcd and two real `ballast mds` of an
// HA pair with actuators.driver: exec over the toy MDS script
// (actuator/testdata/exec-mds.sh, newExecRig) and its takeover command,
// moves planned from LAYOUTSTATS posted to both. The leader is killed
// with SIGKILL within 1.8 s of a copy's start execFailoverKills times
// (its copy command runs on, as an MDS's tool would). Each time the other
// must lead within twice the lease TTL, run takeover (the MDS's fence,
// ROOT/epoch, raised to its epoch within 10 s) and, where the MDS held
// the cut move in flight then, have it in its journal within 10 s more
// (adopted, or resumed from its own journal where it had started the move
// before). At each round's end every file's bytes equal the original
// (sha256) through its layout, nothing is lost or left twice or in flight
// at the MDS, every commit was applied once and none asked again once
// applied, and every cut move was cleaned up or aborted. At least one cut
// move must have been adopted through takeover.
//
// Build tag long: it runs only in make test-long (`go test -tags long
// -run TestExecDriverFailover ./cmd/ballast`), as cmd/ballast's tests
// already take most of make test's 20-minute timeout.
func TestExecDriverFailover(t *testing.T) {
	got := map[string]int{} // what became of each cut move at the takeover
	runFailover(t, failoverCase{
		kills: execFailoverKills,
		rig:   func(t *testing.T, ha string) *filesRig { return newExecRig(t, 16, 2, false, ha) },
		afterKill: func(p *pair, id string, leader int, epoch uint64) {
			got[execTookOver(p, id, leader, epoch)]++
		},
	})
	t.Logf("the moves the kills cut, at the new leader's takeover: %v", got)
	if got["adopted"] == 0 {
		t.Error("no cut move was adopted through the takeover command; the test proves nothing")
	}
}

// execTookOver waits until the new leader (p.procs[leader], at epoch) has
// raised the toy MDS's fence to its epoch (its takeover command ran), and
// then for the move id the kill cut in its journal, and says what became
// of the move: "adopted" (from takeover's list: the engine logged it so,
// or its reason says so), "resumed" (the leader knew it from its own journal), or "ended"
// (not in flight at the MDS when the fence was raised nor since: it had
// ended before the kill, or its copy command had not begun). A move in
// flight at the MDS that the new leader does not take fails the test.
func execTookOver(p *pair, id string, leader int, epoch uint64) string {
	t := p.t
	t.Helper()
	n := p.procs[leader]
	if !fenceRaised(filepath.Join(p.r.toy, "epoch"), epoch) {
		t.Fatalf("the new leader (epoch %d) did not raise the toy MDS's fence within 10s (its takeover command)\n%s", epoch, n.logs)
	}
	// what the MDS held in flight as takeover listed it (the new leader
	// plans nothing on a component its adopted move holds, but without
	// the adoption it may plan the same move anew, under the same record)
	listed := toyInFlight(t, p.r)
	adopted := fmt.Sprintf(`msg="adopted a move in flight" action=%s `, id)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		n.mu.Lock()
		logs := n.logs.String()
		n.mu.Unlock()
		if strings.Contains(logs, adopted) {
			return "adopted"
		}
		as, err := allActions(n.addr)
		if err != nil {
			continue
		}
		for _, a := range as {
			if a.ID == id && strings.HasPrefix(a.Reason, fmt.Sprintf("taken over at epoch %d ", epoch)) {
				return "adopted" // its log line not read yet
			}
			if a.ID == id {
				return "resumed"
			}
		}
	}
	if listed[id] || toyInFlight(t, p.r)[id] {
		t.Errorf("move %s, cut by the kill and in flight at the MDS when the new leader (epoch %d) took over, is not in its journal 10s later", id, epoch)
		return "lost"
	}
	return "ended"
}
