// Package collector holds ballast's sources of telemetry: one collector per
// source (nvme, smartctl, dcgm, diskstats, mountstats, nfsd, netdev,
// readahead, filesystem), each registered by name, each failing alone, and the HTTP
// handler that serves them as Prometheus text exposition on /metrics.
//
// The agents (cmd/ballast ds and client) use three functions:
//
//	func Names() []string                        // every registered collector, sorted
//	func DefaultEnabled(role string) []string    // collectors a role ("ds", "client") enables by default
//	func NewHandler(opts Options, enabled []string) (*Handler, error)
//
// *Handler is an http.Handler serving /metrics (gzip when the client asks)
// and has Close() to release devices and libraries. Collection runs on
// scrape: every enabled collector runs concurrently under Options.Timeout;
// its result is cached for Options.CacheTTL so that two scrapers do not
// double the device load. Each collector reports
// ballast_collector_success{collector} and
// ballast_collector_duration_seconds{collector}; a collector that does not
// apply to the host (no libdcgm nor NVML, no smartctl, no nfsd) returns
// ErrNotApplicable, which is logged at debug level and reported as
// success 0, never as a crash. A series that two collectors both produce
// (nvme and smartctl reading the same drive) is served once, from the
// collector listed first in enabled; smartctl also skips NVMe drives when
// nvme is enabled.
//
// *Handler also implements prometheus.Collector (unchecked: Describe
// sends nothing), so an agent can register it in its own registry next to
// the Go and process collectors.
//
// Every collector is split into read…() functions that touch the host
// (files under Options.ProcRoot, SysRoot and DevRoot, device ioctls, a
// command) and pure functions that turn bytes or the structures of
// github.com/prometheus/procfs into Samples. Metric names and labels come
// from models.Metrics, the vocabulary the cluster twin renders too.
package collector
