package analysis

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/analyzer/drivehealth"
	"github.com/ballast-io/ballast/analyzer/starvation"
	"github.com/ballast-io/ballast/cluster/identity"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func delta(dev, ds string, dur time.Duration, readOps, readBytes, writeBytes, notDelivered uint64, completion time.Duration) models.StripeDelta {
	return models.StripeDelta{
		StripeKey: models.StripeKey{Client: "gpu00", DeviceID: dev, FileHandle: "fh"},
		DS:        ds, Duration: dur, End: t0,
		Read:  models.StripeIO{OpsCompleted: readOps, BytesCompleted: readBytes, BytesNotDelivered: notDelivered, CompletionTime: completion},
		Write: models.StripeIO{OpsCompleted: 1, BytesCompleted: writeBytes, CompletionTime: time.Second},
	}
}

func TestLoadTrackerSumsDeltasPerDeviceAndDS(t *testing.T) {
	var tr loadTracker
	ls := tr.loads([]models.StripeDelta{
		delta("d1", "10.0.0.1:2049", 10*time.Second, 100, 1000, 500, 0, 200*time.Millisecond),
		delta("d1", "10.0.0.1:2049", 5*time.Second, 100, 1000, 0, 50, 600*time.Millisecond),
		delta("d2", "10.0.0.1:2049", 10*time.Second, 0, 0, 0, 0, 0),
	}, map[string]string{"10.0.0.1:2049": "fast"})
	got := map[string]*subjectLoad{}
	for _, l := range ls {
		got[l.subject.String()] = l
	}
	d1 := got["device:d1"]
	if d1 == nil || d1.bytes != 100+50+200 || d1.ops != 10+0.1+20+0.2 || d1.notDeliveredBytes != 10 {
		t.Fatalf("device d1 %+v; want bytes 350/s, ops 30.3/s, not delivered 10/s", d1)
	}
	// Read latency only: 0.8 s over 200 reads; the writes' 1 s is left out.
	if lat := d1.latency(); math.Abs(lat-0.004) > 1e-12 {
		t.Errorf("d1 latency %v; want 0.004", lat)
	}
	if ds := got["ds:10.0.0.1:2049"]; ds == nil || ds.bytes != 350 {
		t.Errorf("ds %+v; want bytes 350/s", ds)
	}
	if d1.dirBytes != [2]float64{100 + 200, 50} || d1.pool != "fast" {
		t.Errorf("d1 per direction %v in pool %q; want reads 300/s, writes 50/s in fast", d1.dirBytes, d1.pool)
	}
	if d2 := got["device:d2"]; d2 == nil || !math.IsNaN(d2.latency()) {
		t.Errorf("d2 %+v; want listed with unknown latency", d2)
	}
	// A silent tick keeps the known subjects, at zero.
	ls = tr.loads(nil, nil)
	if len(ls) != 3 || ls[0].bytes != 0 || ls[0].pool != "fast" {
		t.Errorf("silent tick: %d loads, first %+v; want 3 at zero, still in pool fast", len(ls), ls[0])
	}
	if q := readQuorum(ls); q[peerGroup{models.SubjectDevice, "fast"}] || q[peerGroup{models.SubjectDS, "fast"}] {
		t.Errorf("quorum on a silent tick %v; want none", q)
	}
}

func TestQuorumNeedsHalfTheSubjectsBusy(t *testing.T) {
	mk := func(kind models.SubjectKind, pool string, bytes ...float64) []*subjectLoad {
		var out []*subjectLoad
		for i, b := range bytes {
			out = append(out, &subjectLoad{subject: models.Subject{Kind: kind, ID: pool + string(rune('a'+i))}, pool: pool, bytes: b, dirBytes: [2]float64{b, 0}})
		}
		return out
	}
	ls := append(mk(models.SubjectDevice, "", 5, 0, 0, 7), mk(models.SubjectDS, "", 0, 0, 1)...)
	// A checkpoint pool: written, not read.
	ck := mk(models.SubjectDevice, "ckpt", 0, 0, 0, 0)
	for _, l := range ck {
		l.bytes, l.dirBytes[1] = 9e9, 9e9
	}
	q := readQuorum(append(ls, ck...))
	if !q[peerGroup{models.SubjectDevice, ""}] || q[peerGroup{models.SubjectDS, ""}] || q[peerGroup{models.SubjectDevice, "ckpt"}] {
		t.Errorf("quorum %v; want devices (2 of 4 read) judged, DSs (1 of 3) and the written-only pool not", q)
	}
}

func series(name string, v float64, labels ...string) storage.Series {
	s := storage.Series{Name: name, Timestamps: []int64{t0.UnixMilli()}, Values: []float64{v}}
	for i := 0; i+1 < len(labels); i += 2 {
		s.Labels = append(s.Labels, models.Label{Name: labels[i], Value: labels[i+1]})
	}
	return s
}

