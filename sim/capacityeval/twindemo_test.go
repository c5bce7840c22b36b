package capacityeval

import (
	"flag"
	"github.com/ballast-io/ballast/cluster/report"
	"github.com/ballast-io/ballast/internal/chromium"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "regenerate docs/img/capacity-report.png from a twin report")

// TestTwinInput: a short twin run with a degrading drive gives a report
// whose at-risk list names that drive, with both pools forecast.
func TestTwinInput(t *testing.T) {
	in, err := TwinInput(4, 4, 94*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Pools) != 2 || len(r.Devices) != 88 {
		t.Errorf("pools %d, drives %d; want fast and scratch, 88 drives", len(r.Pools), len(r.Devices))
	}
	found := false
	for _, a := range r.AtRisk {
		found = found || (a.Device == "scr01/nvme2n1" && a.Kind == "drive_failure_risk")
		if a.Device != "scr01/nvme2n1" && a.Kind == "drive_failure_risk" {
			t.Errorf("healthy drive %s flagged: %s", a.Device, a.Summary)
		}
	}
	if !found {
		t.Errorf("at risk %+v; want scr01/nvme2n1 (degrading since day 2.4)", r.AtRisk)
	}
	if _, err := TwinInput(1, 4, time.Hour); err == nil {
		t.Error("a report time inside the burn-in: no error")
	}
}

// TestScreenshot regenerates docs/img/capacity-report.png: a 14-day twin
// run reported on day 12.4, rendered by headless Chromium. It runs only
// with -update-screenshot (about 15 s).
func TestScreenshot(t *testing.T) {
	if !*updateScreenshot {
		t.Skip("run with -update-screenshot to regenerate docs/img/capacity-report.png")
	}
	bin := chromium.Find(t)
	in, err := TwinInput(1, 14, 12*24*time.Hour+10*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := report.Render(dir, in); err != nil {
		t.Fatal(err)
	}
	html, err := filepath.Abs(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	chromium.Screenshot(t, bin, "file://"+html, shot, 1200, 3900)
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("../../docs/img", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("../../docs/img/capacity-report.png", b, 0o644); err != nil {
		t.Fatal(err)
	}
}
