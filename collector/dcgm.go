package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ballast-io/ballast/models"
)

// gpuInfo identifies one GPU.
type gpuInfo struct {
	Index, UUID, Model, PCIBusID, Driver string
}

// gpuReading is what one GPU reported: DCGM field name → value in DCGM's
// own unit (percent, MiB, MHz, mJ, ...). Every source (libdcgm, NVML, a
// dcgm-exporter endpoint) produces readings, so one mapping yields the
// same series from any of them.
type gpuReading struct {
	GPU    gpuInfo
	Fields map[string]float64
	// XIDEvents counts the XID errors seen since the agent started, where
	// the source sees each one (NVML's events); nil elsewhere (DCGM and
	// dcgm-exporter give only the last XID).
	XIDEvents *float64
	// Lost says why the GPU could not be read (NVML's GPU_IS_LOST); its
	// reading then holds only what is known without reading it: its last
	// identity and XIDs.
	Lost string
}

// gpuSource reads all GPUs once. skipped names fields the source cannot
// provide (profiling fields on GPUs without the profiling module) with the
// reason, to be reported rather than silently missing. Name says which
// source it is ("libdcgm", "nvml", "dcgm-exporter"), the source label of
// ballast_gpu_source_info.
type gpuSource interface {
	Read(ctx context.Context) (readings []gpuReading, skipped map[string]string, err error)
	Name() string
	Close() error
}

// dcgmField maps one DCGM field to a ballast series.
type dcgmField struct {
	Field  string  // DCGM field name, as in dcgm_fields.h and dcgm-exporter
	Metric string  // ballast metric
	Scale  float64 // DCGM unit → base unit: a multiplier, or a divisor when below 1 (1/Scale is exact for the values used), so that mJ → J and % → ratio divide exactly
	Extra  string  // value of the metric's extra label (type, cause), if any
	Prof   bool    // profiling field: needs the DCGM profiling module
}

// dcgmFields lists the DCGM fields ballast reads and how each maps.
var dcgmFields = []dcgmField{
	{"DCGM_FI_DEV_GPU_UTIL", models.MetricGPUUtilization, 0.01, "", false},
	{"DCGM_FI_DEV_MEM_COPY_UTIL", models.MetricGPUMemCopyUtilization, 0.01, "", false},
	{"DCGM_FI_DEV_FB_USED", models.MetricGPUMemoryUsed, 1 << 20, "", false},
	{"DCGM_FI_DEV_FB_FREE", models.MetricGPUMemoryFree, 1 << 20, "", false},
	{"DCGM_FI_DEV_POWER_USAGE", models.MetricGPUPower, 1, "", false},
	{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", models.MetricGPUEnergy, 0.001, "", false},
	{"DCGM_FI_DEV_GPU_TEMP", models.MetricGPUTemperature, 1, "", false},
	{"DCGM_FI_DEV_MEMORY_TEMP", models.MetricGPUMemoryTemperature, 1, "", false},
	{"DCGM_FI_DEV_SM_CLOCK", models.MetricGPUSMClock, 1e6, "", false},
	{"DCGM_FI_DEV_MEM_CLOCK", models.MetricGPUMemoryClock, 1e6, "", false},
	{"DCGM_FI_DEV_XID_ERRORS", models.MetricGPULastXID, 1, "", false},
	{"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", models.MetricGPUECCErrors, 1, "single_bit", false},
	{"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", models.MetricGPUECCErrors, 1, "double_bit", false},
	{"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", models.MetricGPURemappedRows, 1, "correctable", false},
	{"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", models.MetricGPURemappedRows, 1, "uncorrectable", false},
	{"DCGM_FI_DEV_ROW_REMAP_FAILURE", models.MetricGPURowRemapFailure, 1, "", false},
	{"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", models.MetricGPUPCIeReplays, 1, "", false},
	{"DCGM_FI_PROF_GR_ENGINE_ACTIVE", models.MetricGPUGraphicsActive, 1, "", true},
	{"DCGM_FI_PROF_SM_ACTIVE", models.MetricGPUSMActive, 1, "", true},
	{"DCGM_FI_PROF_SM_OCCUPANCY", models.MetricGPUSMOccupancy, 1, "", true},
	{"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", models.MetricGPUTensorActive, 1, "", true},
	{"DCGM_FI_PROF_DRAM_ACTIVE", models.MetricGPUDRAMActive, 1, "", true},
	{"DCGM_FI_PROF_PCIE_RX_BYTES", models.MetricGPUPCIeRx, 1, "", true},
	{"DCGM_FI_PROF_PCIE_TX_BYTES", models.MetricGPUPCIeTx, 1, "", true},
	{"DCGM_FI_PROF_NVLINK_RX_BYTES", models.MetricGPUNVLinkRx, 1, "", true},
	{"DCGM_FI_PROF_NVLINK_TX_BYTES", models.MetricGPUNVLinkTx, 1, "", true},
}

// gpuSamples maps readings to ballast series, GPUs in index order, fields
// in dcgmFields order; fields a GPU did not report are omitted.
func gpuSamples(rs []gpuReading) []Sample {
	rs = append([]gpuReading(nil), rs...)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].GPU.Index < rs[j].GPU.Index })
	var out []Sample
	for _, r := range rs {
		g := r.GPU
		out = append(out, Sample{models.MetricGPUInfo, []string{g.Index, g.UUID, g.Model, g.PCIBusID, g.Driver}, 1})
		for _, f := range dcgmFields {
			v, ok := r.Fields[f.Field]
			if !ok {
				continue
			}
			l := []string{g.Index, g.UUID, g.Model}
			if f.Extra != "" {
				l = append(l, f.Extra)
			}
			if f.Scale < 1 {
				v /= math.Round(1 / f.Scale)
			} else {
				v *= f.Scale
			}
			out = append(out, Sample{f.Metric, l, v})
		}
		if r.XIDEvents != nil {
			out = append(out, Sample{models.MetricGPUXIDErrors, []string{g.Index, g.UUID, g.Model}, *r.XIDEvents})
		}
	}
	return out
}

