//go:build !long

package main

// crashKills is how many times TestFilesDriverCrashSafety kills the mds in
// make test (make test-long: 50).
const crashKills = 10

// failoverKills is how many times TestFilesDriverFailover kills the
// leader in make test (make test-long: 30).
const failoverKills = 10

// restripeKills is how many times TestFilesDriverRestripeCrashSafety
// kills the mds inside restripes in make test (make test-long: 50).
const restripeKills = 10

// execCrashKills is how many times TestExecDriverCrashSafety kills the
// mds in make test (make test-long: 30).
const execCrashKills = 6

// execRestripeKills is how many times TestExecDriverRestripeCrashSafety
// kills the mds inside restripes in make test (make test-long: 30).
const execRestripeKills = 5
