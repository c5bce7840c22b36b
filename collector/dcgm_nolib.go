//go:build !cgo || !linux

package collector

import (
	"context"
	"fmt"
)

// noDCGMSource stands for libdcgm in builds without cgo or off Linux,
// where go-dcgm cannot be compiled: the dcgm collector is not applicable
// there (a dcgm-exporter endpoint still works; NVML needs cgo too).
type noDCGMSource struct{}

func newLibDCGMSource(string) gpuSource { return noDCGMSource{} }

func (noDCGMSource) Read(context.Context) ([]gpuReading, map[string]string, error) {
	return nil, nil, fmt.Errorf("cannot use libdcgm in a build without cgo: %w", ErrNotApplicable)
}

func (noDCGMSource) Name() string { return "libdcgm" }

func (noDCGMSource) Close() error { return nil }
