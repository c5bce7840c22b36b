//go:build long

package alerts_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOutageTenMinutes is the outage acceptance test on the real clock
// (make test-long, about 15 minutes): a webhook receiver answers 503 for
// the first 10 minutes while six drives fail and recover, and the mds is
// restarted (SIGTERM, same data dir) at 5 minutes. Each alert is its own
// group (group_by: ['...']) with a 24 h repeat, so the group rules call
// for exactly one firing and one resolved notification per drive: twelve,
// which must all arrive, once each, in the order they were decided.
func TestOutageTenMinutes(t *testing.T) {
	dir := t.TempDir()
	ballast := filepath.Join(dir, "ballast")
	if out, err := exec.Command("go", "build", "-o", ballast, "../../cmd/ballast").CombinedOutput(); err != nil {
		t.Fatalf("cannot build ballast: %v\n%s", err, out)
	}
	type got struct {
		id, drive, status string
		at                time.Duration
	}
	var mu sync.Mutex
	var received []got
	down := true
	begin := time.Now()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		var m webhookMsg
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, a := range m.Alerts {
			received = append(received, got{r.Header.Get("X-Ballast-Notification-Id"), a.Labels["drive"], a.Status, time.Since(begin)})
		}
	}))
	defer hook.Close()

	mdsAddr := freePort(t)
	cfg := filepath.Join(dir, "mds.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`role: mds
listen: %s
data_dir: %s
pipeline: {tick: 1s}
alerting:
  retry: {initial_backoff: 1s, max_backoff: 20s}
  receivers:
    - {name: chat, type: webhook, url: "%s/hook", kinds: [drive_failure_risk], group_by: ['...'],
       group_wait: 1s, group_interval: 1s, repeat_interval: 24h}
`, mdsAddr, filepath.Join(dir, "data"), hook.URL)), 0o644)

	// Drive i reports an NVMe critical warning from fail[i] to heal[i]
	// (minutes after the start); no change falls near the restart at 5.
	fail := []float64{0.5, 1, 2, 7, 7, 11}
	heal := []float64{3, 8, 12, 9, 13, 12.5}
	stop := make(chan struct{})
	pushed := make(chan struct{})
	go func() {
		defer close(pushed)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			m := time.Since(begin).Minutes()
			var b strings.Builder
			for i := range fail {
				v := 0
				if m >= fail[i] && m < heal[i] {
					v = 1
				}
				fmt.Fprintf(&b, "ballast_nvme_critical_warning{node=\"ds01\",device=\"nvme%d\",bit=\"reliability\"} %d\n", i, v)
			}
			if resp, err := http.Post("http://"+mdsAddr+"/api/v1/import/prometheus", "text/plain", strings.NewReader(b.String())); err == nil {
				resp.Body.Close()
			}
		}
	}()
	defer func() { close(stop); <-pushed }()

	mds := start(t, "mds", ballast, "mds", "--config", cfg)
	time.Sleep(5*time.Minute - time.Since(begin))
	mds.stop(t)
	mds = start(t, "mds (restarted)", ballast, "mds", "--config", cfg)
	time.Sleep(10*time.Minute - time.Since(begin))
	mu.Lock()
	down = false
	mu.Unlock()

	want := 2 * len(fail)
	waitFor(t, fmt.Sprintf("%d notifications", want), 6*time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(received) >= want
	})
	time.Sleep(30 * time.Second) // room for a duplicate to show up
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]int{}
	ids := map[string]bool{}
	last := 0
	for _, g := range received {
		seen[g.drive+" "+g.status]++
		if ids[g.id] {
			t.Errorf("notification %s arrived twice", g.id)
		}
		ids[g.id] = true
		seq, _ := strconv.Atoi(strings.TrimPrefix(g.id, "chat/"))
		if seq <= last {
			t.Errorf("notification %s arrived after chat/%d: out of order", g.id, last)
		}
		last = seq
	}
	for i := range fail {
		for _, st := range []string{"firing", "resolved"} {
			if n := seen[fmt.Sprintf("nvme%d %s", i, st)]; n != 1 {
				t.Errorf("drive nvme%d %s: got %d notifications; want exactly 1", i, st, n)
			}
		}
	}
	if len(received) != want {
		t.Errorf("got %d notifications; want %d: %+v", len(received), want, received)
	}
	t.Logf("received %d notifications, the last %s after the start; the mds log:\n%s", len(received), received[len(received)-1].at.Round(time.Second), mds.log())
}
