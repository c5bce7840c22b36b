//go:build long

package main

// crashKills is how many times TestFilesDriverCrashSafety kills the mds in
// make test-long.
const crashKills = 50

// failoverKills is how many times TestFilesDriverFailover kills the
// leader in make test-long.
const failoverKills = 30

// restripeKills is how many times TestFilesDriverRestripeCrashSafety
// kills the mds inside restripes in make test-long.
const restripeKills = 50

// execCrashKills is how many times TestExecDriverCrashSafety kills the
// mds in make test-long.
const execCrashKills = 30

// execRestripeKills is how many times TestExecDriverRestripeCrashSafety
// kills the mds inside restripes in make test-long.
const execRestripeKills = 30
