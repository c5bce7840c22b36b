package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/internal/testpeer"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage/remote"
)

// open opens a remote store for the test and closes it at the end.
func open(t *testing.T, o remote.Options) *remote.Store {
	t.Helper()
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	o.RetryMin, o.RetryMax = 50*time.Millisecond, 500*time.Millisecond
	o.Timeout = 5 * time.Second
	s, err := remote.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// TestRemoteEngines writes through the remote store into each real engine
// and reads back through the Querier and the proxied query API.
func TestRemoteEngines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) remote.Options
	}{
		{"vmcluster", func(t *testing.T) remote.Options {
			c := testpeer.StartVMCluster(t)
			return remote.Options{WriteURL: c.WriteURL(), QueryURL: c.QueryURL(), Tenant: "7:3", FlushURLs: c.FlushURLs()}
		}},
		{"victoria-metrics", func(t *testing.T) remote.Options {
			s := testpeer.StartVictoriaMetrics(t)
			return remote.Options{WriteURL: s.WriteURL(), QueryURL: s.QueryURL(), FlushURLs: []string{s.FlushURL}}
		}},
		{"prometheus", func(t *testing.T) remote.Options {
			s := testpeer.StartPrometheus(t)
			return remote.Options{WriteURL: s.WriteURL(), QueryURL: s.QueryURL()}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, tc.start(t))
			// On a whole minute: VictoriaMetrics 1.79 aligns range queries
			// to their step. At least 5 s in the past: that VictoriaMetrics
			// replaces points newer than now-latencyOffset with the point
			// before them, and it raises -search.latencyOffset=0s to 1 s, so
			// a test that ran in the first second of a minute saw 324 for
			// the last point (CI stop 21).
			now := time.Now().Add(-5 * time.Second).Truncate(time.Minute)
			var samples []models.Sample
			for i := range 3 {
				for j := range 10 {
					samples = append(samples, models.Sample{Name: "remote_test_bytes", Labels: []models.Label{{Name: "device", Value: fmt.Sprintf("nvme%dn1", i)}},
						Timestamp: now.Add(time.Duration(j-9) * 10 * time.Second).UnixMilli(), Value: float64(100*i + j)})
				}
			}
			if err := s.Append(context.Background(), samples); err != nil {
				t.Fatal(err)
			}
			bad := []models.Sample{{Name: "remote_test_bytes", Timestamp: now.UnixMilli(), Value: 1}, {Name: "bad name", Timestamp: now.UnixMilli()}}
			if err := s.Append(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "invalid metric name") {
				t.Fatalf("append of a bad batch: err %v; want invalid metric name", err)
			}
			s.Flush()
			if _, n, _ := s.QueueStats(); n != 0 {
				t.Fatalf("after Flush %d samples are still queued; want 0", n)
			}

			ctx := context.Background()
			rs, err := s.Query(ctx, `remote_test_bytes{device="nvme2n1"}`, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || rs[0].Values[0] != 209 || rs[0].Label("device") != "nvme2n1" || rs[0].Name != "remote_test_bytes" {
				t.Fatalf("instant query got %+v; want nvme2n1 = 209", rs)
			}
			rs, err = s.QueryRange(ctx, `sum(remote_test_bytes)`, now.Add(-90*time.Second), now, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || len(rs[0].Values) != 10 || rs[0].Values[0] != 300 || rs[0].Values[9] != 327 {
				t.Fatalf("range query got %+v; want 10 points from 300 to 327", rs)
			}
			if _, err := s.Query(ctx, `sum(`, now); err == nil {
				t.Fatal("a query that does not parse gave no error")
			}

			h := s.QueryHandler()
			code, body := get(h, "/api/v1/query?query="+url.QueryEscape(`count(remote_test_bytes)`)+fmt.Sprintf("&time=%d", now.Unix()))
			if code != 200 || !strings.Contains(body, `"3"`) {
				t.Fatalf("proxied query: HTTP %d %s; want 200 with count 3", code, body)
			}
			code, body = get(h, "/api/v1/query?query="+url.QueryEscape(`sum(`))
			if code != 400 || !strings.Contains(body, `"errorType":"bad_data"`) {
				t.Fatalf("proxied bad query: HTTP %d %s; want 400 bad_data", code, body)
			}
			code, body = get(h, "/api/v1/labels")
			if code != 200 || !strings.Contains(body, "device") {
				t.Fatalf("proxied labels: HTTP %d %s; want 200 listing device", code, body)
			}
		})
	}
}

