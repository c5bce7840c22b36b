package storage

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// VictoriaMetrics allows one embedded store per process, so the package's
// tests share one, opened here; tests that need restarts or crashes run a
// subprocess (see crash_test.go in cmd/ballast).
var (
	testStore   *Embedded
	testURL     string
	testMetrics = metrics.NewSet() // the ingest handler's counters
)

func TestMain(m *testing.M) {
	// Parse test flags before OpenEmbedded would parse an empty command line.
	flag.Parse()
	dir, err := os.MkdirTemp("", "ballast-storage-test-")
	if err != nil {
		panic(err)
	}
	testStore, err = OpenEmbedded(Options{DataDir: dir, LatencyOffset: -1, DisableQueryCache: true, MemoryBytes: 512 << 20, LogLevel: "ERROR"})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	ih := NewIngestHandler(testStore, IngestOptions{MaxBodyBytes: 1 << 20, Metrics: testMetrics})
	mux.Handle(PathImportPrometheus, ih)
	mux.Handle(PathRemoteWrite, ih)
	mux.Handle("/", testStore.QueryHandler())
	srv := httptest.NewServer(mux)
	testURL = srv.URL
	code := m.Run()
	srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := testStore.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	cancel()
	os.RemoveAll(dir)
	os.Exit(code)
}

// waitFor polls cond until it holds or 15 s pass: rows become searchable
// within about 2 s of being written.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (last error: %v)", what, err)
		}
		testStore.Flush()
		time.Sleep(100 * time.Millisecond)
	}
}
