//go:build !long

package main

import "time"

// overloadFor is how long TestOverload overloads the mds in make test.
const overloadFor = time.Minute
