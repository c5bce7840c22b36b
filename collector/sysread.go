package collector

import (
	"errors"
	"io/fs"

	"golang.org/x/sys/unix"
)

// readSysFile reads a small /proc or /sys file with plain open and read
// system calls. os.ReadFile costs three more per file (fstat, and fcntl
// plus epoll registration for the runtime poller), which a scrape of 24
// drives pays about a hundred times; procfs' own reader (internal to
// prometheus/procfs, so not importable) makes the same cut. Errors are
// *fs.PathError like os.ReadFile's.
func readSysFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for errors.Is(err, unix.EINTR) {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}
