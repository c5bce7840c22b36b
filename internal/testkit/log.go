package testkit

import (
	"bytes"
	"strings"
	"sync"
)

// CountLines counts the lines of s that contain every one of substrs.
func CountLines(s string, substrs ...string) int {
	n := 0
next:
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range substrs {
			if !strings.Contains(l, sub) {
				continue next
			}
		}
		n++
	}
	return n
}

// LogBuffer is a bytes.Buffer safe for a logger writing from several
// goroutines while the test reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