func TestReadSmartBuildsObservations(t *testing.T) {
	ids := identity.New(nil, nil)
	ids.ObserveMount("ds03", "/export/nvme2n1", "nvme2n1") // ds04's namespace is unknown
	obs := readSmart([]storage.Series{
		series("ballast_nvme_critical_warning", 1, "node", "ds03", "device", "nvme2", "bit", "spare"),
		series("ballast_nvme_critical_warning", 1, "node", "ds03", "device", "nvme2", "bit", "reliability"),
		series("ballast_nvme_critical_warning", 0, "node", "ds03", "device", "nvme2", "bit", "temperature"),
		series("ballast_nvme_available_spare_ratio", 0.08, "node", "ds03", "device", "nvme2"),
		series("ballast_nvme_media_errors_total", 42, "node", "ds03", "device", "nvme2"),
		series("ballast_nvme_warning_temperature_seconds_total", 600, "node", "ds03", "device", "nvme2"),
		series("ballast_drive_power_on_seconds_total", 7200, "node", "ds03", "device", "nvme2"),
		series("ballast_nvme_media_errors_total", 0, "node", "ds04", "device", "nvme2"),
		series("ballast_nvme_media_errors_total", 9, "device", "nvme9"), // no node: skipped
		// An ATA drive read by smart.go (no drive temperature series) and a
		// SCSI drive read by smartctl: analysed too, not only NVMe.
		series("ballast_drive_info", 1, "node", "ds05", "device", "sda", "protocol", "ATA"),
		series("ballast_ata_attribute_raw", 304, "node", "ds05", "device", "sda", "attribute_id", "5", "attribute", "Reallocated_Sector_Ct"),
		series("ballast_ata_attribute_value", 93, "node", "ds05", "device", "sda", "attribute_id", "5", "attribute", "Reallocated_Sector_Ct"),
		series("ballast_ata_attribute_threshold", 36, "node", "ds05", "device", "sda", "attribute_id", "5", "attribute", "Reallocated_Sector_Ct"),
		series("ballast_ata_attribute_raw", 2, "node", "ds05", "device", "sda", "attribute_id", "197", "attribute", "Current_Pending_Sector"),
		series("ballast_ata_attribute_raw", 1, "node", "ds05", "device", "sda", "attribute_id", "198", "attribute", "Offline_Uncorrectable"),
		series("ballast_ata_attribute_raw", 36, "node", "ds05", "device", "sda", "attribute_id", "194", "attribute", "Temperature_Celsius"),
		series("ballast_scsi_grown_defects", 260, "node", "ds06", "device", "sdb"),
		series("ballast_scsi_uncorrected_errors_total", 535, "node", "ds06", "device", "sdb", "direction", "write"),
	}, t0, ids)
	o, ok := obs["ds03/nvme2n1"]
	if _, ok4 := obs["ds04/nvme2"]; !ok || !ok4 || len(obs) != 4 {
		t.Fatalf("observations %v; want ds03/nvme2n1, ds04/nvme2, ds05/sda and ds06/sdb", obs)
	}
	if a := obs["ds05/sda"]; a.Protocol != drivehealth.ProtocolATA || a.Reallocated != 304 || a.Pending != 2 || a.MediaErrors != 1 || a.TemperatureC != 36 {
		t.Errorf("ds05/sda %+v; want ATA with 304 reallocated, 2 pending, 1 uncorrectable, 36 °C", a)
	}
	if sc := obs["ds06/sdb"]; sc.Protocol != drivehealth.ProtocolSCSI || sc.Reallocated != 260 || sc.MediaErrors != 535 {
		t.Errorf("ds06/sdb %+v; want SCSI with 260 grown defects and 535 uncorrected errors", sc)
	}
	if o.CriticalWarning != 5 || math.Abs(o.AvailableSpare-8) > 1e-9 || o.MediaErrors != 42 || o.WarningTempMinutes != 10 || o.PowerOnHours != 2 {
		t.Errorf("ds03/nvme2n1 %+v; want warning 5 (bits 0 and 2), spare 8 %%, 42 media errors, 10 min, 2 h", o)
	}
	if !math.IsNaN(o.PercentageUsed) {
		t.Errorf("percentage used %v; want unknown", o.PercentageUsed)
	}
}

func TestReadMountCountersGroups(t *testing.T) {
	c, ra := readMountCounters([]storage.Series{
		series("ballast_nfs_client_read_bytes_total", 100, "node", "gpu00"),
		series("ballast_nfs_client_direct_read_bytes_total", 5, "node", "gpu00"),
		series("ballast_nfs_client_server_read_bytes_total", 400, "node", "gpu00"),
		series("ballast_nfs_client_write_bytes_total", 7, "node", "gpu00"),
		series("ballast_nfs_client_operations_total", 3, "node", "gpu00", "operation", "READ"),
		series("ballast_nfs_client_operations_total", 2, "node", "gpu00", "operation", "WRITE"),
		series("ballast_nfs_client_operation_execute_seconds_total", 1.5, "node", "gpu00", "operation", "READ"),
		series("ballast_nfs_client_operation_execute_seconds_total", 9, "node", "gpu00", "operation", "WRITE"),
		series("ballast_nfs_client_read_bytes_total", 10, "node", "gpu01", GroupLabel, "train"),
		series("ballast_nfs_client_read_bytes_total", 20, "node", "gpu02", GroupLabel, "train"),
		series("ballast_nfs_client_readahead_bytes", 131072, "node", "gpu01", GroupLabel, "train"),
		series("ballast_nfs_client_readahead_bytes", 1048576, "node", "gpu02", GroupLabel, "train"),
	})
	// the read-ahead is a gauge: the group's largest, not a sum or a counter
	if r := ra[models.Subject{Kind: models.SubjectJob, ID: "train"}]; r != 1048576 {
		t.Errorf("job_group train read-ahead %v; want 1048576, its mounts' largest", r)
	}
	n := c[models.Subject{Kind: models.SubjectClient, ID: "gpu00"}]
	if n != (counters{read: 105, write: 7, serverRead: 400, readOps: 3, writeOps: 2, readExec: 1.5}) {
		t.Errorf("gpu00 %+v", n)
	}
	if j := c[models.Subject{Kind: models.SubjectJob, ID: "train"}]; j.read != 30 {
		t.Errorf("job_group train %+v; want read 30 summed over its nodes", j)
	}
	// A counter reset counts the new value.
	if d := (counters{read: 5}).sub(counters{read: 100}); d.read != 5 {
		t.Errorf("reset delta %v; want 5", d.read)
	}
}