// skippedSamples reports the fields a source could not provide.
func skippedSamples(skipped map[string]string) []Sample {
	names := make([]string, 0, len(skipped))
	for n := range skipped {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]Sample, 0, len(names))
	for _, n := range names {
		out = append(out, Sample{models.MetricCollectorSkipped, []string{"dcgm", n}, 1})
	}
	return out
}

// parseExposition parses exposition text with expfmt, turning a panic of
// the parser into an error: prometheus/common v0.70.1 dereferences nil on
// a page like "# HELP x …\n{}" (fixed upstream in v0.72.0), and a page is
// outside bytes that must never take the agent down.
func parseExposition(b []byte) (mfs map[string]*dto.MetricFamily, err error) {
	defer func() {
		if v := recover(); v != nil {
			mfs, err = nil, fmt.Errorf("malformed exposition text (the parser failed: %v)", v)
		}
	}()
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(bytes.NewReader(b))
}

// parseDCGMExporter parses a dcgm-exporter /metrics page into readings,
// one per GPU (keyed by the gpu and UUID labels). Families that are not
// DCGM fields ballast maps are ignored; a page that is not valid
// exposition text is an error.
func parseDCGMExporter(b []byte) ([]gpuReading, error) {
	mfs, err := parseExposition(b)
	if err != nil {
		return nil, fmt.Errorf("cannot parse dcgm-exporter metrics: %w", err)
	}
	known := map[string]bool{}
	for _, f := range dcgmFields {
		known[f.Field] = true
	}
	by := map[string]*gpuReading{}
	var order []string
	for name, mf := range mfs {
		if !known[name] {
			continue
		}
		for _, m := range mf.GetMetric() {
			var g gpuInfo
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "gpu":
					g.Index = lp.GetValue()
				case "UUID":
					g.UUID = lp.GetValue()
				case "modelName":
					g.Model = lp.GetValue()
				case "pci_bus_id":
					g.PCIBusID = lp.GetValue()
				case "DCGM_FI_DRIVER_VERSION":
					g.Driver = lp.GetValue()
				}
			}
			key := g.Index + "\xff" + g.UUID
			r, ok := by[key]
			if !ok {
				r = &gpuReading{GPU: g, Fields: map[string]float64{}}
				by[key] = r
				order = append(order, key)
			}
			var v float64
			switch {
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetUntyped() != nil:
				v = m.GetUntyped().GetValue()
			default:
				return nil, fmt.Errorf("cannot use dcgm-exporter family %q: not a gauge, counter or untyped", name)
			}
			r.Fields[name] = v
		}
	}
	sort.Strings(order)
	out := make([]gpuReading, 0, len(order))
	for _, k := range order {
		out = append(out, *by[k])
	}
	return out, nil
}

// exporterSource scrapes a dcgm-exporter endpoint.
type exporterSource struct {
	url    string
	client *http.Client
}

func (s *exporterSource) Read(ctx context.Context) ([]gpuReading, map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot build request for dcgm-exporter: %w", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot scrape dcgm-exporter: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("cannot scrape dcgm-exporter: status %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read dcgm-exporter response: %w", err)
	}
	rs, err := parseDCGMExporter(b)
	return rs, nil, err
}

func (s *exporterSource) Name() string { return "dcgm-exporter" }

func (s *exporterSource) Close() error { return nil }

