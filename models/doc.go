// Package models is ballast's shared vocabulary: samples and labels, findings,
// actions and the names of the metrics that agents, the cluster twin and the
// analyzers agree on. It holds no logic beyond validation, and every other
// ballast package may import it.
package models
