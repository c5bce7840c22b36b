package layoutstats

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

// BenchmarkIngest1M ingests one million reports per iteration through the
// in-process core (validation, differencing, aggregation, samples): 50000
// stripe streams of 100 clients on 256 devices behind 32 data servers,
// reporting 20 times, in batches of 100 (one client's streams). Counters are
// advanced in place between rounds, so the time is the ingest's.
//
//	go test ./collector/layoutstats -run '^$' -bench Ingest1M -benchtime 1x
func BenchmarkIngest1M(b *testing.B) {
	const (
		streams   = 50000
		rounds    = 20
		batchSize = 100
		total     = streams * rounds
	)
	batches := make([]*models.LayoutStatsBatch, streams/batchSize)
	for i := range batches {
		rs := make([]models.FFIOStats4, batchSize)
		for j := range rs {
			n := i*batchSize + j
			rs[j] = rep(n, time.Minute, ctr{}, ctr{})
			rs[j].DeviceID = fmt.Sprintf("%032x", n%256)
			rs[j].LayoutUpdate.Addr.Addr = fmt.Sprintf("192.0.2.%d.8.1", n%32)
		}
		batches[i] = batch(fmt.Sprintf("client-%03d", i%100), rs...)
	}
	var (
		ms0, ms1 runtime.MemStats
		samples  int
	)
	b.ReportAllocs()
	b.ResetTimer()
	runtime.ReadMemStats(&ms0)
	for it := 0; it < b.N; it++ {
		in, err := NewIngester(Options{})
		if err != nil {
			b.Fatal(err)
		}
		now := t0
		for round := 1; round <= rounds; round++ {
			for _, bt := range batches {
				for j := range bt.Reports {
					advance(&bt.Reports[j], round)
				}
				now = now.Add(time.Minute / (streams / batchSize))
				res, err := in.Ingest(now, bt)
				if err != nil {
					b.Fatal(err)
				}
				samples += len(res.Samples)
			}
		}
		// Reset the counters for the next iteration.
		for _, bt := range batches {
			for j := range bt.Reports {
				advance(&bt.Reports[j], 0)
			}
		}
	}
	runtime.ReadMemStats(&ms1)
	b.StopTimer()
	reports := float64(total) * float64(b.N)
	b.ReportMetric(reports/b.Elapsed().Seconds(), "reports/s")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/reports, "allocs/report")
	b.ReportMetric(float64(samples)/float64(b.N), "samples/op")
}

// advance sets a report's cumulative counters to those after round
// minutes of 100 reads and 10 writes of 1 MiB per minute.
func advance(r *models.FFIOStats4, round int) {
	k := uint64(round)
	rd := ctr{ops: 100 * k, bytes: 100 << 20 * k, busy: time.Duration(k) * 20 * time.Second, completion: time.Duration(k) * 300 * time.Millisecond}
	wr := ctr{ops: 10 * k, bytes: 10 << 20 * k, busy: time.Duration(k) * 2 * time.Second, completion: time.Duration(k) * 100 * time.Millisecond}
	r.Read = models.IOInfo4{Count: rd.ops, Bytes: rd.bytes}
	r.Write = models.IOInfo4{Count: wr.ops, Bytes: wr.bytes}
	r.LayoutUpdate.Read, r.LayoutUpdate.Write = lat(rd), lat(wr)
	r.LayoutUpdate.Duration = models.NFSTime4FromDuration(time.Duration(max(k, 1)) * time.Minute)
}

// BenchmarkDecodeBatch measures the JSON side of the HTTP path: decoding
// a 100-report batch.
func BenchmarkDecodeBatch(b *testing.B) {
	rs := make([]models.FFIOStats4, 100)
	for j := range rs {
		rs[j] = rep(j, time.Minute, ctr{}, ctr{})
		advance(&rs[j], 1)
	}
	body := mustJSON(b, batch("c", rs...))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeBatch(body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "reports/s")
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	out, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
