package cluster

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// TestAdmission fills each limit with requests held inside the handler and
// checks that the next one waits QueueTimeout, then gets 429 with
// Retry-After and a reason naming the limit, without reaching the handler;
// and that freed room admits a waiting request.
func TestAdmission(t *testing.T) {
	for _, c := range []struct {
		name      string
		opts      AdmissionOptions
		held      []int64 // Content-Length of the requests that fill it
		next      int64
		wantLimit string
	}{
		{"requests", AdmissionOptions{MaxRequests: 2, MaxBytes: 1 << 20, MaxWorkers: 10}, []int64{10, 10}, 10, "requests"},
		{"bytes", AdmissionOptions{MaxRequests: 10, MaxBytes: 1000, MaxWorkers: 10}, []int64{600}, 500, "bytes"},
		{"unknown length counts as the largest body", AdmissionOptions{MaxRequests: 10, MaxBytes: 1000, MaxBodyBytes: 700, MaxWorkers: 10}, []int64{-1}, 500, "bytes"},
		{"workers", AdmissionOptions{MaxRequests: 10, MaxBytes: 1 << 20, MaxWorkers: 2}, []int64{10, 10}, 10, "workers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			set := metrics.NewSet()
			c.opts.QueueTimeout, c.opts.Metrics, c.opts.RetryAfter = 50*time.Millisecond, set, 1500*time.Millisecond
			a := NewAdmission(c.opts)
			release := make(chan struct{})
			var entered sync.WaitGroup
			var reached sync.Map
			h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached.Store(r.Header.Get("X-Id"), true)
				if r.Header.Get("X-Hold") != "" {
					entered.Done()
					<-release
				}
				w.WriteHeader(http.StatusNoContent)
			}))
			req := func(id string, n int64, hold bool) *http.Request {
				r := httptest.NewRequest(http.MethodPost, "/api/v1/write", strings.NewReader("x"))
				r.ContentLength = n
				r.Header.Set("X-Id", id)
				if hold {
					r.Header.Set("X-Hold", "1")
				}
				return r
			}
			var done sync.WaitGroup
			for i, n := range c.held {
				entered.Add(1)
				done.Add(1)
				go func() {
					defer done.Done()
					h.ServeHTTP(httptest.NewRecorder(), req(string(rune('a'+i)), n, true))
				}()
			}
			entered.Wait()
			if a.Overloaded() {
				t.Errorf("Overloaded before any request was refused")
			}
			rec := httptest.NewRecorder()
			start := time.Now()
			h.ServeHTTP(rec, req("refused", c.next, false))
			if !a.Overloaded() {
				t.Errorf("Overloaded right after a request was refused: false; want true for %s", OverloadHold)
			}
			if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "2" {
				t.Fatalf("request past the %s limit: got %d Retry-After %q; want 429 Retry-After 2", c.wantLimit, rec.Code, rec.Header().Get("Retry-After"))
			}
			if waited := time.Since(start); waited < 50*time.Millisecond {
				t.Errorf("refused after %s; want it to wait the queue timeout (50ms) first", waited)
			}
			var ans map[string]string
			if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil || !strings.Contains(ans["error"], "nothing of this request was stored") {
				t.Errorf("429 body %q does not say nothing was stored", rec.Body.String())
			}
			if _, ok := reached.Load("refused"); ok {
				t.Errorf("the refused request reached the handler")
			}
			if got := set.GetOrCreateCounter(`ballast_ingest_throttled_requests_total{limit="` + c.wantLimit + `"}`).Get(); got != 1 {
				t.Errorf("throttled{limit=%s}: got %d; want 1", c.wantLimit, got)
			}
			// A request that arrives while the limit is full is admitted
			// as soon as room is freed.
			waiting := httptest.NewRecorder()
			a.opts.QueueTimeout = 10 * time.Second
			done.Add(1)
			go func() { defer done.Done(); h.ServeHTTP(waiting, req("waiter", c.next, false)) }()
			time.Sleep(20 * time.Millisecond)
			close(release)
			done.Wait()
			if waiting.Code != http.StatusNoContent {
				t.Errorf("request waiting for room: got %d; want 204 once room was freed", waiting.Code)
			}
			if a.reqs != 0 || a.bytes != 0 || len(a.workers) != 0 {
				t.Errorf("after every request ended: %d requests, %d bytes and %d workers in flight; want 0", a.reqs, a.bytes, len(a.workers))
			}
		})
	}
}

