package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ballast-io/ballast/cluster"
	"github.com/ballast-io/ballast/internal/testpeer"
)

// leaderStatus asks an mds whether it leads.
func (p *mdsProc) leaderStatus(t *testing.T) (cluster.LeaderStatus, error) {
	t.Helper()
	c := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := c.Get(p.url(cluster.PathLeaderStatus))
	if err != nil {
		return cluster.LeaderStatus{}, err
	}
	defer resp.Body.Close()
	var body struct{ Data cluster.LeaderStatus }
	err = json.NewDecoder(resp.Body).Decode(&body)
	return body.Data, err
}

// TestMDSPairFailover runs two `ballast mds` with an ha section against a
// real etcd: exactly one leads; SIGSTOP of the leader past the lease makes
// the other lead with a higher epoch, and after SIGCONT the old one reports
// that it does not lead; SIGKILL of the new leader hands leadership back
// within the lease TTL.
func TestMDSPairFailover(t *testing.T) {
	etcd := testpeer.StartEtcd(t)
	cfg := filepath.Join(t.TempDir(), "mds.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("role: mds\nha:\n  etcd_endpoints: [%s]\n  lease_ttl: 2s\n", etcd.ClientURL)), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startMDS(t, t.TempDir(), "--config", cfg)
	b := startMDS(t, t.TempDir(), "--config", cfg)
	leader := func(within time.Duration, ps ...*mdsProc) (*mdsProc, uint64) {
		t.Helper()
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			var got *mdsProc
			var epoch uint64
			n := 0
			for _, p := range ps {
				if st, err := p.leaderStatus(t); err == nil && st.Leading {
					got, epoch = p, st.Epoch
					n++
				}
			}
			if n > 1 {
				t.Fatalf("%d processes lead at once", n)
			}
			if n == 1 {
				return got, epoch
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no leader within %s", within)
		return nil, 0
	}
	first, e1 := leader(10*time.Second, a, b)
	other := b
	if first == b {
		other = a
	}
	first.cmd.Process.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	second, e2 := leader(10*time.Second, other)
	took := time.Since(stopped)
	if e2 <= e1 {
		t.Fatalf("new epoch %d is not above %d", e2, e1)
	}
	first.cmd.Process.Signal(syscall.SIGCONT)
	time.Sleep(100 * time.Millisecond)
	if st, err := first.leaderStatus(t); err != nil || st.Leading {
		t.Fatalf("the resumed old leader reports %+v, %v; want not leading", st, err)
	}
	second.cmd.Process.Kill()
	killed := time.Now()
	_, e3 := leader(10*time.Second, first)
	if e3 <= e2 {
		t.Fatalf("epoch after the kill %d is not above %d", e3, e2)
	}
	t.Logf("SIGSTOP: the other led after %s; SIGKILL: after %s (lease TTL 2s); epochs %d, %d, %d",
		took.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), e1, e2, e3)
}
