package report

import (
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/ballast-io/ballast/internal/chromium"
)

// TestBrowserRender renders report.html with headless Chromium, once
// scrolled to each plot (a #plot-… fragment, window one plot high), and
// checks that each plot is drawn and not empty: enough pixels of the
// interval band's colour and of the history line's colour. A last
// screenshot of the whole page checks the page is not blank.
func TestBrowserRender(t *testing.T) {
	bin := chromium.Find(t)
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
		chromium.Screenshot(t, bin, "file://"+html+"#"+id, shot, 1200, 560)
		band, hist, _ := countPixels(t, shot)
		t.Logf("%s: band %d px, history %d px", id, band, hist)
		if band < 2000 || hist < 300 {
			t.Errorf("%s: band %d and history %d pixels; want ≥ 2000 and ≥ 300 (plot drawn, not empty)", id, band, hist)
		}
	}
	whole := filepath.Join(dir, "page.png")
	chromium.Screenshot(t, bin, "file://"+html, whole, 1200, 1600)
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
