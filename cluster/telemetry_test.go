package cluster

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballast-io/ballast/cluster/pipeline"
	"github.com/ballast-io/ballast/models"
)

// TestPipelineSpansReachOTLP points the tracer at a loopback OTLP/HTTP
// receiver and checks that a tick's spans arrive there on shutdown.
func TestPipelineSpansReachOTLP(t *testing.T) {
	var posts atomic.Int32
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" {
			b, _ := io.ReadAll(r.Body)
			body.Store(string(b))
			posts.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	ctx := context.Background()
	tracer, shutdown, err := NewTracer(ctx, TelemetryConfig{OTLPEndpoint: strings.TrimPrefix(srv.URL, "http://"), OTLPInsecure: true, ServiceName: "ballast-test", SampleRatio: 1}, "test")
	if err != nil {
		t.Fatal(err)
	}
	src := pipeline.SourceFunc("src", func(_ context.Context, now time.Time) ([]models.Sample, error) {
		return []models.Sample{{Name: "x", Timestamp: now.UnixMilli(), Value: 1}}, nil
	})
	p, err := pipeline.NewPipeline(pipeline.PipelineOptions{
		Sources:  []pipeline.SourceSpec{{Source: src, Interval: time.Second}},
		Appender: discard{},
		Jitter:   -1,
		Tracer:   tracer,
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Tick(ctx, time.Unix(0, 0))
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := shutdown(sctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if posts.Load() == 0 {
		t.Fatal("no OTLP export reached the receiver")
	}
	// The protobuf carries span names as plain strings.
	b, _ := body.Load().(string)
	for _, want := range []string{"pipeline.tick", "collect.src", "ballast-test"} {
		if !strings.Contains(b, want) {
			t.Errorf("exported spans lack %q", want)
		}
	}
}

type discard struct{}

func (discard) Append(context.Context, []models.Sample) error { return nil }

func TestNoEndpointMeansNoExport(t *testing.T) {
	tracer, shutdown, err := NewTracer(context.Background(), TelemetryConfig{}, "test")
	if err != nil || tracer == nil {
		t.Fatalf("got %v, %v; want a no-op tracer", tracer, err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
