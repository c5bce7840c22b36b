package report

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/analyzer/capacity"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// QuerySeries is one series of a range query's result.
type QuerySeries struct {
	Labels map[string]string
	Points []capacity.Point
}

// Querier evaluates a PromQL/MetricsQL range query. The store's
// MetricsQL engine (the demo) and a Prometheus-compatible HTTP API
// (`ballast report capacity --url`) both implement it through small
// adapters.
type Querier interface {
	QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]QuerySeries, error)
}

// DefaultFilesystemMatch keeps every filesystem but the operating
// system's own (/ and /boot…): on a data server the others are the
// filesystems it exports from its drives.
const DefaultFilesystemMatch = `mountpoint!~"/|/boot(/.*)?"`

// ReadOptions say which filesystem series ReadDevices reads and how it
// assigns pools.
type ReadOptions struct {
	Start, End time.Time
	Step       time.Duration
	// Match is a list of label matchers added to both series, e.g.
	// `role="ds",mountpoint=~"/export/.+"`; empty reads every filesystem.
	Match string
	// PoolLabel names the label carrying a filesystem's pool; default
	// "pool".
	PoolLabel string
	// Pools maps node-name prefixes to pools, used when a series has no
	// pool label; longest prefix first. Nodes matching none are in pool
	// "default".
	Pools [][2]string
}

func (o ReadOptions) poolLabel() string {
	if o.PoolLabel == "" {
		return "pool"
	}
	return o.PoolLabel
}

// UsedQuery is the expression of used bytes per drive: size − avail of
// its filesystem. Avail rather than free: avail is what unprivileged
// writers (nfsd writing as the client's mapped user) can still use, so a
// drive is full at 100 % exactly when writes start to fail with ENOSPC;
// the blocks a filesystem reserves for root (5 % on ext4 by default,
// none on XFS) count as used. The maximum over mount points keeps a
// filesystem mounted twice (a bind mount) from being counted twice.
func UsedQuery(o ReadOptions) string {
	sel := "{" + o.Match + "}"
	return fmt.Sprintf("max by (node, device, %s) (%s%s - %s%s)", o.poolLabel(),
		models.MetricFilesystemSize, sel, models.MetricFilesystemAvail, sel)
}

// SizeQuery is the expression of capacity bytes per drive: the size of
// its filesystem.
func SizeQuery(o ReadOptions) string {
	return fmt.Sprintf("max by (node, device, %s) (%s{%s})", o.poolLabel(), models.MetricFilesystemSize, o.Match)
}

// ReadDevices reads every drive's used bytes and capacity (UsedQuery and
// SizeQuery) between o.Start and o.End, joined per node and device; the
// device is named "node/device" ("scr01/nvme2n1"). A drive's capacity is
// the latest size read. It fails when no filesystem series exists.
func ReadDevices(ctx context.Context, q Querier, o ReadOptions) ([]capacity.DeviceSeries, error) {
	if o.Step <= 0 || !o.End.After(o.Start) {
		return nil, fmt.Errorf("cannot read filesystem series: want start before end and a positive step, got %s to %s step %s", o.Start, o.End, o.Step)
	}
	usedQ, sizeQ := UsedQuery(o), SizeQuery(o)
	used, err := q.QueryRange(ctx, usedQ, o.Start, o.End, o.Step)
	if err != nil {
		return nil, err
	}
	if len(used) == 0 {
		return nil, fmt.Errorf("cannot build the capacity report: no series %s{%s} between %s and %s (is the filesystem collector enabled on the data servers?)",
			models.MetricFilesystemSize, o.Match, o.Start.Format(time.RFC3339), o.End.Format(time.RFC3339))
	}
	sizes, err := q.QueryRange(ctx, sizeQ, o.Start, o.End, o.Step)
	if err != nil {
		return nil, err
	}
	key := func(l map[string]string) string { return l["node"] + "/" + l["device"] }
	capOf := map[string]float64{}
	for _, s := range sizes {
		if pts := finite(s.Points); len(pts) > 0 {
			capOf[key(s.Labels)] = pts[len(pts)-1].V
		}
	}
	var out []capacity.DeviceSeries
	var missing []string
	for _, s := range used {
		k := key(s.Labels)
		c := capOf[k]
		pts := finite(s.Points)
		if !(c > 0) || len(pts) == 0 {
			missing = append(missing, k)
			continue
		}
		out = append(out, capacity.DeviceSeries{Device: k, DS: s.Labels["node"], Capacity: c,
			Pool: PoolOf(s.Labels, o.poolLabel(), o.Pools), Used: pts})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cannot build the capacity report: no filesystem with a positive size among %d (first: %s)", len(used), missing[0])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Device < out[j].Device })
	return out, nil
}

// finite drops the points a query engine returns as NaN (no reading
// within its lookback: before the first scrape, after a drive failed).
func finite(pts []capacity.Point) []capacity.Point {
	out := pts[:0:0]
	for _, p := range pts {
		if !math.IsNaN(p.V) && !math.IsInf(p.V, 0) {
			out = append(out, p)
		}
	}
	return out
}

// PoolOf is the pool of a series: its pool label, else the pool of the
// first node-name prefix in prefixes that its node label starts with,
// else "default".
func PoolOf(labels map[string]string, poolLabel string, prefixes [][2]string) string {
	if p := labels[poolLabel]; p != "" {
		return p
	}
	node := labels["node"]
	for _, kv := range prefixes {
		if strings.HasPrefix(node, kv[0]) {
			return kv[1]
		}
	}
	return "default"
}

// MatchDevices renames at-risk drives to the filesystem series' device
// names: health series name the NVMe controller (ds01/nvme2), filesystems
// its namespace (ds01/nvme2n1).
func MatchDevices(rs []DriveRisk, devs []capacity.DeviceSeries) []DriveRisk {
	have := map[string]bool{}
	for _, d := range devs {
		have[d.Device] = true
	}
	for i := range rs {
		if !have[rs[i].Device] && have[rs[i].Device+"n1"] {
			rs[i].Device += "n1"
		}
	}
	return rs
}

// DedupeRisks keeps one entry per drive and kind, the riskiest, in first
// appearance order.
func DedupeRisks(rs []DriveRisk) []DriveRisk {
	best := map[string]DriveRisk{}
	var keys []string
	for _, r := range rs {
		k := r.Device + "|" + r.Kind
		if b, ok := best[k]; !ok || r.Risk > b.Risk {
			if !ok {
				keys = append(keys, k)
			}
			best[k] = r
		}
	}
	out := make([]DriveRisk, 0, len(keys))
	for _, k := range keys {
		out = append(out, best[k])
	}
	return out
}

// RangeQuerier is the range half of storage.Querier.
type RangeQuerier interface {
	QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]storage.Series, error)
}

// FromStore adapts a store's MetricsQL range queries (the path
// /api/v1/query_range serves, without HTTP) to Querier.
func FromStore(st RangeQuerier) Querier { return storeQuerier{st} }

type storeQuerier struct{ st RangeQuerier }

func (q storeQuerier) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]QuerySeries, error) {
	ss, err := q.st.QueryRange(ctx, expr, start, end, step)
	if err != nil {
		return nil, err
	}
	out := make([]QuerySeries, 0, len(ss))
	for _, s := range ss {
		qs := QuerySeries{Labels: map[string]string{}}
		for _, l := range s.Labels {
			qs.Labels[l.Name] = l.Value
		}
		for i, ms := range s.Timestamps {
			qs.Points = append(qs.Points, capacity.Point{T: time.UnixMilli(ms).UTC(), V: s.Values[i]})
		}
		out = append(out, qs)
	}
	return out, nil
}
