package main

import "github.com/ballast-io/ballast/cluster/analysis"

// The demo and eval run every wired analyzer (cluster/analysis).
func init() { demoAnalysis = analysis.Build }
