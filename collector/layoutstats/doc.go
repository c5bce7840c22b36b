// Package layoutstats ingests RFC 8435 LAYOUTSTATS reports on the mds: the
// cumulative ff_iostats4 counters that pNFS flex-files clients keep per
// layout stateid, device, data server and file handle. It turns them into
// per-stripe deltas for the analyzers (through StripeSink) and into
// per-device and per-data-server rates (through Appender), and serves
// POST /api/v1/layoutstats. The JSON format is in docs/layoutstats.md.
//
// The logic is deterministic: every function that needs the time takes it
// as an argument, and rates come from the reports' own durations, so the
// cluster twin can drive it on simulated time.
package layoutstats
