//go:build long

package main

// mdsCrashKills is how many times TestMDSCrashLosesNothingAcknowledged kills
// the mds per durability mode under the long tag (make test-long).
const mdsCrashKills = 100