// fallbackSource reads GPUs from the first of its sources that applies to
// the host: libdcgm, else NVML. Until one applies it tries them all on
// every scrape, so installing DCGM or the driver needs no agent restart;
// once one loaded it keeps to that one (no dlopen per scrape) until it
// says "not applicable" again (the driver was unloaded), and then probes
// afresh. A source applies when its Read returns anything but
// ErrNotApplicable: a loaded library that then fails is an error to
// report, not a reason to switch.
type fallbackSource struct {
	srcs []gpuSource
	log  *onceLogger

	mu  sync.Mutex
	cur gpuSource // the source in use; nil while probing
}

func (f *fallbackSource) Read(ctx context.Context) ([]gpuReading, map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur != nil {
		rs, skipped, err := f.cur.Read(ctx)
		if !errors.Is(err, ErrNotApplicable) {
			return rs, skipped, err
		}
		f.log.Info("GPU source no longer applies; probing again", "source", f.cur.Name(), "err", err)
		f.cur = nil
	}
	var why []string
	for _, s := range f.srcs {
		rs, skipped, err := s.Read(ctx)
		if errors.Is(err, ErrNotApplicable) {
			why = append(why, s.Name()+": "+err.Error())
			continue
		}
		f.cur = s
		f.log.Info("reading GPUs", "source", s.Name())
		return rs, skipped, err
	}
	names := make([]string, len(f.srcs))
	for i, s := range f.srcs {
		names[i] = s.Name()
	}
	return nil, nil, fmt.Errorf("cannot read GPUs through %s: %w (%s)", strings.Join(names, " or "), ErrNotApplicable, strings.Join(why, "; "))
}

// Name is the source in use, or the candidates while none applies.
func (f *fallbackSource) Name() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur != nil {
		return f.cur.Name()
	}
	names := make([]string, len(f.srcs))
	for i, s := range f.srcs {
		names[i] = s.Name()
	}
	return strings.Join(names, "|")
}

func (f *fallbackSource) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, s := range f.srcs {
		errs = append(errs, s.Close())
	}
	f.cur = nil
	return errors.Join(errs...)
}

// dcgmCollector reads GPUs from libdcgm (embedded or standalone host
// engine), from NVML (the driver's libnvidia-ml, when DCGM is absent) or
// from a dcgm-exporter endpoint.
type dcgmCollector struct {
	src gpuSource
	log *onceLogger
}

// CheckDCGMExporterURL returns an error unless u is an http or https URL
// with a host, the dcgm-exporter endpoint the dcgm collector can read.
// Config validation and the collector share it.
func CheckDCGMExporterURL(u string) error {
	p, err := url.Parse(u)
	switch {
	case err != nil:
		return fmt.Errorf("invalid dcgm-exporter URL %q: %w", u, err)
	case p.Scheme != "http" && p.Scheme != "https":
		return fmt.Errorf("invalid dcgm-exporter URL %q: want http:// or https://", u)
	case p.Host == "":
		return fmt.Errorf("invalid dcgm-exporter URL %q: no host", u)
	}
	return nil
}

func newDCGMCollector(opts Options, log *onceLogger) (Collector, error) {
	if opts.DCGMExporterURL != "" {
		if err := CheckDCGMExporterURL(opts.DCGMExporterURL); err != nil {
			return nil, err
		}
		return &dcgmCollector{src: &exporterSource{url: opts.DCGMExporterURL, client: &http.Client{Timeout: opts.Timeout + time.Second}}, log: log}, nil
	}
	if opts.DCGMHostEngine != "" {
		// A named host engine is a request for DCGM: no silent fallback.
		return &dcgmCollector{src: newLibDCGMSource(opts.DCGMHostEngine), log: log}, nil
	}
	src := &fallbackSource{srcs: []gpuSource{newLibDCGMSource(""), newNVMLSource(log)}, log: log}
	return &dcgmCollector{src: src, log: log}, nil
}

func (c *dcgmCollector) Collect(ctx context.Context) ([]Sample, error) {
	rs, skipped, err := c.src.Read(ctx)
	if err != nil {
		return nil, err
	}
	for f, why := range skipped {
		c.log.warnOnce("field:"+f, why, "skipped a DCGM field", "field", f)
	}
	out := append(gpuSamples(rs), Sample{models.MetricGPUSource, []string{c.src.Name()}, 1})
	for _, r := range rs {
		if r.Lost != "" {
			c.log.warnOnce("gpu:"+r.GPU.Index, r.Lost, "cannot read a GPU", "gpu", r.GPU.Index)
			out = append(out, Sample{models.MetricCollectorDeviceUp, []string{"dcgm", r.GPU.Index}, 0})
		}
	}
	return append(out, skippedSamples(skipped)...), nil
}

// Close shuts the DCGM connection or embedded host engine down.
func (c *dcgmCollector) Close() error { return c.src.Close() }
