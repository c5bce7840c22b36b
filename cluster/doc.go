// Package cluster wires ballast together per role: configuration, the HTTP
// server every role runs, and the one mds assembly (NewMDS) that `ballast
// mds`, the demo and eval share. The pipeline runtime is in
// cluster/pipeline, the analysis stages in cluster/analysis, the capacity
// report in cluster/report; the cluster twin is in sim/twin.
package cluster
