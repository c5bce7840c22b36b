//go:build long

package main

import "time"

// overloadFor is how long TestOverload overloads the mds in make test-long.
const overloadFor = 10 * time.Minute
