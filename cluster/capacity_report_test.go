package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// fsQuerier answers the capacity report's two queries with three days of
// a filesystem filling at 1 % of 10 TB a day on two data servers.
type fsQuerier struct{}

func (fsQuerier) QueryRange(_ context.Context, expr string, start, end time.Time, step time.Duration) ([]storage.Series, error) {
	const size = 10e12
	var out []storage.Series
	for _, node := range []string{"ds00", "ds01"} {
		s := storage.Series{Labels: []models.Label{{Name: "node", Value: node}, {Name: "device", Value: "nvme0n1"}}}
		for t := start; !t.After(end); t = t.Add(step) {
			if t.Before(end.Add(-72 * time.Hour)) {
				continue
			}
			v := size
			if strings.HasPrefix(expr, "max by (node, device, pool) (ballast_filesystem_size_bytes{role=\"ds\"} -") {
				v = size * (0.5 + 0.01*end.Sub(t).Hours()/-24 + 0.03)
			}
			s.Timestamps = append(s.Timestamps, t.UnixMilli())
			s.Values = append(s.Values, v)
		}
		out = append(out, s)
	}
	return out, nil
}

func TestCapacityReportStageWritesOnSchedule(t *testing.T) {
	j, err := storage.OpenJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	dir := filepath.Join(t.TempDir(), "reports")
	st := &CapacityReportStage{Store: fsQuerier{}, Journal: j, Dir: dir, Every: 24 * time.Hour}
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	if _, err := st.Run(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err == nil {
		t.Fatal("report written at start; want the first one an hour later")
	}
	if _, err := st.Run(context.Background(), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.html", "report.md", "report.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v (%d bytes)", f, err, len(b))
		}
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if !strings.Contains(string(html), "<svg") || !strings.Contains(string(html), "ds00") {
		t.Errorf("report.html lacks plots or the data servers")
	}
}
