package collector

import (
	"context"
	"errors"
	"fmt"
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
	name     string
	readings []gpuReading
	skipped  map[string]string
	err      error
	closed   bool
	reads    int
}

func (f *fakeGPUs) Read(context.Context) ([]gpuReading, map[string]string, error) {
	f.reads++
	return f.readings, f.skipped, f.err
}
func (f *fakeGPUs) Name() string { return f.name }
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
		name:    "libdcgm",
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
		models.MetricGPUSource + "/libdcgm":                          1,
		models.MetricCollectorSkipped + "/DCGM_FI_PROF_SM_OCCUPANCY": 1,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if err := c.Close(); err != nil || !src.closed {
		t.Errorf("Close: err %v, closed %v; want the source closed", err, src.closed)
	}
}

// TestDCGMWithoutLibdcgm runs the real go-dcgm and go-nvml paths on a
// host with neither libdcgm nor libnvidia-ml (this one): it must say "not
// applicable" naming both, every time, and never panic or exit.
func TestDCGMWithoutLibdcgm(t *testing.T) {
	c, err := newDCGMCollector(Options{}.withDefaults(), newOnceLogger(Options{}.withDefaults().Logger))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		_, err := c.Collect(context.Background())
		if !errors.Is(err, ErrNotApplicable) {
			t.Skipf("libdcgm or libnvidia-ml seems present here (err %v); the no-library path cannot be tested", err)
		}
		for _, lib := range []string{"libdcgm:", "nvml:"} {
			if !strings.Contains(err.Error(), lib) {
				t.Errorf("got %q; want the reason of %s named", err, lib)
			}
		}
	}
	if err := c.(*dcgmCollector).Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestDCGMSourceOrder: the embedded default reads libdcgm when it
// applies (NVML untouched), NVML when libdcgm does not, and is not
// applicable, naming both, when neither is; a source that stops applying
// is given up and the order probed again. A named host engine means
// libdcgm only.
func TestDCGMSourceOrder(t *testing.T) {
	na := func(lib string) error { return fmt.Errorf("cannot load %s: %w", lib, ErrNotApplicable) }
	gpu := []gpuReading{{GPU: gpuInfo{Index: "0"}, Fields: map[string]float64{"DCGM_FI_DEV_GPU_UTIL": 50}}}
	log := newOnceLogger(Options{}.withDefaults().Logger)

	dc, nv := &fakeGPUs{name: "libdcgm", readings: gpu}, &fakeGPUs{name: "nvml", readings: gpu}
	f := &fallbackSource{srcs: []gpuSource{dc, nv}, log: log}
	for i := 0; i < 2; i++ {
		if _, _, err := f.Read(context.Background()); err != nil || f.Name() != "libdcgm" {
			t.Fatalf("libdcgm present: err %v, source %s; want libdcgm", err, f.Name())
		}
	}
	if dc.reads != 2 || nv.reads != 0 {
		t.Errorf("libdcgm present: libdcgm read %d, nvml read %d times; want 2 and 0", dc.reads, nv.reads)
	}

	// libdcgm loads but fails: an error to report, not a switch to NVML.
	dc, nv = &fakeGPUs{name: "libdcgm", err: errors.New("cannot start DCGM: boom")}, &fakeGPUs{name: "nvml", readings: gpu}
	f = &fallbackSource{srcs: []gpuSource{dc, nv}, log: log}
	if _, _, err := f.Read(context.Background()); err == nil || nv.reads != 0 {
		t.Errorf("libdcgm failing: err %v, nvml read %d times; want the error, nvml unread", err, nv.reads)
	}

	dc, nv = &fakeGPUs{name: "libdcgm", err: na("libdcgm")}, &fakeGPUs{name: "nvml", err: na("libnvidia-ml.so.1")}
	f = &fallbackSource{srcs: []gpuSource{dc, nv}, log: log}
	_, _, err := f.Read(context.Background())
	if !errors.Is(err, ErrNotApplicable) || !strings.Contains(err.Error(), "libdcgm: cannot load libdcgm") || !strings.Contains(err.Error(), "nvml: cannot load libnvidia-ml.so.1") {
		t.Errorf("neither library: got %v; want not applicable naming both", err)
	}

	// The driver gets installed: NVML applies, and is kept.
	nv.err, nv.readings = nil, gpu
	for i := 0; i < 3; i++ {
		if _, _, err := f.Read(context.Background()); err != nil || f.Name() != "nvml" {
			t.Fatalf("driver installed: err %v, source %s; want nvml", err, f.Name())
		}
	}
	if dc.reads != 2 {
		t.Errorf("libdcgm probed %d times; want 2 (not again once NVML applied)", dc.reads)
	}
	// The driver goes away: probe the order again on the same scrape.
	nv.err = na("libnvidia-ml.so.1")
	if _, _, err := f.Read(context.Background()); !errors.Is(err, ErrNotApplicable) || dc.reads != 3 {
		t.Errorf("driver gone: err %v, libdcgm probed %d times; want not applicable after probing libdcgm again", err, dc.reads)
	}
	if err := f.Close(); err != nil || !dc.closed || !nv.closed {
		t.Errorf("Close: err %v; want every source closed", err)
	}

	c, err := newDCGMCollector(Options{DCGMHostEngine: "localhost:5555"}.withDefaults(), log)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*dcgmCollector).src.(*fallbackSource); ok {
		t.Errorf("a named host engine: got the fallback source; want libdcgm only")
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
	want := append(gpuSamples(rs), Sample{models.MetricGPUSource, []string{"dcgm-exporter"}, 1})
	if !reflect.DeepEqual(got, want) || len(rs) == 0 {
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
