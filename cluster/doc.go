// Package cluster wires ballast together per role: configuration, the mds
// HTTP server (query API, ingest, self-metrics, health), the scraper of
// agents, and the pipeline runtime that runs sources, analyzers and
// actuators on a clock that may be real or simulated. The cluster twin lives
// in cluster/twin.
package cluster
