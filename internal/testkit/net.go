// Package testkit holds helpers shared by tests of several packages: peers
// that misbehave as real ones do, and log inspection.
package testkit

import (
	"net"
	"sync"
	"testing"
)

// HangingListener listens on a free loopback port, accepts every
// connection and never answers, like an agent stuck in a hung ioctl. It
// returns the address; the listener and its connections close when the
// test ends.
func HangingListener(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}
