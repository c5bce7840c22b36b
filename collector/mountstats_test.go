package collector

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestMountstatsLongRDMALine: procfs v0.21.1 panics on an "xprt: rdma"
// line with more numbers than it reads (31), which a kernel adding RDMA
// transport counters would print. The collector must answer with an error
// that names the line, not crash the agent, and the same file with the
// line as today's kernels print it (27 numbers, the fixture's) must parse.
func TestMountstatsLongRDMALine(t *testing.T) {
	b, err := os.ReadFile("testdata/fixtures/procfs/mountstats/pcp_mountstats-el8.7-rdma.qa")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	at := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "xprt:") && strings.Contains(l, "rdma") {
			at = i
			break
		}
	}
	if at < 0 {
		t.Fatal("the fixture has no xprt: rdma line")
	}
	run := func(content string) ([]Sample, error) {
		proc := fakeRoot(t, map[string]string{"self": "->1", "1/mountstats": content})
		return collectWith(t, "mountstats", Options{ProcRoot: proc})
	}
	if ss, err := run(string(b)); err != nil || len(ss) == 0 {
		t.Fatalf("the fixture as it is: %d samples, error %v", len(ss), err)
	}
	long := append([]string(nil), lines...)
	long[at] += " 0 0 0 0 0 0 0 0" // 27 + 8 = 35 numbers
	ss, err := run(strings.Join(long, "\n"))
	if err == nil {
		t.Fatalf("35-number RDMA line: no error, %d samples", len(ss))
	}
	want := "line " + strconv.Itoa(at+1) + ", an RDMA transport line with 35 numbers (it reads at most 31)"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the line: want %q in it", err, want)
	}
}
