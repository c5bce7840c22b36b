package layoutstats

import (
	"fmt"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// io describes one direction's cumulative counters for a test report.
type ctr struct {
	ops, bytes, notDelivered uint64
	inflight                 uint64 // requested but not yet completed
	busy, completion         time.Duration
}

func lat(c ctr) models.FFIOLatency4 {
	return models.FFIOLatency4{
		OpsRequested:            c.ops + c.inflight,
		BytesRequested:          c.bytes + c.notDelivered,
		OpsCompleted:            c.ops,
		BytesCompleted:          c.bytes,
		BytesNotDelivered:       c.notDelivered,
		TotalBusyTime:           models.NFSTime4FromDuration(c.busy),
		AggregateCompletionTime: models.NFSTime4FromDuration(c.completion),
	}
}

// rep builds a valid report for stripe n (device n%4, DS n%2) with the
// given cumulative counters over dur.
func rep(n int, dur time.Duration, rd, wr ctr) models.FFIOStats4 {
	return models.FFIOStats4{
		Offset:   uint64(n) << 20,
		Length:   1 << 20,
		Stateid:  models.Stateid4{Seqid: 1, Other: fmt.Sprintf("%024x", n)},
		Read:     models.IOInfo4{Count: rd.ops, Bytes: rd.bytes},
		Write:    models.IOInfo4{Count: wr.ops, Bytes: wr.bytes},
		DeviceID: fmt.Sprintf("%032x", 0xd0+n%4),
		LayoutUpdate: models.FFLayoutUpdate4{
			Addr:     models.NetAddr4{NetID: "tcp", Addr: fmt.Sprintf("192.0.2.%d.8.1", 10+n%2)},
			FHandle:  fmt.Sprintf("01%06x", n),
			Read:     lat(rd),
			Write:    lat(wr),
			Duration: models.NFSTime4FromDuration(dur),
		},
	}
}

func batch(client string, rs ...models.FFIOStats4) *models.LayoutStatsBatch {
	return &models.LayoutStatsBatch{ClientID: client, Reports: rs}
}

func newIngester(t testing.TB, o Options) *Ingester {
	t.Helper()
	in, err := NewIngester(o)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func mustIngest(t testing.TB, in *Ingester, now time.Time, b *models.LayoutStatsBatch) Result {
	t.Helper()
	res, err := in.Ingest(now, b)
	if err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	return res
}

// sampleValue returns the value of the sample with name and label value,
// op "read" unless the metric has no op label.
func sampleValue(t testing.TB, ss []models.Sample, name, label, op string) (float64, bool) {
	t.Helper()
	for _, s := range ss {
		if s.Name != name {
			continue
		}
		if s.Labels[0].Value == label && (op == "" || s.Label(models.LabelLayoutStatsOp) == op) {
			return s.Value, true
		}
	}
	return 0, false
}