func TestCloserEndsVanishedFindings(t *testing.T) {
	var c closer
	f := models.Finding{ID: "a", Kind: "k", Start: t0, LastSeen: t0}
	g := models.Finding{ID: "b", Kind: "k", Start: t0, LastSeen: t0}
	if out := c.update(t0, []models.Finding{f, g}); len(out) != 2 {
		t.Fatalf("first tick: %d findings; want 2", len(out))
	}
	t1 := t0.Add(time.Minute)
	out := c.update(t1, []models.Finding{f})
	if len(out) != 2 || out[1].ID != "b" || !out[1].End.Equal(t1) {
		t.Fatalf("second tick %+v; want a, then b ended at %s", out, t1)
	}
	if out := c.update(t1.Add(time.Minute), nil); len(out) != 1 || out[0].ID != "a" {
		t.Errorf("third tick %+v; want only a ended (b ended once)", out)
	}
}

// TestThinDriveHistory: a long history keeps every reading of the last day,
// one an hour before that, and nothing older than the rules' windows.
func TestThinDriveHistory(t *testing.T) {
	opt := drivehealth.DefaultRuleOptions()
	var h []drivehealth.Observation
	for ts := t0; ts.Before(t0.Add(50 * 24 * time.Hour)); ts = ts.Add(10 * time.Minute) {
		h = append(h, drivehealth.NewObservation(ts, drivehealth.ProtocolNVMe))
	}
	now := h[len(h)-1].Time
	got := thinDriveHistory(h, now, opt)
	if len(got) > maxDriveHistory || len(got) == 0 {
		t.Fatalf("kept %d; want at most %d", len(got), maxDriveHistory)
	}
	if oldest := now.Sub(got[0].Time); oldest > opt.LongWindow+opt.ShortWindow {
		t.Errorf("oldest kept %s ago; want at most %s", oldest, opt.LongWindow+opt.ShortWindow)
	}
	day, older := 0, 0
	for _, o := range got {
		if now.Sub(o.Time) < 24*time.Hour {
			day++
		} else {
			older++
		}
	}
	if day != 144 || older < 35*24 || older > 37*24 {
		t.Errorf("kept %d readings of the last day and %d older; want all 144 and one an hour for 36 days", day, older)
	}
	if short := h[:10]; len(thinDriveHistory(short, now, opt)) != 10 {
		t.Error("a short history was thinned")
	}
}

// fakeQuerier answers every query with series and counts the queries.
type fakeQuerier struct {
	series  []storage.Series
	queries int
}

func (f *fakeQuerier) Query(context.Context, string, time.Time) ([]storage.Series, error) {
	f.queries++
	return f.series, nil
}

