//go:build !cgo || !linux

package collector

import (
	"context"
	"fmt"
)

// noNVMLSource stands for NVML in builds without cgo or off Linux, where
// go-nvml cannot be compiled.
type noNVMLSource struct{}

func newNVMLSource(*onceLogger) gpuSource { return noNVMLSource{} }

func (noNVMLSource) Read(context.Context) ([]gpuReading, map[string]string, error) {
	return nil, nil, fmt.Errorf("cannot use NVML in a build without cgo: %w", ErrNotApplicable)
}

func (noNVMLSource) Name() string { return "nvml" }

func (noNVMLSource) Close() error { return nil }
