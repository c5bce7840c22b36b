package twin

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/collector"
	"github.com/ballast-io/ballast/collector/layoutstats"
	"github.com/ballast-io/ballast/models"
)

// series parses Prometheus text exposition into series → value, skipping
// comments.
func series(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("bad exposition line %q", line)
		}
		out[line[:i]] = line[i+1:]
	}
	return out
}

func render(t *testing.T, tw *Twin, node string) string {
	t.Helper()
	var b bytes.Buffer
	if err := tw.RenderNode(node, &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// scrapeFake writes the twin's raw /proc files of node into a fake root and
// serves them through the real collectors.
func scrapeFake(t *testing.T, tw *Twin, node string, role string) string {
	t.Helper()
	root := t.TempDir()
	write := func(p string, fn func(w *bytes.Buffer) error) {
		var b bytes.Buffer
		if err := fn(&b); err != nil {
			t.Fatal(err)
		}
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("net/dev", func(w *bytes.Buffer) error { return tw.WriteNetDev(node, w) })
	enabled := []string{"netdev"}
	if role == RoleDS {
		write("diskstats", func(w *bytes.Buffer) error { return tw.WriteDiskstats(node, w) })
		enabled = append(enabled, "diskstats")
	} else {
		write("4242/mountstats", func(w *bytes.Buffer) error { return tw.WriteMountstats(node, w) })
		if err := os.Symlink("4242", filepath.Join(root, "self")); err != nil {
			t.Fatal(err)
		}
		enabled = append(enabled, "mountstats")
	}
	h, err := collector.NewHandler(collector.Options{ProcRoot: root, SysRoot: root, DevRoot: root, CacheTTL: -1}, enabled)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape of fake %s: status %d: %s", node, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestTelemetryRoundTripsThroughCollectors renders the raw /proc files of
// a data server and a client, parses them with the real diskstats, netdev
// and mountstats collectors, and checks that every series they produce is
// in the twin's own exposition of the node with the same value.
func TestTelemetryRoundTripsThroughCollectors(t *testing.T) {
	sc, err := LoadScenario("failing-drive")
	if err != nil {
		t.Fatal(err)
	}
	sc.Topology.DataServers[0].CounterBits = 32 // exercise wrapped fields
	tw, err := New(sc, 3, epoch)
	if err != nil {
		t.Fatal(err)
	}
	tw.Run(1500)
	for _, n := range []Node{{"ds03", RoleDS}, {"gpu02", RoleClient}} {
		twin := series(t, render(t, tw, n.Name))
		real := series(t, scrapeFake(t, tw, n.Name, n.Role))
		checked := 0
		for k, v := range real {
			if strings.HasPrefix(k, "ballast_collector_") {
				continue
			}
			got, ok := twin[k]
			if !ok {
				t.Errorf("%s: series %s from the real collector is missing in the twin's exposition", n.Name, k)
				continue
			}
			if got != v {
				t.Errorf("%s: %s = %s in the twin's exposition; the real collector parsed %s", n.Name, k, got, v)
			}
			checked++
		}
		if checked < 20 {
			t.Fatalf("%s: only %d series compared", n.Name, checked)
		}
	}
}

func TestDiskstatsWrapAt32Bits(t *testing.T) {
	sc := parse(t, ampleStorage)
	sc.Topology.DataServers[0].CounterBits = 32
	tw, err := New(sc, 1, epoch)
	if err != nil {
		t.Fatal(err)
	}
	d := tw.findDevice("ds00/nvme0n1")
	tw.dev[d].rdBytes = float64(1<<32)*512 + 1024 // sectors past 2^32
	rows, err := tw.Diskstats("ds00")
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].ReadSectors != 2 {
		t.Fatalf("read sectors %d; want 2 after a 32-bit wrap", rows[0].ReadSectors)
	}
}

func TestNodeLossResetsCounters(t *testing.T) {
	tw, err := New(mustLoad(t, "node-loss"), 1, epoch)
	if err != nil {
		t.Fatal(err)
	}
	tw.Run(19 * 60)
	before, err := tw.NetDev("ds05")
	if err != nil {
		t.Fatal(err)
	}
	tw.Run(120)
	if err := tw.RenderNode("ds05", &bytes.Buffer{}); err == nil {
		t.Fatal("a lost data server rendered its exposition")
	}
	tw.Run(15 * 60)
	after, err := tw.NetDev("ds05")
	if err != nil {
		t.Fatal(err)
	}
	if before.TxBytes == 0 || after.TxBytes >= before.TxBytes {
		t.Fatalf("ds05 transmitted %d bytes before the loss and %d after its return; want counters restarted from zero", before.TxBytes, after.TxBytes)
	}
	sm, _ := tw.Smart("ds05")
	if sm[0].UnsafeShutdowns < 1 {
		t.Fatalf("unsafe shutdowns %v after the loss; want it counted", sm[0].UnsafeShutdowns)
	}
}

func mustLoad(t *testing.T, name string) *Scenario {
	t.Helper()
	sc, err := LoadScenario(name)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestLayoutStatsIngest feeds the twin's LAYOUTSTATS reports to the real
// ingest every 30 simulated seconds: every batch must validate and be
// accepted, counters must only move forward, and the bytes the ingest
// derives must match what the clients read.
func TestLayoutStatsIngest(t *testing.T) {
	tw, err := New(mustLoad(t, "hot-shard"), 5, epoch)
	if err != nil {
		t.Fatal(err)
	}
	in, err := layoutstats.NewIngester(layoutstats.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tw.Run(11 * 60) // into the hot shard: many streams of one client share its stripes
	var derived, reports float64
	clientRead := func() float64 {
		s := 0.0
		for c := range tw.cli {
			s += tw.cli[c].readBytes
		}
		return s
	}
	var clientBefore, clientAfter float64
	for i := 0; i < 20; i++ {
		switch i {
		case 0:
			clientBefore = clientRead()
		case 19:
			clientAfter = clientRead()
		}
		for _, b := range tw.LayoutStats() {
			if err := b.Validate(); err != nil {
				t.Fatalf("batch of %s: %v", b.ClientID, err)
			}
			res, err := in.Ingest(tw.Now(), &b)
			if err != nil {
				t.Fatalf("ingest of %s at %s: %v", b.ClientID, tw.Now(), err)
			}
			reports += float64(len(b.Reports))
			if i > 0 {
				for _, d := range res.Deltas {
					derived += float64(d.Read.BytesCompleted)
				}
			}
		}
		tw.Run(30)
	}
	// deltas from the second batch on cover the time between the first
	// and the last batch
	read := clientAfter - clientBefore
	if derived < 0.99*read || derived > 1.01*read {
		t.Fatalf("ingest derived %.4g bytes read; clients read %.4g over the reported intervals", derived, read)
	}
	if reports == 0 {
		t.Fatal("no reports")
	}
}

// runDigest runs a scenario and hashes everything a pipeline would see:
// every node's exposition and the LAYOUTSTATS batches each simulated
// minute, then the truth.
func runDigest(t *testing.T, name string, seed uint64, minutes int, render bool) (telemetry, truth []byte) {
	t.Helper()
	tw, err := New(mustLoad(t, name), seed, epoch)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for m := 0; m < minutes; m++ {
		tw.Run(60)
		if !render {
			continue
		}
		for _, n := range tw.Nodes() {
			if err := tw.RenderNode(n.Name, h); err != nil && !strings.Contains(err.Error(), ErrNodeDown.Error()) {
				t.Fatal(err)
			}
		}
		if err := json.NewEncoder(h).Encode(tw.LayoutStats()); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := tw.WriteTruth(&b); err != nil {
		t.Fatal(err)
	}
	return h.Sum(nil), b.Bytes()
}

func TestDeterminism(t *testing.T) {
	tel1, tr1 := runDigest(t, "mixed", 42, 30, true)
	tel2, tr2 := runDigest(t, "mixed", 42, 30, true)
	if !bytes.Equal(tel1, tel2) {
		t.Fatal("same scenario and seed gave different telemetry")
	}
	if !bytes.Equal(tr1, tr2) {
		t.Fatalf("same scenario and seed gave different truth:\n%s\n---\n%s", tr1, tr2)
	}
	_, tr3 := runDigest(t, "mixed", 43, 30, false)
	if bytes.Equal(tr1, tr3) {
		t.Fatal("a different seed gave the same truth; the seed is not used")
	}
	if len(bytes.Split(bytes.TrimSpace(tr1), []byte("\n"))) < 10 {
		t.Fatalf("mixed produced little truth in 30 min:\n%s", tr1)
	}
}

func TestTruthRecords(t *testing.T) {
	tw, err := New(mustLoad(t, "mixed"), 1, epoch)
	if err != nil {
		t.Fatal(err)
	}
	tw.Run(int64(2 * time.Hour / time.Second))
	kinds := map[string]int{}
	for _, r := range tw.Truth() {
		kinds[r.Kind]++
		if r.Start.Before(epoch) || (!r.End.IsZero() && r.End.Before(r.Start)) {
			t.Fatalf("record with bad times: %+v", r)
		}
	}
	for _, k := range []string{"workload_phase", "checkpoint_burst", "hot_shard", "failing_drive", "drive_failed", "port_saturation", "workload_shift", "node_loss", "gpu_idle", "device_saturated", "port_saturated", "read_ahead_waste"} {
		if kinds[k] == 0 {
			t.Errorf("no %s truth record in mixed; have %v", k, kinds)
		}
	}
	var sat PortStat
	for _, p := range tw.Ports() {
		if p.Name == "sw/ds11" {
			sat = p
		}
	}
	// 150 Gbit/s of cross traffic for 20 minutes on a 100 Gbit/s port
	if sat.OutBytes < 0.9*12.5e9*1200 {
		t.Errorf("port sw/ds11 carried %.3g bytes towards the host; want the saturation to show", sat.OutBytes)
	}
	var b bytes.Buffer
	if err := tw.WriteTruth(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(bytes.TrimSpace(b.Bytes()), []byte("\n")) {
		var r TruthRecord
		if err := json.Unmarshal(line, &r); err != nil || r.Kind == "" || r.Subject.ID == "" {
			t.Fatalf("bad truth line %s: %v", line, err)
		}
	}
}

// TestLayoutBusyTimeBounded checks that a layout's busy time grows by at
// most one tick per tick, even when several streams of one client read the
// same stripe (the hot shard).
func TestLayoutBusyTimeBounded(t *testing.T) {
	tw, err := New(mustLoad(t, "hot-shard"), 5, epoch)
	if err != nil {
		t.Fatal(err)
	}
	tw.Run(10 * 60)
	prev := map[int32][2]float64{}
	for i := 0; i < 120; i++ {
		tw.Step()
		for k := int32(0); k < int32(tw.nRecs); k++ {
			r := tw.rec(k)
			if r.client < 0 {
				continue
			}
			p, ok := prev[k]
			if ok && (r.rd.busy-p[0] > tw.dt*(1+1e-9) || r.wr.busy-p[1] > tw.dt*(1+1e-9)) {
				t.Fatalf("tick %d: layout of %s on stripe %s: busy time grew by %.3f s / %.3f s in a %.0f s tick", i, tw.cli[r.client].name, tw.stripeID(r.stripe), r.rd.busy-p[0], r.wr.busy-p[1], tw.dt)
			}
			prev[k] = [2]float64{r.rd.busy, r.wr.busy}
		}
	}
}

// TestReadAheadFixClosesWaste applies the action a read-ahead finding
// would lead to and checks that the waste ends and the client's NIC is
// relieved.
func TestReadAheadFixClosesWaste(t *testing.T) {
	tw, err := New(mustLoad(t, "mixed"), 1, epoch)
	if err != nil {
		t.Fatal(err)
	}
	tw.Run(120)
	open := func(kind, id string) bool {
		for _, r := range tw.Truth() {
			if r.Kind == kind && r.Subject.ID == id && r.End.IsZero() {
				return true
			}
		}
		return false
	}
	if !open("read_ahead_waste", "inf00") || !open("client_nic_saturated", "inf00") {
		t.Fatalf("inf00 with 1 MiB read-ahead for 64 KiB random reads: want open read_ahead_waste and client_nic_saturated records")
	}
	before := tw.cli[tw.findClient("inf00")].readGood
	tw.Run(60)
	goodBefore := tw.cli[tw.findClient("inf00")].readGood - before
	if err := tw.Apply(act(models.ActionSetReadAhead, models.SubjectClient, "inf00", map[string]string{"read_ahead_kb": "64"})); err != nil {
		t.Fatal(err)
	}
	tw.Run(120)
	if open("read_ahead_waste", "inf00") || open("client_nic_saturated", "inf00") {
		t.Fatalf("after setting read-ahead to 64 KiB the waste or the NIC saturation is still open")
	}
	if !open("read_ahead_waste", "inf01") {
		t.Fatalf("inf01 was not changed; its waste record should stay open")
	}
	mid := tw.cli[tw.findClient("inf00")].readGood
	tw.Run(60)
	if goodAfter := tw.cli[tw.findClient("inf00")].readGood - mid; goodAfter < goodBefore*1.5 {
		t.Fatalf("inf00 goodput %.3g B/min before the fix and %.3g after; want the fix to raise it", goodBefore, goodAfter)
	}
}

func TestIdentifiersMapBack(t *testing.T) {
	tw, err := New(mustLoad(t, "hot-shard"), 1, epoch)
	if err != nil {
		t.Fatal(err)
	}
	tw.Run(11 * 60)
	hot := 0
	for _, b := range tw.LayoutStats() {
		for _, r := range b.Reports {
			dev := tw.DeviceName(r.DeviceID)
			st := tw.StripeOfHandle(r.LayoutUpdate.FHandle)
			if dev == "" || st == "" {
				t.Fatalf("report %+v does not map back (device %q, stripe %q)", r, dev, st)
			}
			if got := tw.dev[tw.stripes[tw.findStripe(st)].dev].name; got != dev {
				t.Fatalf("stripe %s is on %s but its report names %s", st, got, dev)
			}
			if strings.HasPrefix(st, "imagenet/shard-00017#") {
				hot++
			}
		}
	}
	if hot == 0 {
		t.Fatal("no report about the hot shard a minute into the fault")
	}
	if tw.DeviceName("00") != "" || tw.StripeOfHandle("zz") != "" {
		t.Fatal("garbage ids mapped to something")
	}
}

// TestLayoutStatsIngestThroughNodeLoss feeds the real ingest every 10 s
// while a data server is lost and returns: reads that fail count as bytes
// not delivered, and no counter may go backwards.
func TestLayoutStatsIngestThroughNodeLoss(t *testing.T) {
	tw, err := New(mustLoad(t, "node-loss"), 1, epoch)
	if err != nil {
		t.Fatal(err)
	}
	in, err := layoutstats.NewIngester(layoutstats.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tw.Run(19 * 60)
	notDelivered := uint64(0)
	for i := 0; i < 6*20; i++ {
		tw.Run(10)
		for _, b := range tw.LayoutStats() {
			if _, err := in.Ingest(tw.Now(), &b); err != nil {
				t.Fatalf("ingest of %s at %s: %v", b.ClientID, tw.Elapsed(), err)
			}
			for _, r := range b.Reports {
				notDelivered += r.LayoutUpdate.Read.BytesNotDelivered + r.LayoutUpdate.Write.BytesNotDelivered
			}
		}
	}
	if notDelivered == 0 {
		t.Fatal("no bytes reported not delivered while ds05 was lost")
	}
}
