package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage/ingest"
)

// SelfJob is the job label of the mds's own metrics in its store.
const SelfJob = "ballast"

// selfGlobalPrefixes are the families of the process-wide registry (the
// storage engine, the scraper, the Go runtime) the mds keeps of itself:
// what the "ballast itself" dashboard shows (ingest, scrape health,
// storage, memory), not the ~500 internal series it also serves.
var selfGlobalPrefixes = []string{
	"vm_rows_added_to_storage_total",
	"vm_new_timeseries_created_total",
	"vm_rows_ignored_total",
	"vm_data_size_bytes",
	"vm_free_disk_space_bytes",
	"vm_promscrape_targets",
	"vm_promscrape_scrapes_total",
	"vm_promscrape_scrapes_failed_total",
	"vm_promscrape_scrape_duration_seconds",
	"process_resident_memory_bytes",
	"process_cpu_seconds_total",
	"go_goroutines",
}

// selfSource writes the mds's own metrics into its store at every pipeline
// round, as if it scraped its own /metrics (job="ballast"), so that
// dashboards on the stock Prometheus data source see ingest, pipeline tick
// time and storage without a second scraper.
type selfSource struct {
	set *metrics.Set
	// global writes the process-wide registry: the store's engine metrics
	// (storage.MetricsWriter; none for a remote store, whose engine runs
	// elsewhere) and the process's own.
	global   func(w io.Writer)
	limits   func(now time.Time) ingest.Limits
	instance string
	buf      bytes.Buffer
	b        ingest.Batch
}

func (s *selfSource) Name() string { return "self" }

func (s *selfSource) Collect(_ context.Context, now time.Time) ([]models.Sample, error) {
	s.buf.Reset()
	s.b.Reset()
	var own, global bytes.Buffer
	s.set.WritePrometheus(&own)
	s.global(&global)
	s.keep(&own, nil)
	s.keep(&global, selfGlobalPrefixes)
	lim := s.limits(now)
	// The mds's own counters carry no timestamps: they are read now.
	lim.DefaultTimestamp = now.UnixMilli()
	lim.ExtraLabels = []models.Label{{Name: "job", Value: SelfJob}, {Name: "instance", Value: s.instance}, {Name: "role", Value: "mds"}}
	if err := ingest.ParseText(s.buf.String(), &lim, &s.b); err != nil {
		return nil, fmt.Errorf("cannot parse the mds's own metrics: %w", err)
	}
	return s.b.Samples(), nil
}

// keep copies the sample lines of exposition text to s.buf: those of the
// families in prefixes (all when nil), without the NaN values a summary
// has before its first observation (the store refuses NaN).
func (s *selfSource) keep(text *bytes.Buffer, prefixes []string) {
	sc := bufio.NewScanner(text)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.HasSuffix(line, " NaN") {
			continue
		}
		ok := prefixes == nil
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) && len(line) > len(p) && (line[len(p)] == ' ' || line[len(p)] == '{') {
				ok = true
				break
			}
		}
		if ok {
			s.buf.WriteString(line)
			s.buf.WriteByte('\n')
		}
	}
}
