package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/ballast-io/ballast/cluster"
)

// BenchmarkMDSIngest runs the mds role in this process (cluster.MDS with
// its defaults, the code `ballast mds` runs) on a loopback port and pushes
// the 10k-series dataset through it over HTTP, as benchall does, so that
// `go test -cpuprofile` shows where the server spends its time (the mds
// binary has no profiling endpoint):
//
//	go test -run '^$' -bench MDSIngest -benchtime 1x -cpuprofile cpu.prof -o benchall.test ./bench/cmd/benchall
//	go tool pprof -top -cum -focus 'conn..serve' benchall.test cpu.prof
//
// The client runs in the same process; focusing on net/http's (*conn).serve
// leaves only the server side. VictoriaMetrics allows one embedded store per
// process, so both formats share one mds, import first.
func BenchmarkMDSIngest(b *testing.B) {
	dir := b.TempDir()
	cfg := cluster.DefaultMDSConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = dir
	m := cluster.NewMDS(cfg, cluster.Runtime{}, "bench", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := m.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Stop(ctx); err != nil {
			b.Error(err)
		}
		os.RemoveAll(dir)
	}()
	base := "http://" + m.Addr()
	d := datasets(false, time.Now())[0]
	p, err := d.render()
	if err != nil {
		b.Fatal(err)
	}
	samples := d.BatchSamples()
	c := newClient(2)
	rwHeaders := map[string]string{"Content-Type": "application/x-protobuf"} // ballast refuses Content-Encoding: snappy
	for _, tc := range []struct {
		name   string
		path   string
		hdr    map[string]string
		bodies [][]byte
	}{
		{"import_10k", formatImport.Path, formatImport.Headers, p.text},
		{"remote_write_10k", formatRemoteWrite.Path, rwHeaders, p.rw},
	} {
		b.Run(tc.name, func(b *testing.B) {
			total := 0
			for b.Loop() {
				n, _, _, err := pushAll(context.Background(), c, base+tc.path, tc.hdr, tc.bodies, samples, 2)
				if err != nil {
					b.Fatal(err)
				}
				total += n
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "samples/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(total), "ns/sample")
		})
	}
}
