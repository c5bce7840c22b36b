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
// In the second case vmstorage0 is stopped while vminsert restarts, so that
// vminsert keeps the blocks ballast resends from its queue on vmstorage1
// alone, as it may after any restart (docs/storage.md): the kill must then
// spare vmstorage1.
func TestRemoteOutage(t *testing.T) {
	t.Run("vminsert-restart", func(t *testing.T) { testOutage(t, false) })
	t.Run("vminsert-restart-vmstorage0-down", func(t *testing.T) { testOutage(t, true) })
}

func testOutage(t *testing.T, node0Down bool) {
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
	var stopOnce sync.Once
	stopWriting := func() { stopOnce.Do(func() { close(stop) }); <-done }
	t.Cleanup(stopWriting) // before the store closes: a failed test stops writing too
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
	if node0Down {
		// vminsert marks a vmstorage it cannot dial as unavailable and
		// keeps what it takes meanwhile on the other alone.
		c.Storage[0].Stop(10 * time.Second)
		if err := c.Insert.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			_, n, _ := s.QueueStats()
			one := incompletelyReplicated(c.WriteURL())
			if n == 0 && one > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("vmstorage0 down, 30 s after vminsert restarted: %d samples still queued, vminsert kept %d rows with one copy; want none queued and some with one copy", n, one)
			}
		}
		c.RestartStorage(t, 0)
	} else {
		c.RestartInsert(t)
	}
	// vminsert acknowledges a block once it has buffered it. Just after
	// its start it can send a buffer before it has dialled both vmstorage,
	// keeping one copy and logging "cannot make a copy #2"
	// (docs/storage.md): the first blocks ballast resends from its queue
	// arrive then. A SIGKILL of the node holding that copy before it
	// flushed loses it, which neither ballast nor the cluster promises
	// against. The kill therefore goes to a node whose partner alone
	// returns every sample acknowledged so far, compared timestamp by
	// timestamp (a count is met by samples acknowledged later while older
	// ones are missing); if neither does within 30 s, acknowledged samples
	// are gone before any kill and the test fails here.
	time.Sleep(time.Second)
	mu.Lock()
	ackedSoFar := make(map[string][]int64, len(acked))
	for k, ts := range acked {
		ackedSoFar[k] = append([]int64(nil), ts...)
	}
	mu.Unlock()
	roots := []string{c.SelectOnly(t, 0, "0"), ""}
	victim := -1
	var lacks [2]string
	for deadline := time.Now().Add(30 * time.Second); victim < 0; time.Sleep(100 * time.Millisecond) {
		for i := range roots {
			if roots[i] == "" {
				roots[i] = c.SelectOnly(t, i, "0")
			}
			if lacks[i] = lacking(ackedSoFar, heldOn(t, roots[i], c.FlushURLs()[i])); lacks[i] == "" {
				victim = 1 - i
				break
			}
		}
		if victim == 0 {
			// vmstorage0 may only lag (vminsert sends each node's buffer
			// every ~200 ms): if it holds everything a second later, the
			// usual victim stays.
			time.Sleep(time.Second)
			if lacks[0] = lacking(ackedSoFar, heldOn(t, roots[0], c.FlushURLs()[0])); lacks[0] == "" {
				victim = 1
			}
		}
		if victim < 0 && time.Now().After(deadline) {
			t.Fatalf("30 s after vminsert restarted no vmstorage alone holds every acknowledged sample: vmstorage0 lacks %s; vmstorage1 lacks %s", lacks[0], lacks[1])
		}
	}
	if victim == 0 {
		t.Logf("vmstorage0 lacks %s, all on vmstorage1: killing vmstorage0", lacks[0])
	} else if node0Down {
		t.Errorf("vmstorage0 holds every acknowledged sample although it was down while vminsert kept %d rows with one copy; want it to lack them", incompletelyReplicated(c.WriteURL()))
	}
	c.Storage[victim].Kill()
	time.Sleep(2 * time.Second)
	c.RestartStorage(t, victim)
	time.Sleep(time.Second)
	stopWriting()
	// Flush gives up after 2 × Timeout; on a starved machine the cluster
	// can take longer to accept the queue. Samples still queued are not
	// lost, so wait for the queue here (a queue that never drains fails
	// here, a lost sample below), then Flush once more to make the last
	// blocks searchable.
	for deadline := time.Now().Add(time.Minute); ; {
		s.Flush()
		_, n, _ := s.QueueStats()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d acknowledged samples are still queued a minute after the writes stopped", n)
		}
	}
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

// incompletelyReplicated is vminsert's count of rows it kept with fewer
// copies than -replicationFactor (0 when it does not answer).
func incompletelyReplicated(root string) int {
	resp, err := http.Get(root + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, `vm_rpc_rows_incompletely_replicated_total{name="vminsert"} `); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// heldOn returns, per series, the timestamps of the outage test's samples
// that a Prometheus API root returns, after asking its storage node to make
// recent writes searchable. An unanswered request holds nothing.
func heldOn(t *testing.T, root, flushURL string) map[string]map[int64]bool {
	t.Helper()
	if resp, err := http.Get(flushURL); err == nil {
		resp.Body.Close()
	}
	held := map[string]map[int64]bool{}
	resp, err := http.Get(root + "/api/v1/export?match[]=outage_test_value")
	if err != nil {
		return held
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var l struct {
			Metric     map[string]string `json:"metric"`
			Timestamps []int64           `json:"timestamps"`
		}
		if dec.Decode(&l) != nil {
			return held
		}
		m := held[l.Metric["series"]]
		if m == nil {
			m = map[int64]bool{}
			held[l.Metric["series"]] = m
		}
		for _, ts := range l.Timestamps {
			m[ts] = true
		}
	}
}

// lacking describes the acknowledged samples held lacks ("" for none): how
// many, in how many series, and the first few as series@timestamp.
func lacking(acked map[string][]int64, held map[string]map[int64]bool) string {
	n, inSeries := 0, 0
	var first []string
	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		before := n
		for _, ts := range acked[k] {
			if !held[k][ts] {
				if n++; len(first) < 3 {
					first = append(first, fmt.Sprintf("%s@%d", k, ts))
				}
			}
		}
		if n > before {
			inSeries++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d acknowledged samples in %d series (%s …)", n, inSeries, strings.Join(first, ", "))
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
