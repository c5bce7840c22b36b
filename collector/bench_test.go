package collector

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// dsTree builds the fake tree of bench/agent-overhead.sh: 24 NVMe
// controllers (their /dev nodes are regular files, so the SMART ioctl
// fails fast), 24 namespaces in diskstats, 8 NICs and nfsd.
func dsTree(tb testing.TB) Options {
	proc, sys, dev := map[string]string{}, map[string]string{}, map[string]string{}
	var disk, net strings.Builder
	for i := 0; i < 24; i++ {
		c, n := fmt.Sprintf("nvme%d", i), fmt.Sprintf("nvme%dn1", i)
		sys["class/nvme/"+c+"/model"] = "SAMSUNG MZQL23T8HCLS-00A07\n"
		sys["class/nvme/"+c+"/serial"] = fmt.Sprintf("S64HNE0R%04d\n", i)
		sys["class/nvme/"+c+"/"+n+"/size"] = "7501476528\n"
		dev[c] = ""
		fmt.Fprintf(&disk, " 259 %d %s 1%d3456 0 2%d4567890 77 9876 0 12345678 55 0 90 13 0 0 0 0 1 2\n", i, n, i, i)
	}
	net.WriteString("Inter-|   Receive |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n")
	for i := 0; i < 8; i++ {
		fmt.Fprintf(&net, "  ens%d: 874354587 1036395 0 3 0 0 0 12 563352563 732147 0 0 0 0 0 0\n", i)
	}
	proc["diskstats"], proc["net/dev"] = disk.String(), net.String()
	proc["net/rpc/nfsd"] = string(readFixture(tb, "procfs/nfsd/node-exporter_nfsd"))
	return Options{ProcRoot: fakeRootTB(tb, proc), SysRoot: fakeRootTB(tb, sys), DevRoot: fakeRootTB(tb, dev), CacheTTL: -1, SmartctlPath: "/nonexistent/smartctl"}
}

// BenchmarkScrapeDS measures one /metrics scrape of the ds collectors over
// the fake tree, cache off (CPU and allocations per scrape).
func BenchmarkScrapeDS(b *testing.B) {
	h, err := NewHandler(dsTree(b), DefaultEnabled("ds"))
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		io.Copy(io.Discard, rec.Body)
	}
}
