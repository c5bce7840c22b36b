// Package analyzer holds ballast's detection and prediction algorithms. Every
// analyzer in its sub-packages is pure and deterministic: it takes typed
// samples and a `now`, carries its state in an explicit struct, does no I/O,
// reads no clock and starts no goroutines, so the same input always gives the
// same findings and scenario tests can be scripted and golden.
//
// Sub-packages:
//
//   - heavyhitter: bounded-memory streaming top-k (Space-Saving) for per-stripe heat.
//   - hotspot: DS, device, port and stripe load above a robust fair share.
//   - checkpoint: write bursts, their period (DFT + autocorrelation) and the next window.
//   - workload: per client group window labels (training-read, checkpoint, ...).
//   - starvation: idle GPU-seconds attributed to the storage subject that caused them.
//   - drivehealth, capacity: failing drives and fill forecasts (see their own docs).
//
// docs/analyzers.md describes each method, its options and defaults, and the
// findings it emits.
package analyzer
