// Package twin is ballast's cluster twin: a deterministic physical
// simulation of a pNFS (NFSv4.2 flex-files) cluster feeding GPU nodes. It
// is the embedded default behind `ballast demo` and the yardstick every
// analyzer and actuator is scored against. Everything it produces is
// simulated, and says so (drive and GPU models are named "simulated-…").
//
// A scenario file (YAML, see docs/scenarios.md; eight are shipped inside
// the binary) gives the topology, the workloads and the faults. Each tick
// (1 s of simulated time by default) the twin turns what every stream wants
// into demand on stripes, devices, data-server NICs, switch ports and client
// NICs; every resource serves up to its limit, sharing proportionally when
// oversubscribed; latency rises with utilisation along an M/M/1 curve;
// prefetch queues fill or drain, and GPUs run only when their queue has
// data. GPU utilisation is an output, and every idle GPU-second is
// attributed to its cause in the ground truth.
//
// Use:
//
//	sc, err := twin.LoadScenario("mixed")        // a shipped name, "generated:N" or a file path
//	tw, err := twin.New(sc, seed, start)         // start: the simulated clock's origin
//	for tw.Elapsed() < sc.Duration {
//		tw.Step()                                 // one tick
//		// scrape: for _, n := range tw.Nodes() { tw.RenderNode(n.Name, w) }
//		// LAYOUTSTATS: tw.LayoutStats() → POST /api/v1/layoutstats
//		// act: tw.Apply(action)
//	}
//	tw.WriteTruth(f)                              // truth.jsonl, for scoring only
//	stats := tw.GPUStats()                        // utilisation, idle seconds by cause
//
// Telemetry leaves the twin only in the formats real agents produce:
// RenderNode writes the Prometheus exposition a node's ballast agent would
// serve (from the metric table in models, byte for byte as
// collector.WriteText encodes it), and
// LayoutStats returns RFC 8435 ff_iostats4 batches in the models shape.
// The raw sources are available too (WriteDiskstats, WriteNetDev,
// WriteMountstats, Smart, GPUs); a test parses the raw /proc files with the
// real collectors and checks that they yield exactly the series RenderNode
// writes. Counters are cumulative, wrap at 32 bits where a scenario says so,
// and restart when a lost data server returns; a data server that is down
// cannot be scraped (ErrNodeDown).
//
// Ground truth (Truth, WriteTruth, GPUStats, Ports) is for scoring and must
// never be fed to analyzers.
//
// Determinism: the same scenario and seed give byte-identical telemetry and
// truth. PCG sources drive all randomness (one for the workloads and
// placement, one per fault for its noise, so a fault's history does not
// change with what the workloads or actions drew), nothing iterates a map
// into output, and nothing reads the wall clock. A Twin is not safe for
// concurrent use.
package twin
