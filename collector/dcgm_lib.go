//go:build cgo && linux

package collector

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/NVIDIA/go-dcgm/pkg/dcgm"
)

// libDCGMSource reads GPUs through go-dcgm, which dlopen()s libdcgm.so at
// run time. When the library is missing, Read returns ErrNotApplicable
// (and tries again on the next scrape, so installing DCGM needs no agent
// restart). Nothing else in go-dcgm is called before Init succeeded: its
// symbols are resolved lazily and would crash the process otherwise.
type libDCGMSource struct {
	hostEngine string

	mu       sync.Mutex
	cleanup  func()
	group    dcgm.GroupHandle
	fields   []dcgm.Short          // watched field ids
	names    map[dcgm.Short]string // field id → name
	skipped  map[string]string     // fields not watched, with the reason
	watching bool
}

func newLibDCGMSource(hostEngine string) gpuSource {
	return &libDCGMSource{hostEngine: hostEngine}
}

func (s *libDCGMSource) init() error {
	if s.cleanup != nil {
		return nil
	}
	var (
		cleanup func()
		err     error
	)
	if s.hostEngine == "" {
		cleanup, err = dcgm.Init(dcgm.Embedded)
	} else {
		socket := "0"
		if strings.HasPrefix(s.hostEngine, "/") {
			socket = "1"
		}
		cleanup, err = dcgm.Init(dcgm.Standalone, s.hostEngine, socket)
	}
	if err != nil {
		if strings.Contains(err.Error(), "not Found") {
			return fmt.Errorf("cannot load libdcgm: %w (%v)", ErrNotApplicable, err)
		}
		return fmt.Errorf("cannot start DCGM: %w", err)
	}
	s.cleanup = cleanup
	return nil
}

// watch sets up the field watches once: every device field, and the
// profiling fields that every GPU lists among its supported metric groups.
func (s *libDCGMSource) watch(gpus []uint) error {
	if s.watching {
		return nil
	}
	s.names, s.skipped = map[dcgm.Short]string{}, map[string]string{}
	supported := map[uint]int{}
	var profErr error
	for _, g := range gpus {
		groups, err := dcgm.GetSupportedMetricGroups(g)
		if err != nil {
			profErr = err
			break
		}
		for _, mg := range groups {
			for _, id := range mg.FieldIds {
				supported[id]++
			}
		}
	}
	s.fields = s.fields[:0]
	for _, f := range dcgmFields {
		id, ok := dcgm.DCGM_FI[f.Field]
		if !ok {
			s.skipped[f.Field] = "unknown to this go-dcgm version"
			continue
		}
		if f.Prof {
			switch {
			case profErr != nil:
				s.skipped[f.Field] = "profiling metrics unavailable: " + profErr.Error()
				continue
			case supported[uint(id)] < len(gpus):
				s.skipped[f.Field] = "not supported by this GPU's profiling metric groups"
				continue
			}
		}
		s.fields = append(s.fields, id)
		s.names[id] = f.Field
	}
	fg, err := dcgm.FieldGroupCreate("ballast", s.fields)
	if err != nil {
		return fmt.Errorf("cannot create DCGM field group: %w", err)
	}
	s.group = dcgm.GroupAllGPUs()
	// Update every second, keep one sample: the agent reads the latest.
	if err := dcgm.WatchFieldsWithGroupEx(fg, s.group, 1_000_000, 0, 1); err != nil {
		return fmt.Errorf("cannot watch DCGM fields: %w", err)
	}
	s.watching = true
	return nil
}

func (s *libDCGMSource) Read(ctx context.Context) ([]gpuReading, map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.init(); err != nil {
		return nil, nil, err
	}
	gpus, err := dcgm.GetSupportedDevices()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot list GPUs: %w", err)
	}
	if len(gpus) == 0 {
		return nil, nil, fmt.Errorf("cannot find a DCGM-supported GPU: %w", ErrNotApplicable)
	}
	if err := s.watch(gpus); err != nil {
		return nil, nil, err
	}
	if err := dcgm.UpdateAllFields(); err != nil {
		return nil, nil, fmt.Errorf("cannot update DCGM fields: %w", err)
	}
	skipped := map[string]string{}
	for k, v := range s.skipped {
		skipped[k] = v
	}
	var out []gpuReading
	for _, g := range gpus {
		if ctx.Err() != nil {
			return out, skipped, ctx.Err()
		}
		info, err := dcgm.GetDeviceInfo(g)
		if err != nil {
			return out, skipped, fmt.Errorf("cannot read GPU %d identity: %w", g, err)
		}
		vals, err := dcgm.EntityGetLatestValues(dcgm.FE_GPU, g, s.fields)
		if err != nil {
			return out, skipped, fmt.Errorf("cannot read GPU %d fields: %w", g, err)
		}
		r := gpuReading{
			GPU:    gpuInfo{Index: strconv.FormatUint(uint64(g), 10), UUID: info.UUID, Model: info.Identifiers.Model, PCIBusID: info.PCI.BusID, Driver: info.Identifiers.DriverVersion},
			Fields: map[string]float64{},
		}
		for _, v := range vals {
			name := s.names[dcgm.Short(v.FieldId)]
			if x, why := dcgmValue(v.Status, v.FieldType, v.Int64, v.Float64); why != "" {
				skipped[name] = why
			} else {
				r.Fields[name] = x
			}
		}
		out = append(out, r)
	}
	return out, skipped, nil
}

// dcgmValue decodes one field value, or says why it has none: DCGM marks
// unsupported or not-yet-sampled values with reserved "blank" numbers.
func dcgmValue(status int, typ uint, i64 func() int64, f64 func() float64) (float64, string) {
	if status != 0 {
		return 0, fmt.Sprintf("DCGM status %d", status)
	}
	switch typ {
	case dcgm.DCGM_FT_INT64:
		v := i64()
		if v >= dcgm.DCGM_FT_INT64_BLANK {
			return 0, "blank value: not supported or not yet sampled"
		}
		return float64(v), ""
	case dcgm.DCGM_FT_DOUBLE:
		v := f64()
		if v >= dcgm.DCGM_FT_FP64_BLANK {
			return 0, "blank value: not supported or not yet sampled"
		}
		return v, ""
	}
	return 0, fmt.Sprintf("field type %q is not numeric", rune(typ))
}

func (s *libDCGMSource) Name() string { return "libdcgm" }

func (s *libDCGMSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cleanup != nil {
		s.cleanup()
		s.cleanup, s.watching = nil, false
	}
	return nil
}
