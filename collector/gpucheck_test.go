//go:build gpucheck

package collector

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/internal/testkit"
	"github.com/ballast-io/ballast/models"
)

// TestGPUCheck reads the real GPUs of this host with the dcgm collector,
// prints the exposition and the source it read through, and fails unless
// the collector succeeded; bench/gpu-check.sh runs it. Sources: libdcgm
// (embedded host engine) else NVML (the driver's libnvidia-ml.so.1), or
// a standalone host engine (BALLAST_DCGM_HOSTENGINE, libdcgm only), or a
// dcgm-exporter endpoint (BALLAST_DCGM_EXPORTER_URL).
//
// XID: it prints, per GPU, the last XID and (NVML) the XID count, or
// that DCGM_FI_DEV_XID_ERRORS is unavailable and the logged reason, and
// fails when a GPU has neither. With BALLAST_GPU_CHECK_XID_CMD set (a
// command that provokes an XID, e.g. "python3 bench/gpu-xid.py"), it
// runs the command and fails unless a GPU's XID count rose (its last XID,
// where the source gives no count) within 15 s. The command runs in the
// repository root (go test runs this test inside collector/, where the
// documented "bench/gpu-xid.py" does not exist).
func TestGPUCheck(t *testing.T) {
	var logged testkit.LogBuffer
	opts := Options{
		DCGMHostEngine:  os.Getenv("BALLAST_DCGM_HOSTENGINE"),
		DCGMExporterURL: os.Getenv("BALLAST_DCGM_EXPORTER_URL"),
		Timeout:         30 * time.Second,
		CacheTTL:        -1,
		Logger:          slog.New(slog.NewTextHandler(io.MultiWriter(os.Stderr, &logged), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	h, err := NewHandler(opts, []string{"dcgm"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	scrape := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	var body string
	for i := 0; i < 3; i++ { // watched fields need an update period before they hold values
		body = scrape()
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

	before := gpuCheckXID(t, body, logged.String())
	cmd := os.Getenv("BALLAST_GPU_CHECK_XID_CMD")
	if cmd == "" {
		fmt.Println("== XID trigger: not run (set BALLAST_GPU_CHECK_XID_CMD)")
		return
	}
	fmt.Printf("== XID trigger: %s\n", cmd)
	trigger := exec.Command("sh", "-c", cmd)
	trigger.Dir = ".."
	out, err := trigger.CombinedOutput()
	fmt.Printf("%s== XID trigger exit: %v\n", out, err)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(time.Second) {
		after := gpuCheckXID(t, scrape(), logged.String())
		for gpu, a := range after {
			b := before[gpu]
			if (a.count >= 0 && a.count > b.count) || (a.count < 0 && a.last != b.last) {
				fmt.Printf("== XID seen: GPU %s last XID %v -> %v, count %v -> %v\n", gpu, b.last, a.last, b.count, a.count)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no GPU's XID count or last XID changed within 15 s of the trigger")
		}
	}
}

// gpuXID is one GPU's XID series in a scrape; count is -1 where the
// source gives none (libdcgm, dcgm-exporter).
type gpuXID struct{ last, count float64 }

// gpuCheckXID prints and returns each GPU's XID series, and fails the
// test when a GPU has no last XID while the field is not reported
// unavailable with a logged reason.
func gpuCheckXID(t *testing.T, body, log string) map[string]gpuXID {
	t.Helper()
	gpus := map[string]gpuXID{}
	var order []string
	// value reads the gpu label and the value of a series of family name
	// (labels are written sorted, so gpu need not come first).
	value := func(line, name string) (gpu string, v float64, ok bool) {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			return "", 0, false
		}
		labels, num, _ := strings.Cut(rest, "} ")
		_, g, found := strings.Cut(","+labels, `,gpu="`)
		if !found {
			return "", 0, false
		}
		gpu, _, _ = strings.Cut(g, `"`)
		v, err := strconv.ParseFloat(num, 64)
		return gpu, v, err == nil
	}
	for _, line := range strings.Split(body, "\n") {
		if gpu, _, ok := value(line, models.MetricGPUInfo); ok {
			gpus[gpu] = gpuXID{last: -1, count: -1}
			order = append(order, gpu)
		}
	}
	for _, line := range strings.Split(body, "\n") {
		if gpu, v, ok := value(line, models.MetricGPULastXID); ok {
			x := gpus[gpu]
			x.last = v
			gpus[gpu] = x
		}
		if gpu, v, ok := value(line, models.MetricGPUXIDErrors); ok {
			x := gpus[gpu]
			x.count = v
			gpus[gpu] = x
		}
	}
	unavailable := strings.Contains(body, models.MetricCollectorSkipped+`{collector="dcgm",field="DCGM_FI_DEV_XID_ERRORS"} 1`)
	reason := ""
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "field=DCGM_FI_DEV_XID_ERRORS") {
			reason = line
		}
	}
	for _, gpu := range order {
		switch x := gpus[gpu]; {
		case x.last >= 0 && x.count >= 0:
			fmt.Printf("== XID GPU %s: watched; last XID %v, %v XIDs since the collector started\n", gpu, x.last, x.count)
		case x.last >= 0:
			fmt.Printf("== XID GPU %s: last XID %v (this source gives no count)\n", gpu, x.last)
		case unavailable && reason != "":
			fmt.Printf("== XID GPU %s: unavailable; %s\n", gpu, reason)
		default:
			t.Errorf("GPU %s: no %s and DCGM_FI_DEV_XID_ERRORS not reported unavailable with a logged reason", gpu, models.MetricGPULastXID)
		}
	}
	return gpus
}
