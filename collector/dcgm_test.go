package collector

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/ballast-io/ballast/internal/ratelog"
	"github.com/ballast-io/ballast/models"
)

// fakeGPUs is a gpuSource with scripted readings.
type fakeGPUs struct {
	readings []gpuReading
	skipped  map[string]string
	err      error
	closed   bool
}

func (f *fakeGPUs) Read(context.Context) ([]gpuReading, map[string]string, error) {
	return f.readings, f.skipped, f.err
}
func (f *fakeGPUs) Close() error { f.closed = true; return nil }

func TestDCGMCollectorMapsUnitsAndReportsSkippedFields(t *testing.T) {
	src := &fakeGPUs{
		readings: []gpuReading{{
			GPU: gpuInfo{Index: "0", UUID: "GPU-1", Model: "NVIDIA H100", PCIBusID: "00000000:17:00.0", Driver: "550.54"},
			Fields: map[string]float64{
				"DCGM_FI_DEV_GPU_UTIL":                 91,
				"DCGM_FI_DEV_FB_USED":                  5120,
				"DCGM_FI_DEV_SM_CLOCK":                 1980,
				"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 15152422938,
				"DCGM_FI_PROF_GR_ENGINE_ACTIVE":        0.25,
				"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL":        2,
			},
		}},
		skipped: map[string]string{"DCGM_FI_PROF_SM_OCCUPANCY": "not supported by this GPU's profiling metric groups"},
	}
	c := &dcgmCollector{src: src, log: newOnceLogger(Options{}.withDefaults().Logger)}
	s, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, x := range s {
		got[x.Name+"/"+x.Values[len(x.Values)-1]] = x.Value
	}
	want := map[string]float64{
		models.MetricGPUUtilization + "/NVIDIA H100":                 0.91,
		models.MetricGPUMemoryUsed + "/NVIDIA H100":                  5120 << 20,
		models.MetricGPUSMClock + "/NVIDIA H100":                     1.98e9,
		models.MetricGPUEnergy + "/NVIDIA H100":                      15152422.938,
		models.MetricGPUGraphicsActive + "/NVIDIA H100":              0.25,
		models.MetricGPUECCErrors + "/double_bit":                    2,
		models.MetricGPUInfo + "/550.54":                             1,
		models.MetricCollectorSkipped + "/DCGM_FI_PROF_SM_OCCUPANCY": 1,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if err := c.Close(); err != nil || !src.closed {
		t.Errorf("Close: err %v, closed %v; want the source closed", err, src.closed)
	}
}

// TestDCGMWithoutLibdcgm runs the real go-dcgm path on a host without
// libdcgm (this one): it must say "not applicable", every time, and never
// panic or exit.
func TestDCGMWithoutLibdcgm(t *testing.T) {
	c, err := newDCGMCollector(Options{}.withDefaults(), newOnceLogger(Options{}.withDefaults().Logger))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		_, err := c.Collect(context.Background())
		if !errors.Is(err, ErrNotApplicable) {
			t.Skipf("libdcgm seems present here (err %v); the no-library path cannot be tested", err)
		}
	}
	if err := c.(*dcgmCollector).Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestDCGMExporterSource scrapes a dcgm-exporter fixture served on
// loopback and checks it yields the golden case's series.
func TestDCGMExporterSource(t *testing.T) {
	const fix = "gpu/dcgm-exporter/cncf-k8s-ai-conformance__v1.35__kops__tests__TestObservability_AcceleratorMetrics_ViaDCGM__output.prom"
	page := readFixture(t, fix)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(page) }))
	defer srv.Close()
	got, err := collectWith(t, "dcgm", Options{DCGMExporterURL: srv.URL + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := parseDCGMExporter(page)
	if err != nil {
		t.Fatal(err)
	}
	if want := gpuSamples(rs); !reflect.DeepEqual(got, want) || len(want) == 0 {
		t.Errorf("exporter source: got %d samples; want the %d of the parsed fixture", len(got), len(want))
	}
	if _, err := newDCGMCollector(Options{DCGMExporterURL: "ftp://x"}.withDefaults(), nil); err == nil {
		t.Errorf("an ftp:// exporter URL must be refused")
	}
}

// TestDCGMExporterMalformedPages: pages a fuzzer found crash-worthy are
// parse errors. The first panicked inside expfmt (prometheus/common
// v0.70.1) and took the client agent down on its first scrape.
func TestDCGMExporterMalformedPages(t *testing.T) {
	for _, page := range []string{
		"#HELP A000000000000000000000000000000 000000000\n{}",
		"{}",
		"# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n{}",
	} {
		if _, err := parseDCGMExporter([]byte(page)); err == nil {
			t.Errorf("%q: got no error; want a parse error", page)
		}
	}
}

// panicker is a collector whose Collect panics.
type panicker struct{}

func (panicker) Collect(context.Context) ([]Sample, error) { panic("boom") }
func (panicker) Close() error                              { return nil }

func TestCollectorPanicFailsAlone(t *testing.T) {
	opts := Options{}.withDefaults()
	r := &run{name: "boom", c: panicker{}, log: newOnceLogger(opts.Logger), fails: ratelog.New(failureLogEvery)}
	res := r.collect(opts)
	if res.err == nil || !strings.Contains(res.err.Error(), "panicked") {
		t.Errorf("a panicking collector: got %v; want an error saying it panicked", res.err)
	}
}
