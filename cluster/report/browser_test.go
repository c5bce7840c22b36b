package report

import (
	"context"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// chromium finds the Chromium binary. When it is missing and the test runs
// as root it installs the Debian package (apt-get install -y chromium),
// unless BALLAST_NO_CHROMIUM_INSTALL is set (CI images that must not
// install packages set it, and then the test skips).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("BALLAST_NO_CHROMIUM_INSTALL") != "" {
		t.Skip("chromium is not installed and BALLAST_NO_CHROMIUM_INSTALL is set; install the Debian package chromium to run the browser-render test")
	}
	if os.Geteuid() != 0 {
		t.Skip("chromium is not installed and the test is not root, so it cannot apt-get install it; install the Debian package chromium to run the browser-render test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "apt-get", "install", "-y", "chromium").CombinedOutput(); err != nil {
		t.Skipf("cannot install chromium (apt-get install -y chromium): %v\n%s", err, tail(out))
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Skipf("chromium still not found after installing it: %v", err)
	}
	return p
}

func tail(b []byte) []byte {
	if len(b) > 2000 {
		return b[len(b)-2000:]
	}
	return b
}

// screenshot renders the HTML file with headless Chromium into a PNG.
func screenshot(t *testing.T, bin, html, pngPath string, w, h int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--hide-scrollbars", "--user-data-dir="+t.TempDir(),
		"--window-size="+strconv.Itoa(w)+","+strconv.Itoa(h), "--screenshot="+pngPath, "file://"+html)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, tail(out))
	}
}

// TestBrowserRender renders report.html with headless Chromium, once
// scrolled to each plot (a #plot-… fragment, window one plot high), and
// checks that each plot is drawn and not empty: enough pixels of the
// interval band's colour and of the history line's colour. A last
// screenshot of the whole page checks the page is not blank.
func TestBrowserRender(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	in := syntheticInput()
	if err := Render(dir, in); err != nil {
		t.Fatal(err)
	}
	html, err := filepath.Abs(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"plot-pool-fast", "plot-pool-cold", "plot-cluster-cluster"} {
		shot := filepath.Join(dir, id+".png")
		screenshot(t, bin, html+"#"+id, shot, 1200, 560)
		band, hist, _ := countPixels(t, shot)
		t.Logf("%s: band %d px, history %d px", id, band, hist)
		if band < 2000 || hist < 300 {
			t.Errorf("%s: band %d and history %d pixels; want ≥ 2000 and ≥ 300 (plot drawn, not empty)", id, band, hist)
		}
	}
	whole := filepath.Join(dir, "page.png")
	screenshot(t, bin, html, whole, 1200, 1600)
	if _, _, ink := countPixels(t, whole); ink < 50000 {
		t.Errorf("only %d non-white pixels in the page; it looks blank", ink)
	}
}

// countPixels counts pixels of the band colour, of the history colour and
// not white in a PNG.
func countPixels(t *testing.T, path string) (band, hist, ink int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("cannot decode screenshot %q: %v", path, err)
	}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := img.At(x, y)
			switch {
			case near(c, colorBand, 6):
				band++
			case near(c, colorHistory, 40):
				hist++
			}
			if !near(c, color.RGBA{255, 255, 255, 255}, 8) {
				ink++
			}
		}
	}
	return band, hist, ink
}

func near(c color.Color, ref color.RGBA, tol int) bool {
	r, g, b, _ := c.RGBA()
	d := func(x uint32, y uint8) int {
		v := int(x>>8) - int(y)
		if v < 0 {
			return -v
		}
		return v
	}
	return d(r, ref.R) <= tol && d(g, ref.G) <= tol && d(b, ref.B) <= tol
}
