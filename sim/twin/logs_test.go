package twin

import (
	"math"
	"strings"
	"testing"
)

const logsScenario = `
name: logs
topology:
  data_servers: [{count: 4, drives: 4, pool: fast}]
  clients: [{count: 3, gpus: 8}]
datasets: [{name: d, pool: fast, files: 64, file_size_mb: 1000}]
workloads:
  - {name: j, kind: training, clients: gpu, dataset: d, samples_per_sec: 1000, bytes_per_sample: 200000%s}
`

// TestTrainingLogs: each node of a training job appends log_kbps to its
// own one-component log file and its NFS client writes it back every
// log_flush, whatever its phase; log_kbps 0 writes nothing; the drive the
// log lands on sees those writes; a log file is never busy for the mover.
func TestTrainingLogs(t *testing.T) {
	tw := build(t, strings.Replace(logsScenario, "%s", ", log_kbps: 40, log_flush: 10s", 1))
	const secs = 300
	tw.Run(secs)
	logDevs := map[int32]float64{}
	for _, name := range []string{"gpu00", "gpu01", "gpu02"} {
		f := tw.findFile("j/logs/" + name + ".log")
		if f < 0 {
			t.Fatalf("no log file for %s", name)
		}
		if n := tw.files[f].n; n != 1 {
			t.Errorf("%s's log file has %d components; want 1", name, n)
		}
		_, comps, err := tw.FileLayout(tw.files[f].name)
		if err != nil || comps[0].Busy {
			t.Errorf("%s's log file: busy %v, err %v; a log is never busy for the mover", name, comps, err)
		}
		logDevs[tw.stripes[tw.files[f].first].dev] += tw.stripes[tw.files[f].first].bytes
	}
	for i := range tw.cli {
		c := &tw.cli[i]
		// one writeback every 10 s of 10 s of appends: 29 or 30 of them,
		// the last up to 10 s of appends still dirty
		if c.wrBytes < 40e3*(secs-10) || c.wrBytes > 40e3*secs {
			t.Errorf("%s wrote %.0f bytes back in %d s; want 40 kB/s less at most one writeback", c.name, c.wrBytes, secs)
		}
		if c.wrOps < secs/10-1 || c.wrOps > secs/10 {
			t.Errorf("%s: %.0f writes; want one per 10 s writeback", c.name, c.wrOps)
		}
	}
	total := 0.0
	for d := range tw.dev {
		if tw.dev[d].wrBytes > 0 && logDevs[int32(d)] == 0 {
			t.Errorf("%s: %.0f bytes written with no log on it", tw.dev[d].name, tw.dev[d].wrBytes)
		}
		total += tw.dev[d].wrBytes
	}
	held := 0.0
	for _, b := range logDevs {
		held += b
	}
	if math.Abs(total-held) > 1 {
		t.Errorf("drives wrote %.0f bytes, log files hold %.0f", total, held)
	}

	quiet := build(t, strings.Replace(logsScenario, "%s", ", log_kbps: 0", 1))
	quiet.Run(60)
	for i := range quiet.cli {
		if quiet.cli[i].wrBytes != 0 {
			t.Errorf("log_kbps 0: %s wrote %.0f bytes", quiet.cli[i].name, quiet.cli[i].wrBytes)
		}
	}
	def := build(t, strings.Replace(logsScenario, "%s", "", 1))
	def.Run(60)
	if w := def.cli[0].wrBytes; w < DefaultLogKBps*1e3*45 || w > DefaultLogKBps*1e3*60 {
		t.Errorf("default logs: %s wrote %.0f bytes in 60 s; want about %d kB/s", def.cli[0].name, w, DefaultLogKBps)
	}
}

// TestLogsOnlyForTraining: log fields on other kinds, and out-of-range
// values, are refused by name.
func TestLogsOnlyForTraining(t *testing.T) {
	for _, c := range []struct{ extra, field string }{
		{", log_kbps: -1", "log_kbps"},
		{", log_flush: 0.5s", "log_flush"},
		{", log_flush: 1h", "log_flush"},
	} {
		_, err := ParseScenario(strings.NewReader(strings.Replace(logsScenario, "%s", c.extra, 1)), "t")
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: got %v; want an error naming %s", c.extra, err, c.field)
		}
	}
	y := `
name: inf
topology:
  data_servers: [{count: 2, drives: 2}]
  clients: [{count: 1, gpus: 0}]
datasets: [{name: d, pool: default, files: 4, file_size_mb: 100}]
workloads:
  - {name: s, kind: inference, clients: gpu, dataset: d, log_kbps: 10}
`
	if _, err := ParseScenario(strings.NewReader(y), "t"); err == nil || !strings.Contains(err.Error(), "log_kbps") {
		t.Errorf("inference with log_kbps: got %v; want an error naming log_kbps", err)
	}
}