func get(h http.Handler, path string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// TestRemoteOutage writes steadily into the VictoriaMetrics cluster while
// vminsert is stopped for a while and one vmstorage is killed with SIGKILL;
// afterwards every sample the store acknowledged is queryable exactly once.
func TestRemoteOutage(t *testing.T) {
	c := testpeer.StartVMCluster(t)
	set := metrics.NewSet()
	s := open(t, remote.Options{WriteURL: c.WriteURL(), QueryURL: c.QueryURL(), Tenant: "0", FlushURLs: c.FlushURLs(),
		BlockInterval: 100 * time.Millisecond, Metrics: set})

	const series = 50
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	acked := make(map[string][]int64) // series → timestamps acknowledged
	var mu sync.Mutex
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for step := 0; ; step++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ts := start.Add(time.Duration(step) * time.Second).UnixMilli()
			batch := make([]models.Sample, series)
			for i := range batch {
				batch[i] = models.Sample{Name: "outage_test_value", Labels: []models.Label{{Name: "series", Value: fmt.Sprint(i)}}, Timestamp: ts, Value: float64(step)}
			}
			if err := s.Append(context.Background(), batch); err != nil {
				t.Errorf("append at step %d: %v", step, err)
				continue
			}
			mu.Lock()
			for i := range batch {
				acked[fmt.Sprint(i)] = append(acked[fmt.Sprint(i)], ts)
			}
			mu.Unlock()
		}
	}()

	time.Sleep(time.Second)
	c.Insert.Stop(10 * time.Second)
	time.Sleep(2 * time.Second)
	if _, n, _ := s.QueueStats(); n == 0 {
		t.Errorf("with vminsert stopped nothing is queued; want the samples written meanwhile")
	}
	c.RestartInsert(t)
	// vminsert acknowledges a block as soon as one vmstorage took it,
	// keeping a single copy while it has not dialled the other (its own
	// start); such data is lost with that node if it dies before flushing
	// (docs/storage.md). The kill therefore waits until vmstorage0 alone
	// holds everything acknowledged so far: it tests ballast's queue and
	// the cluster's replication, not vminsert's start-up window.
	time.Sleep(time.Second)
	mu.Lock()
	ackedSoFar := 0
	for _, ts := range acked {
		ackedSoFar += len(ts)
	}
	mu.Unlock()
	node0 := c.SelectOnly(t, 0, "0")
	deadline := time.Now().Add(30 * time.Second)
	for held := 0; held < ackedSoFar; held = countOn(t, node0, c.FlushURLs()[0]) {
		if time.Now().After(deadline) {
			t.Fatalf("vmstorage0 holds %d of the %d samples acknowledged before the kill after 30 s", held, ackedSoFar)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.Storage[1].Kill()
	time.Sleep(2 * time.Second)
	c.RestartStorage(t, 1)
	time.Sleep(time.Second)
	close(stop)
	<-done
	s.Flush()

	if errs := set.GetOrCreateCounter(`ballast_remote_send_errors_total`).Get(); errs == 0 {
		t.Errorf("ballast_remote_send_errors_total = 0; want failed sends while vminsert was down")
	}
	for _, r := range []string{"queue_full", "rejected", "disk"} {
		if n := set.GetOrCreateCounter(`ballast_remote_samples_dropped_total{reason="` + r + `"}`).Get(); n != 0 {
			t.Errorf("dropped %d samples for %s; want 0", n, r)
		}
	}

	// Read everything back through the proxied export API: after the
	// cluster's de-duplication each acknowledged sample appears exactly once.
	u := "/api/v1/export?match[]=outage_test_value" + fmt.Sprintf("&start=%d&end=%d", start.Add(-time.Minute).Unix(), time.Now().Unix())
	code, body := get(s.QueryHandler(), u)
	if code != 200 {
		t.Fatalf("export: HTTP %d %s", code, body)
	}
	got := map[string][]int64{}
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		var l struct {
			Metric     map[string]string `json:"metric"`
			Timestamps []int64           `json:"timestamps"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("export line %q: %v", line, err)
		}
		got[l.Metric["series"]] = append(got[l.Metric["series"]], l.Timestamps...)
	}
	total := 0
	for k, want := range acked {
		g := got[k]
		sort.Slice(g, func(i, j int) bool { return g[i] < g[j] })
		total += len(want)
		if fmt.Sprint(g) != fmt.Sprint(want) {
			t.Errorf("series %s: %d samples stored; want the %d acknowledged, each once (first difference %s)", k, len(g), len(want), firstDiff(g, want))
		}
	}
	if len(got) != series || total < series*100 {
		t.Fatalf("got %d series and %d acknowledged samples; want %d series and a steady stream over ~8 s", len(got), total, series)
	}
	t.Logf("%d samples acknowledged during the outage run, all stored once; %d send errors retried", total, set.GetOrCreateCounter(`ballast_remote_send_errors_total`).Get())
}

// countOn counts the outage test's samples a Prometheus API root holds,
// after asking its storage node to make them searchable.
func countOn(t *testing.T, root, flushURL string) int {
	t.Helper()
	if resp, err := http.Get(flushURL); err == nil {
		resp.Body.Close()
	}
	resp, err := http.Get(root + "/api/v1/query?nocache=1&query=" + url.QueryEscape(`sum(count_over_time(outage_test_value[2h]))`))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&body) != nil || len(body.Data.Result) == 0 {
		return 0
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	n, _ := strconv.Atoi(s)
	return n
}

// firstDiff describes how got differs from want.
func firstDiff(got, want []int64) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at index %d: stored %d, acknowledged %d", i, got[i], want[i])
		}
	}
	if len(got) < len(want) {
		return fmt.Sprintf("missing from %d (the last %d)", want[len(got)], len(want)-len(got))
	}
	return fmt.Sprintf("extra from %d", got[len(want)])
}

// TestRemoteResumesAfterRestart queues while the remote is unreachable,
// closes the store, and delivers the queue after reopening it.
func TestRemoteResumesAfterRestart(t *testing.T) {
	vm := testpeer.StartVictoriaMetrics(t)
	dir := t.TempDir()
	down := fmt.Sprintf("http://127.0.0.1:%d", testpeer.FreePort(t))
	s, err := remote.Open(remote.Options{DataDir: dir, WriteURL: down + "/api/v1/write", QueryURL: down, RetryMin: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	for i := range 5 {
		if err := s.Append(context.Background(), []models.Sample{{Name: "resume_test", Timestamp: now.Add(time.Duration(i-5) * time.Second).UnixMilli(), Value: float64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = open(t, remote.Options{DataDir: dir, WriteURL: vm.WriteURL(), QueryURL: vm.QueryURL(), FlushURLs: []string{vm.FlushURL}})
	s.Flush()
	rs, err := s.Query(context.Background(), `count_over_time(resume_test[1m])`, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Values[0] != 5 {
		t.Fatalf("after the restart got %+v; want the 5 samples queued before it", rs)
	}
}
