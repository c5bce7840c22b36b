package analysis

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/ballast-io/ballast/cluster/identity"
	"github.com/ballast-io/ballast/cluster/pipeline"
	"github.com/ballast-io/ballast/models"
)

// fsMountQuery reads which block device each node mounts where, from the
// filesystem collector's series (and the instance each node is scraped
// as, to name the targets of `up`).
const fsMountQuery = `max by (node, instance, device, mountpoint) (last_over_time(` + models.MetricFilesystemSize + `[10m]))`

// upQuery reads whether each scraped agent answered its last scrape.
const upQuery = `up`

// mountEvery is how often mounts are re-read: exports move rarely.
const mountEvery = time.Minute

// identityStage names the tick's stripe deltas as operators do (drives
// "ds04/nvme4n1", DSs "ds04") with the device table, after learning from
// them, from the DS agents' filesystem series and from `up`. It runs before
// every stage that reads the deltas and returns no findings.
type identityStage struct {
	a         *Analysis
	nextMount time.Time
	instance  map[string]string // scrape instance → node
	pools     map[string]string // DS node → its pool, from the pool target label
}

// PoolLabel is the target label that names a data server's pool (tier),
// set by the scrape configuration (a file_sd label) as the capacity
// report and the dashboards read it.
const PoolLabel = "pool"

// Pools maps each DS (node) whose agent's `up` carries the pool target
// label to its pool. Without the label every device is in one pool "".
func (s *identityStage) Pools() map[string]string { return s.pools }

func (s *identityStage) Name() string { return "identity" }

func (s *identityStage) Run(ctx context.Context, now time.Time) ([]models.Finding, error) {
	t := s.a.ids
	var errs []error
	if !now.Before(s.nextMount) {
		s.nextMount = now.Add(mountEvery)
		series, err := s.a.q.Query(ctx, fsMountQuery, now)
		errs = append(errs, err)
		for i := range series {
			sr := &series[i]
			node := sr.Label("node")
			t.ObserveMount(node, sr.Label("mountpoint"), sr.Label("device"))
			if in := sr.Label("instance"); in != "" && node != "" {
				if s.instance == nil {
					s.instance = map[string]string{}
				}
				s.instance[in] = node
			}
		}
	}
	series, err := s.a.q.Query(ctx, upQuery, now)
	errs = append(errs, err)
	for i := range series {
		sr := &series[i]
		v, ok := lastValue(sr)
		if !ok || math.IsNaN(v) {
			continue
		}
		node := sr.Label("node")
		if node == "" {
			node = s.instance[sr.Label("instance")]
		}
		if p := sr.Label(PoolLabel); p != "" && node != "" {
			if s.pools == nil {
				s.pools = map[string]string{}
			}
			s.pools[node] = p
		}
		t.ObserveAgent(node, v == 1)
	}
	t.Rename(s.a.stripes.tick)
	return nil, errors.Join(errs...)
}

// named adds the identity evidence (pNFS device ids, DS addresses) to the
// findings of a stage whose subjects the device table named.
type named struct {
	pipeline.Stage
	ids *identity.Table
}

func (n named) Run(ctx context.Context, now time.Time) ([]models.Finding, error) {
	fs, err := n.Stage.Run(ctx, now)
	for i := range fs {
		f := &fs[i]
		ev := n.ids.Evidence(f.Subject)
		if len(ev) == 0 || slices.ContainsFunc(f.Evidence, func(e models.Evidence) bool { return e.Name == ev[0].Name }) {
			continue
		}
		f.Evidence = append(slices.Clip(f.Evidence), ev...)
	}
	return fs, err
}

// InfoSource returns the source that writes the device table as info
// series: ballast_pnfs_device_info{deviceid, node, device, export} per
// device id and ballast_pnfs_ds_info{ds, node} per DS address, value 1,
// so queries can join LAYOUTSTATS series to the agents' series.
func InfoSource(t *identity.Table) pipeline.Source {
	return pipeline.SourceFunc("identity", func(_ context.Context, now time.Time) ([]models.Sample, error) {
		ts := now.UnixMilli()
		var out []models.Sample
		info := func(name string, kv ...string) {
			s := models.Sample{Name: name, Timestamp: ts, Value: 1}
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i+1] != "" {
					s.Labels = append(s.Labels, models.Label{Name: kv[i], Value: kv[i+1]})
				}
			}
			out = append(out, s)
		}
		for _, r := range t.Rows() {
			info(models.MetricPNFSDeviceInfo, models.LabelLayoutStatsDeviceID, r.ID, "node", r.DS, "device", r.Drive, "export", r.Export, "name", r.Name)
		}
		for _, a := range t.Addresses() {
			info(models.MetricPNFSDSInfo, models.LabelLayoutStatsDS, a[0], "node", a[1])
		}
		return out, nil
	})
}