// TestDriveStageJudgesEveryProtocol: the mds stage flags a FAILED NVMe and
// an ATA drive with hundreds of reallocated sectors from their series,
// reads every tick until the first drive shows, then every DriveEvery.
func TestDriveStageJudgesEveryProtocol(t *testing.T) {
	q := &fakeQuerier{}
	a, err := New(q, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if fs, err := a.dh.Run(ctx, t0); err != nil || len(fs) != 0 {
		t.Fatalf("no drives yet: got %v, %v", fs, err)
	}
	q.series = []storage.Series{
		series("ballast_drive_info", 1, "node", "ds01", "device", "nvme0", "protocol", "NVMe"),
		series("ballast_drive_smart_healthy", 0, "node", "ds01", "device", "nvme0"),
		series("ballast_nvme_critical_warning", 1, "node", "ds01", "device", "nvme0", "bit", "volatile_backup"),
		series("ballast_drive_info", 1, "node", "ds05", "device", "sda", "protocol", "ATA"),
		series("ballast_drive_smart_healthy", 1, "node", "ds05", "device", "sda"),
		series("ballast_ata_attribute_raw", 304, "node", "ds05", "device", "sda", "attribute_id", "5"),
		series("ballast_ata_attribute_raw", 0, "node", "ds05", "device", "sda", "attribute_id", "197"),
		series("ballast_drive_info", 1, "node", "ds05", "device", "nvme1", "protocol", "NVMe"),
		series("ballast_drive_smart_healthy", 1, "node", "ds05", "device", "nvme1"),
		series("ballast_nvme_error_log_entries_total", 40, "node", "ds05", "device", "nvme1"),
		series("ballast_nvme_media_errors_total", 0, "node", "ds05", "device", "nvme1"),
	}
	fs, err := a.dh.Run(ctx, t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]models.Severity{}
	for _, f := range fs {
		if f.Kind == drivehealth.KindFailureRisk {
			got[f.Subject.ID] = f.Severity
		}
	}
	want := map[string]models.Severity{"ds01/nvme0": models.SeverityCritical, "ds05/sda": models.SeverityWarning}
	if len(got) != len(want) || got["ds01/nvme0"] != want["ds01/nvme0"] || got["ds05/sda"] != want["ds05/sda"] {
		t.Errorf("failure findings %v; want %v (the noisy-log NVMe quiet)", got, want)
	}
	if fs, err := a.dh.Run(ctx, t0.Add(2*time.Second)); err != nil || len(fs) != 0 || len(a.dh.history["ds05/nvme1"]) != 1 {
		t.Errorf("unchanged drives a tick later: findings %v (%v), %d readings kept; want none and 1: once drives are known, the stage assesses every DriveEvery",
			fs, err, len(a.dh.history["ds05/nvme1"]))
	}
}

// evidenceQuerier answers smartQuery with every series and evidenceQuery
// with those of drivehealth.EvidenceSeries, as the store would.
type evidenceQuerier struct {
	series []storage.Series
}

func (f *evidenceQuerier) Query(_ context.Context, expr string, _ time.Time) ([]storage.Series, error) {
	switch expr {
	case smartQuery:
		return f.series, nil
	case evidenceQuery:
		var out []storage.Series
		for _, s := range f.series {
			if slices.Contains(drivehealth.EvidenceSeries, s.Name) {
				out = append(out, s)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected query %q", expr)
}

// TestDriveStageJudgesNewEvidenceAtOnce: a drive whose first media error
// shows between two assessments is reported at that tick, not up to
// DriveEvery later; a drive already at risk whose errors keep growing
// waits for the next assessment, and a reading that missed a series or
// only moved the error-information log adds nothing.
func TestDriveStageJudgesNewEvidenceAtOnce(t *testing.T) {
	drive := func(node string, media, errLog float64) []storage.Series {
		return []storage.Series{
			series("ballast_drive_info", 1, "node", node, "device", "nvme0", "protocol", "NVMe"),
			series("ballast_drive_smart_healthy", 1, "node", node, "device", "nvme0"),
			series("ballast_nvme_media_errors_total", media, "node", node, "device", "nvme0"),
			series("ballast_nvme_error_log_entries_total", errLog, "node", node, "device", "nvme0"),
		}
	}
	q := &evidenceQuerier{}
	a, err := New(q, nil, Options{DriveEvery: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	risk := func(at time.Duration) []string {
		t.Helper()
		fs, err := a.dh.Run(ctx, t0.Add(at))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, f := range fs {
			if f.Kind == drivehealth.KindFailureRisk && f.Active() {
				ids = append(ids, f.Subject.ID)
			}
		}
		return ids
	}
	q.series = append(drive("ds01", 0, 3), drive("ds02", 0, 0)...)
	if got := risk(0); len(got) != 0 {
		t.Fatalf("healthy drives at first sight: %v at risk", got)
	}
	// The error-information log alone, then a reading without ds02's
	// media-error series: neither is failure evidence.
	q.series = append(drive("ds01", 0, 9), drive("ds02", 0, 0)[:3]...)
	if got := risk(10 * time.Second); len(got) != 0 || len(a.dh.history["ds01/nvme0"]) != 1 {
		t.Fatalf("no new evidence: %v at risk, %d readings; want none and 1", got, len(a.dh.history["ds01/nvme0"]))
	}
	q.series = append(drive("ds01", 0, 9), drive("ds02", 1, 1)...)
	if got := risk(20 * time.Second); len(got) != 1 || got[0] != "ds02/nvme0" {
		t.Fatalf("first media error of ds02 at 20 s: at risk %v; want [ds02/nvme0] at once, not at the next assessment (60 s)", got)
	}
	q.series = append(drive("ds01", 0, 9), drive("ds02", 5, 6)...)
	if fs, err := a.dh.Run(ctx, t0.Add(30*time.Second)); err != nil || len(fs) != 0 || len(a.dh.history["ds02/nvme0"]) != 2 {
		t.Errorf("growing errors of a drive at risk at 30 s: %v (%v), %d readings; want nothing until the next assessment, 2 readings",
			fs, err, len(a.dh.history["ds02/nvme0"]))
	}
	if got := risk(80 * time.Second); len(got) != 1 || len(a.dh.history["ds02/nvme0"]) != 3 {
		t.Errorf("next assessment at 80 s: at risk %v, %d readings; want ds02 still, 3 readings", got, len(a.dh.history["ds02/nvme0"]))
	}
}

// exprQuerier answers each query expression with fixed series.
type exprQuerier map[string][]storage.Series

func (f exprQuerier) Query(_ context.Context, expr string, _ time.Time) ([]storage.Series, error) {
	return f[expr], nil
}

// TestIdentityNamesDeltasAndTheLostDS: the identity stage names the tick's
// deltas from the device table, the mounts and the reports, and the
// starvation stage calls down only the DS whose agent fails its scrape,
// not the peer whose bytes went undelivered while it waited.
func TestIdentityNamesDeltasAndTheLostDS(t *testing.T) {
	const (
		idA = "62616c6c617374000000000000000001"
		idB = "62616c6c617374000000000000000002"
	)
	ids := identity.New([]identity.Device{{ID: idA, DS: "ds01", Export: "/export/nvme0n1"}, {ID: idB, DS: "ds02", Drive: "nvme0n1"}}, nil)
	q := exprQuerier{
		fsMountQuery: {
			series("", 1, "node", "ds01", "instance", "10.0.0.1:9751", "device", "nvme0n1", "mountpoint", "/export/nvme0n1"),
			series("", 1, "node", "ds02", "instance", "10.0.0.2:9751", "device", "nvme0n1", "mountpoint", "/export/nvme0n1"),
		},
		upQuery: {series("up", 1, "instance", "10.0.0.1:9751", "pool", "fast"), series("up", 0, "instance", "10.0.0.2:9751", "pool", "ckpt")},
	}
	a, err := New(q, nil, Options{Identity: ids})
	if err != nil {
		t.Fatal(err)
	}
	a.stripes.tick = []models.StripeDelta{
		delta(idA, "10.1.0.1:2049", 10*time.Second, 0, 0, 0, 4096, 0), // waiting on ds02
		delta(idB, "10.1.0.2:2049", 10*time.Second, 0, 0, 0, 4096, 0),
	}
	if _, err := a.ident.Run(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	got := []string{a.stripes.tick[0].DeviceID, a.stripes.tick[0].DS, a.stripes.tick[1].DeviceID, a.stripes.tick[1].DS}
	if want := []string{"ds01/nvme0n1", "ds01", "ds02/nvme0n1", "ds02"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("renamed deltas %v; want %v", got, want)
	}
	if p := a.ident.Pools(); p["ds01"] != "fast" || p["ds02"] != "ckpt" {
		t.Errorf("pools %v; want ds01 in fast and ds02 in ckpt from up's pool label", p)
	}
	a.hot.loads = a.hot.tracker.loads(a.stripes.tick, a.ident.Pools())
	for _, d := range a.stripes.tick {
		a.st.parents[models.Subject{Kind: models.SubjectDevice, ID: d.DeviceID}] = models.Subject{Kind: models.SubjectDS, ID: d.DS}
	}
	down := a.st.downRule()
	for _, l := range a.hot.loads {
		want := strings.HasPrefix(l.subject.ID, "ds02")
		if got := down(l); got != want {
			t.Errorf("%s down %v; want %v", l.subject, got, want)
		}
	}
	ev := ids.Evidence(models.Subject{Kind: models.SubjectDS, ID: "ds02"})
	if len(ev) != 1 || ev[0].Series != `{ds="10.1.0.2:2049"}` {
		t.Errorf("ds02 evidence %+v; want its address", ev)
	}
}

// hotAfterFourTicks runs the identity and hotspot stages on q for four
// 10 s ticks of the same deltas and returns the subjects of the kinds
// given whose findings are active after the last.
func hotAfterFourTicks(t *testing.T, q Querier, opts Options, tick []models.StripeDelta, kinds ...models.SubjectKind) []string {
	t.Helper()
	a, err := New(q, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	var hot []string
	for s := range 4 {
		now := t0.Add(time.Duration(s) * 10 * time.Second)
		a.stripes.tick = slices.Clone(tick)
		if _, err := a.ident.Run(context.Background(), now); err != nil {
			t.Fatal(err)
		}
		fs, err := a.hot.Run(context.Background(), now)
		if err != nil {
			t.Fatalf("hotspot stage: %v", err)
		}
		hot = hot[:0]
		for _, f := range fs {
			if f.Active() && slices.Contains(kinds, f.Subject.Kind) {
				hot = append(hot, f.Subject.String())
			}
		}
	}
	return hot
}

// TestHotspotComparesPeersWithinPoolAndDirection: a fast pool serves
// reads evenly while a checkpoint writes a second pool (some devices take
// two of its layout components, the rest one). Judged per pool and per
// direction nothing there is hot; before, the written pool's devices and
// DSs were compared with the readers with reads and writes summed and all
// flagged. A device of the fast pool read at 4× its peers still is.
func TestHotspotComparesPeersWithinPoolAndDirection(t *testing.T) {
	var up []storage.Series
	var tick []models.StripeDelta
	add := func(dev, ds string, rd, wr uint64) {
		d := delta(dev, ds, 10*time.Second, rd/(1<<20), rd, wr, 0, time.Duration(rd/(1<<20))*time.Millisecond)
		d.Write.OpsCompleted = wr / (1 << 20)
		d.StripeKey.FileHandle = "fh-" + dev
		tick = append(tick, d)
	}
	for i := range 4 {
		ds := fmt.Sprintf("fs%02d", i)
		up = append(up, series("up", 1, "node", ds, "pool", "fast"))
		for k := range 4 {
			rd := uint64(2e9) // 200 MB/s over 10 s
			if i == 1 && k == 2 {
				rd *= 4
			}
			add(fmt.Sprintf("%s/nvme%dn1", ds, k), ds, rd, 0)
		}
	}
	for i := range 2 {
		ds := fmt.Sprintf("cap%02d", i)
		up = append(up, series("up", 1, "node", ds, "pool", "capacity"))
		for k := range 6 {
			wr := uint64(10e9) // one component: 1 GB/s
			if k%3 == 0 {
				wr *= 2 // two components
			}
			add(fmt.Sprintf("%s/nvme%dn1", ds, k), ds, 0, wr)
		}
	}
	hot := hotAfterFourTicks(t, exprQuerier{upQuery: up}, Options{}, tick, models.SubjectDevice, models.SubjectDS, models.SubjectStripe)
	if want := []string{"device:fs01/nvme2n1"}; !slices.Equal(hot, want) {
		t.Errorf("hot subjects %v; want only %v", hot, want)
	}
}

// TestStarvationNICUtilisation: a DS's NIC utilisation is its busier
// direction over its link speed, the max over its interfaces with a
// speed; an interface without a speed (lo) and a node whose agent serves
// none (an older agent) give nothing, so the analyzer's utilisation stays
// unknown for them.
func TestStarvationNICUtilisation(t *testing.T) {
	a, err := New(nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := exprQuerier{
		nicSpeedQuery: {
			series("", 25e9, "node", "ds01", "device", "eth0"),
			series("", 12.5e9, "node", "ds01", "device", "eth1"),
			series("", 25e9, "node", "ds03", "device", "eth0"),
		},
		a.st.nicRateQuery(): {
			series("", 20e9, "node", "ds01", "device", "eth0"),
			series("", 12e9, "node", "ds01", "device", "eth1"),
			series("", 90e9, "node", "ds01", "device", "lo"),
			series("", 5e9, "node", "ds02", "device", "eth0"),
			series("", 2.5e9, "node", "ds03", "device", "eth0"),
		},
		a.st.nicReceiveQuery(): {
			series("", 5e9, "node", "ds01", "device", "eth0"),
			series("", 1e9, "node", "ds01", "device", "eth1"),
			series("", 90e9, "node", "ds01", "device", "lo"),
			series("", 0.5e9, "node", "ds03", "device", "eth0"),
		},
	}
	a.q = q
	got, err := a.st.nicUtil(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"ds01": 0.96, "ds03": 0.1}
	if b := got.busier; len(b) != len(want) || math.Abs(b["ds01"]-want["ds01"]) > 1e-9 || math.Abs(b["ds03"]-want["ds03"]) > 1e-9 {
		t.Errorf("NIC utilisation %v; want %v", b, want)
	}
	// Receive only: ds01's eth0 receives 5 GB/s of its 25 (eth1 1 of 12.5).
	want = map[string]float64{"ds01": 0.2, "ds03": 0.02}
	if r := got.receive; len(r) != len(want) || math.Abs(r["ds01"]-want["ds01"]) > 1e-9 || math.Abs(r["ds03"]-want["ds03"]) > 1e-9 {
		t.Errorf("NIC receive utilisation %v; want %v", r, want)
	}
	if !strings.Contains(a.st.nicRateQuery(), "[15s]") {
		t.Errorf("rate query %q does not use the rate window", a.st.nicRateQuery())
	}

	// No speed series at all: nothing, and no rate query.
	a.q = exprQuerier{}
	if got, err := a.st.nicUtil(context.Background(), t0); err != nil || len(got.busier)+len(got.receive) != 0 {
		t.Errorf("without speeds: %v, %v; want none", got, err)
	}
}

// failingQuerier answers the utilisation query with an error and the rest
// from exprQuerier.
type failingQuerier struct {
	exprQuerier
	fail string
}

func (f failingQuerier) Query(ctx context.Context, expr string, at time.Time) ([]storage.Series, error) {
	if expr == f.fail {
		return nil, fmt.Errorf("query %q: storage unavailable", expr)
	}
	return f.exprQuerier.Query(ctx, expr, at)
}

// TestHotspotGatesDevicesOnDriveUtilisation: while a DS is lost most of a
// pool's devices stall at ~119 read IOPS and a few serve 877 (mixed, seed
// 1). A device that far above the collapsed median whose drive is barely
// busy (the DS agent's io_time rate) is not hot; one whose drive is busy
// is, and so is one whose drive has no utilisation series (judged on
// LAYOUTSTATS alone, as on a cluster without DS agents). A busy drive
// serving its share is not hot: utilisation gates, it opens nothing. When the
// utilisation query fails the stage still judges, without it.
func TestHotspotGatesDevicesOnDriveUtilisation(t *testing.T) {
	var up, util []storage.Series
	var tick []models.StripeDelta
	for i := range 10 {
		ds := fmt.Sprintf("ds%02d", i)
		dev := ds + "/nvme2n1"
		up = append(up, series("up", 1, "node", ds, "pool", "fast"))
		ops, u := uint64(1190+10*i), 0.08 // 119–128 IOPS over 10 s
		switch i {
		case 6: // its share, drive busy (a slow drive): utilisation opens nothing
			u = 0.7
		case 7: // far above its peers, drive barely busy
			ops, u = 8770, 0.12
		case 8: // far above its peers, drive busy
			ops, u = 8770, 0.85
		case 9: // far above its peers, no utilisation series
			ops = 8770
		}
		if i != 9 {
			util = append(util, series("", u, "node", ds, "device", "nvme2n1"))
		}
		d := delta(dev, ds, 10*time.Second, ops, ops<<17, 0, 0, time.Duration(ops)*time.Millisecond)
		d.Write.OpsCompleted = 0
		d.StripeKey.FileHandle = "fh-" + ds
		tick = append(tick, d)
	}
	// DSs have no utilisation: only devices are gated.
	opts := Options{ScrapeInterval: 10 * time.Second}
	hotDevices := func(q Querier) []string { return hotAfterFourTicks(t, q, opts, tick, models.SubjectDevice) }
	a, err := New(nil, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	uq := utilQuery(a.hot.utilWindow())
	if !strings.Contains(uq, "[20s]") {
		t.Errorf("utilisation query %q; want a window of two 10 s scrapes", uq)
	}
	q := exprQuerier{upQuery: up, uq: util}
	if got, want := hotDevices(q), []string{"device:ds08/nvme2n1", "device:ds09/nvme2n1"}; !slices.Equal(got, want) {
		t.Errorf("hot devices %v; want %v (ds06 busy at its share, ds07 far above but at 12 %%)", got, want)
	}
	if got, want := hotDevices(failingQuerier{q, uq}), []string{"device:ds07/nvme2n1", "device:ds08/nvme2n1", "device:ds09/nvme2n1"}; !slices.Equal(got, want) {
		t.Errorf("utilisation query failing: hot devices %v; want %v, judged on LAYOUTSTATS alone", got, want)
	}
}

// threeNodesOnDS00 is a tick in which gpu00, gpu01 and gpu02 each read
// 1 GB from each of ds00's two devices in 100 reads of 20 ms.
func threeNodesOnDS00() []models.StripeDelta {
	var tick []models.StripeDelta
	for _, node := range []string{"gpu00", "gpu01", "gpu02"} {
		for k := range 2 {
			d := delta(fmt.Sprintf("ds00/nvme%dn1", k), "ds00", 10*time.Second, 100, 1e9, 0, 0, 20*time.Millisecond)
			d.Client = node
			tick = append(tick, d)
		}
	}
	return tick
}

// TestStarvationBlamesASaturatedClientNIC: two GPU nodes read from the
// same healthy devices and both drop from full utilisation to half. The
// one whose own NIC receives at line rate is starved by it (client
// subject); the other, its NIC at a third, is idle for a reason that is
// not storage. A node's transmit side (its own checkpoint writes) does
// not make its client subject saturated.
func TestStarvationBlamesASaturatedClientNIC(t *testing.T) {
	a, err := New(nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tick := threeNodesOnDS00()
	query := func(util, rx0, tx2 float64) exprQuerier {
		q := exprQuerier{nicSpeedQuery: {
			series("", 3.125e9, "node", "gpu00", "device", "eth0"),
			series("", 3.125e9, "node", "gpu01", "device", "eth0"),
			series("", 3.125e9, "node", "gpu02", "device", "eth0"),
		}}
		q[a.st.nicReceiveQuery()] = []storage.Series{
			series("", rx0*3.125e9, "node", "gpu00", "device", "eth0"),
			series("", 1e9, "node", "gpu01", "device", "eth0"),
			series("", 1e9, "node", "gpu02", "device", "eth0"),
		}
		q[a.st.nicRateQuery()] = []storage.Series{
			series("", rx0*3.125e9, "node", "gpu00", "device", "eth0"),
			series("", 1e9, "node", "gpu01", "device", "eth0"),
			series("", tx2*3.125e9, "node", "gpu02", "device", "eth0"),
		}
		for _, node := range []string{"gpu00", "gpu01", "gpu02"} {
			for g := range 4 {
				q[gpuQuery] = append(q[gpuQuery], series("ballast_gpu_utilization_ratio", util, "node", node, "gpu", fmt.Sprint(g)))
			}
		}
		return q
	}
	for s, step := range []struct{ util, rx0, tx2 float64 }{{1, 0.3, 0.3}, {1, 0.3, 0.3}, {0.5, 0.98, 0.99}, {0.5, 0.98, 0.99}} {
		starvationTick(t, a, s, query(step.util, step.rx0, step.tx2), tick)
	}
	lost := a.st.an.LostByCause()
	// Two ticks of 4 GPUs losing half of 10 s: 40 GPU-seconds per node.
	if got := lost["client:gpu00"]; math.Abs(got-40) > 1e-6 {
		t.Errorf("client:gpu00 blamed for %v GPU-s; want 40 (its NIC receives at 98 %%): %v", got, lost)
	}
	// Idle not blamed on storage lets the GPUs' level sink a little
	// (LevelTau), so the second tick counts slightly under 40.
	if got := lost[starvation.NotStorage]; got < 79 || got > 80 {
		t.Errorf("not-storage %v GPU-s; want just under 80 (gpu01 and gpu02, NICs receiving at 32 %%): %v", got, lost)
	}
	for cause := range lost {
		if cause != "client:gpu00" && cause != starvation.NotStorage {
			t.Errorf("%s blamed (%v GPU-s); want only client:gpu00", cause, lost[cause])
		}
	}
}

// TestStarvationLevelFromHistory: the mds starts while gpu00's own NIC
// receives at line rate and its GPUs run at half; they ran at full
// utilisation before (the store's history). Its loss is counted from the
// stage's second tick and blamed on its NIC; gpu01, at half with its NIC
// at a third, is idle for a reason that is not storage; gpu02 has no
// history (a node new to the store) and keeps its first utilisation for
// its level. The history is read once, at the first sight of each GPU;
// when that query fails the stage still runs, and the level is the first
// utilisation.
func TestStarvationLevelFromHistory(t *testing.T) {
	tick := threeNodesOnDS00()
	probe, err := New(nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hq := probe.st.historyQuery()
	if want := "[1800s:15s]"; !strings.Contains(hq, want) || !strings.Contains(hq, "[1800s] @ end()") || !strings.Contains(hq, "- 0.05") {
		t.Errorf("history query %q; want the analyzer's LevelTau (30 min) sampled every scrape (15 s), its band MinDrop/2 (0.05) under the highest", hq)
	}
	query := func(a *Analysis) exprQuerier {
		q := nicsAt(a, map[string]float64{"gpu00": 0.98, "gpu01": 0.32, "gpu02": 0.32})
		for _, node := range []string{"gpu00", "gpu01", "gpu02"} {
			for g := range 4 {
				q[gpuQuery] = append(q[gpuQuery], series("ballast_gpu_utilization_ratio", 0.5, "node", node, "gpu", fmt.Sprint(g)))
				if node != "gpu02" {
					q[hq] = append(q[hq], series("ballast_gpu_utilization_ratio", 1, "node", node, "gpu", fmt.Sprint(g)))
				}
			}
		}
		return q
	}
	run := func(failing bool) map[string]float64 {
		t.Helper()
		a, err := New(nil, nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var q Querier = query(a)
		if failing {
			q = failingQuerier{query(a), hq}
		}
		for s := range 3 {
			starvationTick(t, a, s, q, tick)
		}
		return a.st.an.LostByCause()
	}
	lost := run(false)
	// Two ticks of 4 GPUs losing half of 10 s: 40 GPU-seconds per node.
	if got := lost["client:gpu00"]; math.Abs(got-40) > 1e-6 {
		t.Errorf("client:gpu00 blamed for %v GPU-s; want 40 (its NIC receives at 98 %%, its GPUs were at 1): %v", got, lost)
	}
	if got := lost[starvation.NotStorage]; got < 39 || got > 40 {
		t.Errorf("not-storage %v GPU-s; want just under 40 (gpu01 only; gpu02 has no history): %v", got, lost)
	}
	if len(lost) != 2 {
		t.Errorf("lost %v; want client:gpu00 and not-storage only", lost)
	}
	// Without history the first utilisation is each GPU's level, but
	// gpu00's path has been unhealthy since its first sight (its NIC at
	// line rate), so its loss counts against a whole GPU all the same;
	// gpu01 and gpu02, on healthy paths, count nothing.
	if lost := run(true); len(lost) != 1 || math.Abs(lost["client:gpu00"]-40) > 1e-6 {
		t.Errorf("history query failing: lost %v; want 40 GPU-s on client:gpu00 only", lost)
	}
}

// nicsAt answers the NIC queries of the starvation stage: each node has
// one 25 GbE link (3.125e9 B/s) receiving at rx of it, its busier
// direction.
func nicsAt(a *Analysis, rx map[string]float64) exprQuerier {
	nodes := slices.Sorted(maps.Keys(rx))
	q := exprQuerier{}
	for _, node := range nodes {
		q[nicSpeedQuery] = append(q[nicSpeedQuery], series("", 3.125e9, "node", node, "device", "eth0"))
		for _, k := range []string{a.st.nicReceiveQuery(), a.st.nicRateQuery()} {
			q[k] = append(q[k], series("", rx[node]*3.125e9, "node", node, "device", "eth0"))
		}
	}
	return q
}

// TestStarvationNICBoundFromTheFirstTick: the readahead scenario's edge
// node. gpu00's job has run at 0.43 since its first step behind its own
// NIC receiving at line rate, so the store's history shows it no busier
// (as in an eval, whose mds starts with the twin); gpu01's job runs at
// 0.5 from its first step with its NIC at a third (held by something
// that is not storage). gpu00's idle is its NIC's, counted against a
// whole GPU from the second tick; gpu01's is not counted.
func TestStarvationNICBoundFromTheFirstTick(t *testing.T) {
	a, err := New(nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hq := a.st.historyQuery()
	q := nicsAt(a, map[string]float64{"gpu00": 0.98, "gpu01": 0.32})
	for node, u := range map[string]float64{"gpu00": 0.43, "gpu01": 0.5} {
		for g := range 4 {
			for _, k := range []string{gpuQuery, hq} {
				q[k] = append(q[k], series("ballast_gpu_utilization_ratio", u, "node", node, "gpu", fmt.Sprint(g)))
			}
		}
	}
	var tick []models.StripeDelta
	for _, d := range threeNodesOnDS00() {
		if d.Client != "gpu02" {
			tick = append(tick, d)
		}
	}
	for s := range 3 {
		starvationTick(t, a, s, q, tick)
	}
	lost := a.st.an.LostByCause()
	// Two ticks of 4 GPUs losing 0.57 of 10 s.
	if got := lost["client:gpu00"]; math.Abs(got-45.6) > 1e-6 || len(lost) != 1 {
		t.Errorf("lost %v; want 45.6 GPU-s on client:gpu00 only (gpu01's idle is not counted)", lost)
	}
}

// TestStarvationHotOnlyWhileHot: gpu00 reads evenly from six DSs, one
// device each. ds00 serves four times its share for two ticks (a hotspot
// finding opens on it) and then its share again, at the same latency
// throughout; the GPUs run at half from the second hot tick on. The
// hotspot finding stays open for the detector's ExitAfter after ds00
// cooled, but ds00 starves nobody then: the tick it is hot blames it, the
// ticks after are not storage (no subject is down, saturated, hot or slow).
func TestStarvationHotOnlyWhileHot(t *testing.T) {
	a, err := New(nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tickWith := func(hot bool) []models.StripeDelta {
		var tick []models.StripeDelta
		for i := range 6 {
			ds := fmt.Sprintf("ds%02d", i)
			ops := uint64(1000)
			if hot && i == 0 {
				ops *= 4
			}
			// 128 KiB reads of 0.2 ms each, over 10 s.
			d := delta(ds+"/nvme0n1", ds, 10*time.Second, ops, ops<<17, 0, 0, time.Duration(ops)*200*time.Microsecond)
			d.Write.OpsCompleted = 0
			d.StripeKey.FileHandle = "fh-" + ds
			tick = append(tick, d)
		}
		return tick
	}
	steps := []struct {
		hot  bool
		util float64
	}{{false, 1}, {false, 1}, {true, 1}, {true, 0.5}, {false, 0.5}, {false, 0.5}}
	var open []string
	for s, step := range steps {
		now := t0.Add(time.Duration(s) * 10 * time.Second)
		q := exprQuerier{}
		for g := range 4 {
			q[gpuQuery] = append(q[gpuQuery], series("ballast_gpu_utilization_ratio", step.util, "node", "gpu00", "gpu", fmt.Sprint(g)))
		}
		a.q = q
		a.stripes.tick = tickWith(step.hot)
		if _, err := a.ident.Run(context.Background(), now); err != nil {
			t.Fatal(err)
		}
		fs, err := a.hot.Run(context.Background(), now)
		if err != nil {
			t.Fatalf("tick %d: hotspot stage: %v", s, err)
		}
		open = open[:0]
		for _, f := range fs {
			if f.Active() && f.Subject.Kind == models.SubjectDS {
				open = append(open, f.Subject.String())
			}
		}
		if _, err := a.st.Run(context.Background(), now); err != nil {
			t.Fatalf("tick %d: starvation stage: %v", s, err)
		}
	}
	if want := []string{"ds:ds00"}; !slices.Equal(open, want) {
		t.Fatalf("open DS hotspot findings at the last tick %v; want %v (ds00 cooled within ExitAfter)", open, want)
	}
	lost := a.st.an.LostByCause()
	blamed := 0.0
	for cause, v := range lost {
		if cause != starvation.NotStorage {
			blamed += v
		}
	}
	// One hot tick of 4 GPUs losing half of 10 s: 20 GPU-seconds on ds00
	// (or what is hot on it); two cool ticks: just under 40 not storage
	// (the level sinks a little while the idle is not blamed).
	if math.Abs(blamed-20) > 1e-6 {
		t.Errorf("storage blamed for %v GPU-s; want 20, the tick ds00 was hot: %v", blamed, lost)
	}
	if got := lost[starvation.NotStorage]; got < 39 || got > 40 {
		t.Errorf("not-storage %v GPU-s; want just under 40 (the two ticks after ds00 cooled): %v", got, lost)
	}
}
