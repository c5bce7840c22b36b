package capacity

import (
	"fmt"
	"sort"
	"time"

	"github.com/ballast-io/ballast/models"
)

// Point is one reading of used bytes at T.
type Point struct {
	T time.Time `json:"t"`
	V float64   `json:"v"`
}

// DeviceSeries is the used-bytes history of one drive with where it sits:
// its data server and pool. Capacity is its size in bytes.
type DeviceSeries struct {
	Device   string  `json:"device"` // "ds03/nvme2n1"
	DS       string  `json:"ds"`
	Pool     string  `json:"pool"`
	Capacity float64 `json:"capacity_bytes"`
	Used     []Point `json:"used"`
}

// Series is the used-bytes history of one subject (device, DS, pool or
// cluster) and its capacity. Used is sorted by time.
type Series struct {
	Subject  models.Subject `json:"subject"`
	Pool     string         `json:"pool,omitempty"`
	Capacity float64        `json:"capacity_bytes"`
	Members  int            `json:"members"`
	Used     []Point        `json:"used"`
}

// Validate checks that s can be forecast: a subject, a positive capacity
// and time-ordered, finite, non-negative readings.
func (s *Series) Validate() error {
	if s.Subject.ID == "" {
		return fmt.Errorf("capacity series has no subject")
	}
	if !(s.Capacity > 0) {
		return fmt.Errorf("capacity series %q has capacity %g; want > 0", s.Subject, s.Capacity)
	}
	for i, p := range s.Used {
		if !(p.V >= 0) || p.V > 1e21 {
			return fmt.Errorf("capacity series %q has used bytes %g at %s", s.Subject, p.V, p.T.Format(time.RFC3339))
		}
		if i > 0 && !p.T.After(s.Used[i-1].T) {
			return fmt.Errorf("capacity series %q is not in time order at %s", s.Subject, p.T.Format(time.RFC3339))
		}
	}
	return nil
}

// Aggregate turns per-device histories into series for every device, every
// data server, every pool and the cluster, in that order (each group sorted
// by id). A group's used bytes at a time is the sum over its members of each
// member's latest reading at or before that time; times before every member
// has reported are left out, so a late member never shows as a drop.
func Aggregate(devs []DeviceSeries) []Series {
	devs = append([]DeviceSeries(nil), devs...)
	sort.Slice(devs, func(i, j int) bool { return devs[i].Device < devs[j].Device })
	var out []Series
	for _, d := range devs {
		out = append(out, Series{Subject: models.Subject{Kind: models.SubjectDevice, ID: d.Device},
			Pool: d.Pool, Capacity: d.Capacity, Members: 1, Used: d.Used})
	}
	group := func(kind models.SubjectKind, key func(DeviceSeries) string, pool func(DeviceSeries) string) {
		byKey := map[string][]DeviceSeries{}
		var keys []string
		for _, d := range devs {
			k := key(d)
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], d)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m := byKey[k]
			s := Series{Subject: models.Subject{Kind: kind, ID: k}, Pool: pool(m[0]), Members: len(m), Used: sumLOCF(m)}
			for _, d := range m {
				s.Capacity += d.Capacity
			}
			out = append(out, s)
		}
	}
	group(models.SubjectDS, func(d DeviceSeries) string { return d.DS }, func(d DeviceSeries) string { return d.Pool })
	group(models.SubjectPool, func(d DeviceSeries) string { return d.Pool }, func(d DeviceSeries) string { return d.Pool })
	group(models.SubjectCluster, func(DeviceSeries) string { return "cluster" }, func(DeviceSeries) string { return "" })
	return out
}

// sumLOCF sums members' readings, each carried forward to the union of
// their times, from the time the last member first reported.
func sumLOCF(m []DeviceSeries) []Point {
	var start time.Time
	var times []time.Time
	for _, d := range m {
		if len(d.Used) == 0 {
			return nil
		}
		if d.Used[0].T.After(start) {
			start = d.Used[0].T
		}
		for _, p := range d.Used {
			times = append(times, p.T)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	idx := make([]int, len(m))
	var out []Point
	for i, t := range times {
		if t.Before(start) || (i > 0 && t.Equal(times[i-1])) {
			continue
		}
		sum := 0.0
		for k, d := range m {
			for idx[k]+1 < len(d.Used) && !d.Used[idx[k]+1].T.After(t) {
				idx[k]++
			}
			sum += d.Used[idx[k]].V
		}
		out = append(out, Point{T: t, V: sum})
	}
	return out
}
