//go:build long

package main

// crashKills is how many times TestFilesDriverCrashSafety kills the mds in
// make test-long.
const crashKills = 50
