//go:build !unix

package ingest

// cpuTime is not measured here: BenchmarkIngestPath's cpu-ns/sample reads 0.
func cpuTime() int64 { return 0 }
