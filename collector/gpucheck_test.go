//go:build gpucheck

package collector

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

// TestGPUCheck reads the real GPUs of this host with the dcgm collector,
// prints the exposition and the source it read through, and fails unless
// the collector succeeded; bench/gpu-check.sh runs it. Sources: libdcgm
// (embedded host engine) else NVML (the driver's libnvidia-ml.so.1), or
// a standalone host engine (BALLAST_DCGM_HOSTENGINE, libdcgm only), or a
// dcgm-exporter endpoint (BALLAST_DCGM_EXPORTER_URL).
func TestGPUCheck(t *testing.T) {
	opts := Options{
		DCGMHostEngine:  os.Getenv("BALLAST_DCGM_HOSTENGINE"),
		DCGMExporterURL: os.Getenv("BALLAST_DCGM_EXPORTER_URL"),
		Timeout:         30 * time.Second,
		CacheTTL:        -1,
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	h, err := NewHandler(opts, []string{"dcgm"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var body string
	for i := 0; i < 3; i++ { // watched fields need an update period before they hold values
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		body = string(b)
		time.Sleep(2 * time.Second)
	}
	os.Stdout.WriteString(body)
	source := "none"
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, models.MetricGPUSource+`{source="`); ok {
			source, _, _ = strings.Cut(rest, `"`)
		}
	}
	fmt.Printf("== GPU source: %s\n", source)
	if !strings.Contains(body, `ballast_collector_success{collector="dcgm"} 1`) {
		t.Fatalf("the dcgm collector did not succeed; see the log above")
	}
}
