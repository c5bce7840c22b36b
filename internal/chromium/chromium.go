// Package chromium runs headless Chromium for tests that must see a page as
// a browser renders it (the capacity report, the console). It is a test
// helper shared by several packages, not product code.
package chromium

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Find returns the Chromium binary. When it is missing and the test runs as
// root it installs the Debian package (apt-get install -y chromium), unless
// BALLAST_NO_CHROMIUM_INSTALL is set (CI images that must not install
// packages set it, and then the test skips).
func Find(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("BALLAST_NO_CHROMIUM_INSTALL") != "" {
		t.Skip("chromium is not installed and BALLAST_NO_CHROMIUM_INSTALL is set; install the Debian package chromium to run the browser test")
	}
	if os.Geteuid() != 0 {
		t.Skip("chromium is not installed and the test is not root, so it cannot apt-get install it; install the Debian package chromium to run the browser test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "apt-get", "install", "-y", "chromium").CombinedOutput(); err != nil {
		t.Skipf("cannot install chromium (apt-get install -y chromium): %v\n%s", err, Tail(out))
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Skipf("chromium still not found after installing it: %v", err)
	}
	return p
}

// Tail returns the last 2,000 bytes of b, for error messages.
func Tail(b []byte) []byte {
	if len(b) > 2000 {
		return b[len(b)-2000:]
	}
	return b
}

// Flags are the command-line flags every headless run uses: no sandbox (tests
// run as root), no GPU, and none of the background connections a closed
// network refuses.
func Flags(userDataDir string) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--hide-scrollbars", "--user-data-dir=" + userDataDir}
}

// Screenshot renders url (file:// or http://) with headless Chromium into a
// PNG of w × h pixels.
func Screenshot(t testing.TB, bin, url, pngPath string, w, h int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append(Flags(t.TempDir()), "--window-size="+strconv.Itoa(w)+","+strconv.Itoa(h), "--screenshot="+pngPath, url)
	if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, Tail(out))
	}
}

// DumpDOM loads url, runs its scripts (waiting up to budget of virtual time)
// and returns the serialised DOM.
func DumpDOM(t testing.TB, bin, url string, budget time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append(Flags(t.TempDir()), "--virtual-time-budget="+strconv.FormatInt(budget.Milliseconds(), 10), "--dump-dom", url)
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	return string(out)
}
