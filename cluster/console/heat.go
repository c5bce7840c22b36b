package console

import (
	"context"
	"fmt"
	"html/template"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/analyzer/drivehealth"
	"github.com/ballast-io/ballast/models"
)

// heatQuery is each drive's utilisation (share of time with I/O in
// flight) from the data servers' diskstats, over the last two minutes.
const heatQuery = `max by (node, device, pool) (rate(ballast_disk_io_time_seconds_total{role="ds"}[2m]))`

// heatMap is one page of the DS × drive heat map.
type heatMap struct {
	Drives []string // columns
	Rows   []heatRow
	Sort   string
	// SortHot and SortName are the links that re-sort the map.
	SortHot, SortName string
}

type heatRow struct {
	DS, Pool string
	Max      float64
	Cells    []heatCell
}

type heatCell struct {
	Drive string
	Util  float64
	Has   bool
	Color template.CSS // a background colour computed here
	Risk  string       // title of an active drive finding, "" when none
}

func (c *Console) heat(ctx context.Context, pg *page, p params, now time.Time, active []models.Finding) {
	ss, err := c.opts.Query.Query(ctx, heatQuery, now)
	if err != nil {
		pg.HeatErr = err.Error()
		return
	}
	// Drive findings name the drive "node/controller" (SMART) or
	// "node/namespace"; a cell is "node/namespace".
	risk := map[string]string{}
	for _, f := range active {
		if f.Subject.Kind == models.SubjectDevice && (f.Kind == drivehealth.KindFailureRisk || f.Kind == drivehealth.KindWearout) {
			risk[f.Subject.ID] = Title(f.Kind) + ": " + f.Summary
		}
	}
	rows := map[string]*heatRow{}
	for i := range ss {
		s := &ss[i]
		node, dev := s.Label("node"), s.Label("device")
		if node == "" || dev == "" || len(s.Values) == 0 {
			continue
		}
		r := rows[node]
		if r == nil {
			r = &heatRow{DS: node, Pool: s.Label("pool")}
			rows[node] = r
		}
		v := s.Values[len(s.Values)-1]
		cell := heatCell{Drive: dev, Util: v, Has: true, Color: heatColor(v), Risk: riskOf(risk, node, dev)}
		r.Cells = append(r.Cells, cell)
		r.Max = max(r.Max, v)
	}
	all := make([]*heatRow, 0, len(rows))
	for _, r := range rows {
		all = append(all, r)
	}
	sort.Slice(all, func(i, j int) bool {
		if p.hsort == "hot" && all[i].Max != all[j].Max {
			return all[i].Max > all[j].Max
		}
		return naturalLess(all[i].DS, all[j].DS)
	})
	pg.HeatPager = newPager(pg.Query, "hpage", p.hpage, c.opts.PageSize, len(all))
	hm := heatMap{Sort: p.hsort}
	page := slice(all, pg.HeatPager)
	cols := map[string]bool{}
	for _, r := range page {
		for _, cl := range r.Cells {
			cols[cl.Drive] = true
		}
	}
	for d := range cols {
		hm.Drives = append(hm.Drives, d)
	}
	sort.Slice(hm.Drives, func(i, j int) bool { return naturalLess(hm.Drives[i], hm.Drives[j]) })
	for _, r := range page {
		byDrive := map[string]heatCell{}
		for _, cl := range r.Cells {
			byDrive[cl.Drive] = cl
		}
		row := heatRow{DS: r.DS, Pool: r.Pool, Max: r.Max}
		for _, d := range hm.Drives {
			cl, ok := byDrive[d]
			if !ok {
				// No reading (a failed or removed drive): still outlined
				// when a finding is about it.
				cl = heatCell{Drive: d, Risk: riskOf(risk, r.DS, d)}
			}
			row.Cells = append(row.Cells, cl)
		}
		hm.Rows = append(hm.Rows, row)
	}
	q := func(sort string) string {
		v := cloneValues(pg.Query)
		v.Set("hsort", sort)
		v.Del("hpage")
		return Path + "?" + v.Encode()
	}
	hm.SortHot, hm.SortName = q("hot"), q("name")
	pg.Heat = hm
}

// riskOf returns the finding about drive dev of DS node, named by its
// namespace or its controller.
func riskOf(risk map[string]string, node, dev string) string {
	if t, ok := risk[node+"/"+dev]; ok {
		return t
	}
	return risk[node+"/"+controllerOf(dev)]
}

// controllerOf strips an NVMe namespace suffix: nvme3n1 → nvme3.
func controllerOf(dev string) string {
	if !strings.HasPrefix(dev, "nvme") {
		return dev
	}
	if i := strings.LastIndexByte(dev, 'n'); i > len("nvme") {
		return dev[:i]
	}
	return dev
}

// heatColor maps utilisation 0..1 to a colour from pale yellow to dark red.
func heatColor(v float64) template.CSS {
	v = min(1, max(0, v))
	stops := [][3]float64{{255, 247, 214}, {253, 186, 92}, {227, 74, 51}, {127, 0, 0}}
	x := v * float64(len(stops)-1)
	i := min(int(x), len(stops)-2)
	f := x - float64(i)
	a, b := stops[i], stops[i+1]
	return template.CSS(fmt.Sprintf("background:#%02x%02x%02x", int(a[0]+f*(b[0]-a[0])), int(a[1]+f*(b[1]-a[1])), int(a[2]+f*(b[2]-a[2]))))
}

// naturalLess orders names with numbers by value: ds2 before ds10.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := isDigit(a[0]), isDigit(b[0])
		if da && db {
			na, ra := leadingDigits(a)
			nb, rb := leadingDigits(b)
			ta, tb := strings.TrimLeft(na, "0"), strings.TrimLeft(nb, "0")
			if len(ta) != len(tb) {
				return len(ta) < len(tb)
			}
			if ta != tb {
				return ta < tb
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func leadingDigits(s string) (string, string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}
