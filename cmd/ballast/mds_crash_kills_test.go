//go:build !long

package main

// mdsCrashKills is how many times TestMDSCrashLosesNothingAcknowledged kills
// the mds per durability mode in make test (100 under the long tag).
const mdsCrashKills = 10
