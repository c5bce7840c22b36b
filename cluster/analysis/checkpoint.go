package analysis

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/ballast-io/ballast/analyzer/checkpoint"
	"github.com/ballast-io/ballast/models"
)

// ForecastRecord is one prediction of a checkpoint forecast, recorded each
// time the predicted next start changes, for scoring.
type ForecastRecord struct {
	At         time.Time      `json:"at"`
	Subject    models.Subject `json:"subject"`
	Period     time.Duration  `json:"period"`
	NextStart  time.Time      `json:"next_start"`
	Bursts     int            `json:"bursts"`
	Confidence float64        `json:"confidence"`
}

// checkpointStage feeds analyzer/checkpoint with each client group's write
// bandwidth: what the NFS clients' mountstats say they wrote (normal and
// O_DIRECT), summed per group in one query. It also reads the write errors
// the clients reported to the MDS (the LAYOUTSTATS ingest's error counter)
// and reports a burst of a group whose clients met write errors as a
// failed checkpoint. For the starvation stage it keeps the groups in a
// burst this tick and those whose write rate rose clearly above idle
// without one yet (a burst that began late in the rate window).
type checkpointStage struct {
	a    *Analysis
	det  *checkpoint.Detector
	fail *checkpoint.Failures

	nodeGroup map[string]models.Subject // client node → its group
	errSeen   map[errSeries]errReading  // last sample of each error counter
	errInit   bool                      // errSeen holds a first reading

	groups map[models.Subject]bool
	last   map[models.Subject]time.Time
	active map[string]bool // groups (subject ids) in a burst this tick
	// starting are the groups (subject ids) whose write rate is clearly
	// above their idle level this tick with no burst seen yet
	// (checkpoint.Detector.Raised): a burst that may have begun late in
	// the tick's rate window.
	starting map[string]bool
	mu       sync.Mutex
	// writing are the groups in active or starting, in subject order, for
	// readers outside the tick (Analysis.CheckpointsWriting); under mu.
	writing []models.Subject
	records []ForecastRecord
	lastRec map[models.Subject]time.Time
}

func newCheckpointStage(a *Analysis) (*checkpointStage, error) {
	det, err := checkpoint.New(checkpoint.Options{})
	if err != nil {
		return nil, err
	}
	return &checkpointStage{a: a, det: det, fail: checkpoint.NewFailures(checkpoint.FailureOptions{}),
		nodeGroup: map[string]models.Subject{}, errSeen: map[errSeries]errReading{},
		groups: map[models.Subject]bool{}, last: map[models.Subject]time.Time{},
		active: map[string]bool{}, starting: map[string]bool{}, lastRec: map[models.Subject]time.Time{}}, nil
}

func (c *checkpointStage) Name() string { return "checkpoint" }

func (c *checkpointStage) query() string {
	return fmt.Sprintf(`sum by (%s, node) (rate({__name__=~"ballast_nfs_client_(write|direct_write)_bytes_total"}[%ds]))`,
		GroupLabel, int(c.a.opts.RateWindow.Seconds()))
}

func (c *checkpointStage) Run(ctx context.Context, now time.Time) ([]models.Finding, error) {
	series, err := c.a.q.Query(ctx, c.query(), now)
	if err != nil {
		return nil, err
	}
	// A group with a job_group label spans nodes: sum its nodes.
	bw := map[models.Subject]float64{}
	for i := range series {
		s := &series[i]
		g, ok := groupOf(s)
		v, ok2 := lastValue(s)
		if !ok || !ok2 || math.IsNaN(v) || v < 0 {
			continue
		}
		if n := s.Label("node"); n != "" {
			c.nodeGroup[n] = g
		}
		bw[g] += v
	}
	subs := make([]models.Subject, 0, len(bw))
	for g := range bw {
		subs = append(subs, g)
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].String() < subs[j].String() })
	for _, g := range subs {
		if !now.After(c.last[g]) {
			continue
		}
		if err := c.det.Observe(now, g, checkpoint.Point{T: now, BytesPerSec: bw[g]}); err != nil {
			return nil, err
		}
		c.last[g] = now
		c.groups[g] = true
	}
	fs := c.det.Findings(now)
	failed, err := c.failures(ctx, now)
	if err != nil {
		c.a.opts.Logger.Warn("checkpoint: cannot read reported write errors", "err", err)
	}
	fs = append(fs, failed...)
	clear(c.active)
	for i := range fs {
		if fs[i].Kind == checkpoint.KindBurst && fs[i].Active() {
			c.active[fs[i].Subject.ID] = true
		}
	}
	clear(c.starting)
	for _, g := range subs {
		if c.det.Raised(g) && !c.active[g.ID] {
			c.starting[g.ID] = true
		}
	}
	c.setWriting(fs, subs)
	c.record(now)
	return fs, nil
}

// setWriting keeps the groups in a burst (fs's active bursts) or starting
// one (subs raised) this tick, in subject order.
func (c *checkpointStage) setWriting(fs []models.Finding, subs []models.Subject) {
	var w []models.Subject
	seen := map[string]bool{}
	for i := range fs {
		if s := fs[i].Subject; fs[i].Kind == checkpoint.KindBurst && fs[i].Active() && !seen[s.String()] {
			seen[s.String()] = true
			w = append(w, s)
		}
	}
	for _, g := range subs {
		if c.starting[g.ID] && !seen[g.String()] {
			seen[g.String()] = true
			w = append(w, g)
		}
	}
	sort.Slice(w, func(i, j int) bool { return w[i].String() < w[j].String() })
	c.mu.Lock()
	c.writing = w
	c.mu.Unlock()
}

// record notes every group whose predicted next start changed.
func (c *checkpointStage) record(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for g := range c.groups {
		p, ok := c.det.Forecast(now, g)
		if !ok || p.NextStart.Equal(c.lastRec[g]) {
			continue
		}
		c.lastRec[g] = p.NextStart
		c.records = append(c.records, ForecastRecord{At: now, Subject: g, Period: p.Period, NextStart: p.NextStart,
			Bursts: p.Bursts, Confidence: math.Round(p.Confidence*1000) / 1000})
	}
	sort.SliceStable(c.records, func(i, j int) bool {
		if !c.records[i].At.Equal(c.records[j].At) {
			return c.records[i].At.Before(c.records[j].At)
		}
		return c.records[i].Subject.String() < c.records[j].Subject.String()
	})
}

func (c *checkpointStage) recordsCopy() []ForecastRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ForecastRecord(nil), c.records...)
}
