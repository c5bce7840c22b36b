package testkit

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// OwnProcess runs the calling test again in a child process of the test
// binary and reports whether the caller is that child, which goes on with
// the test; the parent returns false once the child passed (it fails or
// skips as the child did). The embedded store can be opened once per
// process, so every test that starts an mds or a demo in-process and
// shares its package with another such test runs in its own.
func OwnProcess(t *testing.T) bool {
	t.Helper()
	const env = "BALLAST_OWN_PROCESS_TEST"
	if os.Getenv(env) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), env+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s (in its own process): %v\n%s", t.Name(), err, out)
	}
	if i := strings.Index(string(out), "--- SKIP"); i >= 0 {
		t.Skip(strings.TrimSpace(string(out[i:])))
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s (in its own process) did not pass:\n%s", t.Name(), out)
	}
	if testing.Verbose() {
		t.Log(string(out))
	}
	return false
}
