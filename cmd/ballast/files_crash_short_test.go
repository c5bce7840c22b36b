//go:build !long

package main

// crashKills is how many times TestFilesDriverCrashSafety kills the mds in
// make test (make test-long: 50).
const crashKills = 10
