package analysis

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ballast-io/ballast/analyzer/drivehealth"
	"github.com/ballast-io/ballast/cluster/identity"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// smartQuery reads every series the drive-health mapping uses
// (drivehealth.SeriesNames: drive, NVMe health log, ATA attributes, SCSI
// counters), for every drive of every data server, in one query: the
// latest value of the last 30 s (a drive that dropped off the bus then has
// none, rather than five minutes of stale ones from the default lookback).
var smartQuery = `last_over_time({__name__=~"` + strings.Join(drivehealth.SeriesNames, "|") + `"}[30s]) keep_metric_names`

// evidenceQuery reads only the series of drivehealth.EvidenceSeries and
// EvidenceATAAttributes, the way smartQuery reads every series: what the
// stage watches every tick between assessments (about a tenth of
// smartQuery's series on NVMe drives).
var evidenceQuery = `last_over_time({__name__=~"` + strings.Join(drivehealth.EvidenceSeries, "|") + `"}[30s]) keep_metric_names or ` +
	`last_over_time(` + models.MetricATAAttributeRaw + `{attribute_id=~"` + joinInts(drivehealth.EvidenceATAAttributes, "|") + `"}[30s]) keep_metric_names`

func joinInts(v []int, sep string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, sep)
}

// maxDriveHistory bounds the observations kept per drive; thinDriveHistory
// keeps it there while covering the rules' long window.
const maxDriveHistory = 4096

// driveStage assesses every drive — NVMe, ATA and SCSI — with
// analyzer/drivehealth (rules and the learned model) each DriveEvery, from
// its SMART series. Drives are named by the device table
// (identity.Table.DriveName): "<node>/<device>" with the device name the
// SMART series carry (ds05/sda), an NVMe controller by its namespace when
// the node has one known (ds03/nvme2 → ds03/nvme2n1). The analyzer returns only
// active findings, so the stage ends those that stop being returned. The
// history lives in memory: after a restart, growth and the stability of a
// level are judged from the readings since.
type driveStage struct {
	a       *Analysis
	model   *drivehealth.Model
	rules   drivehealth.RuleOptions
	history map[string][]drivehealth.Observation
	// atRisk holds the drives the last assessment found at risk.
	atRisk map[string]bool
	next   time.Time
	cl     closer
}

func newDriveStage(a *Analysis) (*driveStage, error) {
	m, err := drivehealth.DefaultModel()
	if err != nil {
		return nil, err
	}
	return &driveStage{a: a, model: m, rules: drivehealth.DefaultRuleOptions(), history: map[string][]drivehealth.Observation{}, atRisk: map[string]bool{}}, nil
}

func (d *driveStage) Name() string { return "drivehealth" }

// readSmart turns the result of smartQuery into one observation per drive
// (named by names) at now, through the one series → observation mapping.
func readSmart(series []storage.Series, now time.Time, names *identity.Table) map[string]drivehealth.Observation {
	var r drivehealth.Readings
	for i := range series {
		s := &series[i]
		id := drivehealth.NodeDevice(s.Labels)
		if id != "" {
			id = names.DriveName(s.Label("node"), s.Label("device"))
		}
		if v, ok := lastValue(s); ok && id != "" {
			r.Add(id, now, s.Name, s.Labels, v)
		}
	}
	out := make(map[string]drivehealth.Observation, r.Len())
	for id, h := range r.Histories() {
		out[id] = h[len(h)-1]
	}
	return out
}

// thinDriveHistory keeps a drive's history bounded and long enough for the
// rules: every reading of the last day, one an hour before that, nothing
// older than the long window plus the short one.
func thinDriveHistory(h []drivehealth.Observation, now time.Time, opt drivehealth.RuleOptions) []drivehealth.Observation {
	if len(h) <= maxDriveHistory {
		return h
	}
	keepFrom := now.Add(-opt.LongWindow - opt.ShortWindow)
	full := now.Add(-24 * time.Hour)
	out := h[:0]
	var lastHour time.Time
	for _, o := range h {
		switch {
		case o.Time.Before(keepFrom):
		case !o.Time.Before(full):
			out = append(out, o)
		case o.Time.Truncate(time.Hour) != lastHour:
			lastHour = o.Time.Truncate(time.Hour)
			out = append(out, o)
		}
	}
	if len(out) > maxDriveHistory {
		out = out[len(out)-maxDriveHistory:]
	}
	return out
}

// Run assesses the drives every DriveEvery; until the first drive has been
// seen it reads every tick, so that a freshly started mds judges its
// agents' drives as soon as their first scrape lands, not a DriveEvery
// later. Between assessments it reads the drives' failure evidence
// (evidenceQuery) every tick: when a drive not yet at risk shows evidence
// its last reading did not (drivehealth.EvidenceChanged: a new media error,
// a SMART verdict, reallocated or pending sectors), every drive is read and
// assessed at once, rather than up to DriveEvery after the agent showed
// it. A drive already at risk waits for the next assessment, so a drive
// whose errors grow every scrape does not fill its history with a reading
// a tick.
func (d *driveStage) Run(ctx context.Context, now time.Time) ([]models.Finding, error) {
	if now.Before(d.next) && len(d.history) > 0 {
		ev, err := d.a.q.Query(ctx, evidenceQuery, now)
		if err != nil {
			return nil, err
		}
		if !d.newEvidence(readSmart(ev, now, d.a.ids)) {
			return nil, nil
		}
	}
	d.next = now.Add(d.a.opts.DriveEvery)
	series, err := d.a.q.Query(ctx, smartQuery, now)
	if err != nil {
		return nil, err
	}
	for id, o := range readSmart(series, now, d.a.ids) {
		d.history[id] = thinDriveHistory(append(d.history[id], o), now, d.rules)
	}
	ids := make([]string, 0, len(d.history))
	for id := range d.history {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var fs []models.Finding
	clear(d.atRisk)
	for _, id := range ids {
		for _, f := range drivehealth.Analyze(id, d.history[id], now, d.model, d.rules) {
			if f.Kind == drivehealth.KindFailureRisk {
				d.atRisk[id] = true
			}
			fs = append(fs, f)
		}
	}
	return d.cl.update(now, fs), nil
}

// newEvidence reports whether a drive not at risk shows failure evidence
// in read (a partial reading) that its last full reading did not; a drive
// seen for the first time counts.
func (d *driveStage) newEvidence(read map[string]drivehealth.Observation) bool {
	for id, o := range read {
		if d.atRisk[id] {
			continue
		}
		h := d.history[id]
		if len(h) == 0 || drivehealth.EvidenceChanged(h[len(h)-1], o) {
			return true
		}
	}
	return false
}
