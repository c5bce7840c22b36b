package node

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ReleaseExecutablePages asks the kernel to reclaim the clean, file-backed
// pages of ballast's own executable that are resident now (MADV_PAGEOUT,
// Linux 5.4+). The single ballast binary carries the mds's storage engine
// and query engine; an agent never runs that code, but package
// initialisation touches it, and those pages would otherwise stay in its
// RSS. Pages still in use fault back in from the page cache on demand.
// It returns the number of bytes advised; errors (older kernels) are ignored.
func ReleaseExecutablePages() int64 {
	exe, err := os.Executable()
	if err != nil {
		return 0
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0
	}
	defer f.Close()
	var total int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		// A raw syscall: unix.Madvise wants a []byte over this range, which
		// Go cannot form from an address without unsafe.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT); errno == 0 {
			total += int64(end - start)
		}
	}
	return total
}
