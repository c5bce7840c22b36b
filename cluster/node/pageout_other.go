//go:build !linux

package node

// ReleaseExecutablePages is Linux-only (MADV_PAGEOUT); elsewhere it does
// nothing and returns 0.
func ReleaseExecutablePages() int64 { return 0 }