// TestAdmissionWorkerWaitsNotForTheNetwork holds the one worker slot's
// request in its body read (a sender that has not sent its body yet) and
// checks that another request gets the slot and is served meanwhile; then
// that the slow request, once its body arrives, takes the slot back and is
// served too, and every slot is given back.
func TestAdmissionWorkerWaitsNotForTheNetwork(t *testing.T) {
	a := NewAdmission(AdmissionOptions{MaxRequests: 10, MaxBytes: 1 << 20, MaxBodyBytes: 1000, MaxWorkers: 1, QueueTimeout: 5 * time.Second})
	inHandler := make(chan struct{}, 2)
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inHandler <- struct{}{}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the body: %v", err)
		}
		if got := len(a.workers); got != 1 {
			t.Errorf("%s after its body was read: %d workers busy; want 1 (its own)", b, got)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	pr, pw := io.Pipe()
	slow := httptest.NewRequest(http.MethodPost, "/api/v1/write", pr)
	slowRec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { defer close(done); h.ServeHTTP(slowRec, slow) }()
	<-inHandler // the slow request is admitted and waits for its body
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/write", strings.NewReader("fast")))
	if rec.Code != http.StatusNoContent {
		t.Fatalf("request beside one waiting for its body: got %d %s; want 204 (the waiting one holds no worker)", rec.Code, rec.Body)
	}
	pw.Write([]byte("slow"))
	pw.Close()
	<-done
	if slowRec.Code != http.StatusNoContent {
		t.Errorf("the slow request: got %d; want 204", slowRec.Code)
	}
	if len(a.workers) != 0 || a.reqs != 0 {
		t.Errorf("after both ended: %d workers and %d requests in flight; want 0", len(a.workers), a.reqs)
	}
}

// TestAdmissionLendsTheQueryCPU: the slot kept for queries is taken by
// ingest while no query runs and none ended within QueryHold, not while
// one runs or just after; a MaxWorkers set by the operator lends nothing;
// the default lends the CPU GOMAXPROCS − 1 keeps.
func TestAdmissionLendsTheQueryCPU(t *testing.T) {
	const hold = 150 * time.Millisecond
	a := NewAdmission(AdmissionOptions{MaxRequests: 10, MaxBytes: 1 << 20, MaxWorkers: 1, SpareWorkers: 1,
		QueryHold: hold, QueueTimeout: 50 * time.Millisecond})
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		w.WriteHeader(http.StatusNoContent)
	}))
	// run starts n held requests and returns how many got in before the
	// queue timeout; the others were answered 429.
	run := func(n int) (in int, finish func()) {
		var wg sync.WaitGroup
		codes := make(chan int, n)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/write", strings.NewReader("x")))
				codes <- rec.Code
			}()
		}
		deadline := time.After(time.Second)
		refused := 0
		for in+refused < n {
			select {
			case <-entered:
				in++
			case c := <-codes:
				if c != http.StatusTooManyRequests {
					t.Fatalf("a request answered %d before it was released; want 429", c)
				}
				refused++
			case <-deadline:
				t.Fatalf("%d of %d requests neither entered nor were refused within 1s", n-in-refused, n)
			}
		}
		return in, func() {
			for range in {
				release <- struct{}{}
			}
			wg.Wait()
		}
	}

	in, finish := run(3)
	finish()
	if in != 2 {
		t.Errorf("no query yet: %d of 3 requests ran at once; want 2 (the worker and the lent slot)", in)
	}

	queryIn, queryOut := make(chan struct{}), make(chan struct{})
	q := a.Query(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(queryIn)
		<-queryOut
	}))
	go q.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/v1/query", nil))
	<-queryIn
	in, finish = run(2)
	finish()
	if in != 1 {
		t.Errorf("while a query runs: %d of 2 requests ran at once; want 1 (the query keeps its CPU)", in)
	}
	close(queryOut)
	for a.queries.Load() != 0 {
		time.Sleep(time.Millisecond)
	}
	in, finish = run(2)
	finish()
	if in != 1 {
		t.Errorf("just after a query: %d of 2 requests ran at once; want 1 for QueryHold (%s)", in, hold)
	}
	time.Sleep(hold)
	in, finish = run(2)
	finish()
	if in != 2 {
		t.Errorf("%s after the query: %d of 2 requests ran at once; want 2", hold, in)
	}
	if len(a.workers)+len(a.spare) != 0 {
		t.Errorf("after every request ended: %d worker and %d lent slots busy; want 0", len(a.workers), len(a.spare))
	}

	if set := NewAdmission(AdmissionOptions{MaxWorkers: 1}); set.opts.SpareWorkers != 0 {
		t.Errorf("max_workers set by the operator: %d spare workers; want 0 (a hard bound)", set.opts.SpareWorkers)
	}
	def := NewAdmission(AdmissionOptions{})
	if want := runtime.GOMAXPROCS(0) - DefaultIngestWorkers(); def.opts.SpareWorkers != want {
		t.Errorf("default: %d spare workers; want GOMAXPROCS − max_workers = %d", def.opts.SpareWorkers, want)
	}
}
