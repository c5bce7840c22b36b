// Package analysis wires the pure analyzers (analyzer/*) into the mds
// pipeline: each stage reads what a real cluster shows — the series in the
// store, queried with a few aggregated MetricsQL expressions per tick, and
// the per-stripe LAYOUTSTATS deltas of the StripeHub — builds the
// analyzer's typed input, calls it with the tick's now and returns its
// findings. Nothing here reads the twin's ground truth or internal state.
//
// Subjects are named as operators name them, through the device table
// (cluster/identity): a pNFS device id becomes its drive "ds04/nvme4n1"
// and a DS address its DS "ds04" (the ids and addresses stay as evidence,
// and stay the names while the table does not know them); stripes are
// hotspot.StripeID of the renamed delta ("ds04/nvme4n1/<file handle>");
// drives of the SMART series are "<node>/<device>", an NVMe controller
// named by its namespace when that is known; client groups are the
// `job_group` target label when the scrape configuration sets one (a
// file_sd label), else the client node.
package analysis

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/ballast-io/ballast/analyzer/starvation"
	"github.com/ballast-io/ballast/cluster/identity"
	"github.com/ballast-io/ballast/cluster/pipeline"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// Querier is the part of the store the stages use.
type Querier interface {
	Query(ctx context.Context, expr string, at time.Time) ([]storage.Series, error)
}

// GroupLabel is the target label that names a client group (a job) when the
// scrape configuration sets it; without it each client node is its own group.
const GroupLabel = "job_group"

// Options configure the stages. The zero value is a working configuration.
type Options struct {
	// WorkloadWindow is the length of one workload classification window;
	// default 1 m.
	WorkloadWindow time.Duration
	// DriveEvery is how often drive health is assessed; default 1 m.
	DriveEvery time.Duration
	// RateWindow is the range of the rate() queries; default 15 s.
	RateWindow time.Duration
	// ScrapeInterval is how often the agents are scraped; default 15 s
	// (the mds's scrape.interval). The hotspot stage's drive utilisation
	// rate spans at least two of them.
	ScrapeInterval time.Duration
	// Logger receives what the stages cannot report as an error without
	// stopping (a query that failed, judged without its input); nil means
	// slog.Default().
	Logger *slog.Logger
	// Identity is the device table that names devices and DSs; nil means
	// an empty one (ids and addresses stay the names).
	Identity *identity.Table
}

func (o Options) withDefaults() Options {
	if o.WorkloadWindow <= 0 {
		o.WorkloadWindow = time.Minute
	}
	if o.DriveEvery <= 0 {
		o.DriveEvery = time.Minute
	}
	if o.RateWindow <= 0 {
		o.RateWindow = 15 * time.Second
	}
	if o.ScrapeInterval <= 0 {
		o.ScrapeInterval = 15 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Identity == nil {
		o.Identity = identity.New(nil, nil)
	}
	return o
}

// Analysis holds the stages of one mds and what they share within a tick
// (the hotspot findings the starvation stage marks as hot, the checkpoint
// bursts it blames pauses on), plus records for scoring: the tick at which
// each finding was first reported, every workload label, every change of a
// checkpoint forecast and the idle GPU-seconds blamed per cause and minute.
type Analysis struct {
	opts Options
	q    Querier
	ids  *identity.Table

	stripes *stripeBuffer
	ident   *identityStage

	hot  *hotspotStage
	ckpt *checkpointStage
	wl   *workloadStage
	st   *starvationStage
	dh   *driveStage
	cap  *capacityStage

	mu        sync.Mutex
	firstSeen map[string]time.Time
}

// New builds the stages on q and subscribes to hub (nil for no stripes).
func New(q Querier, hub *pipeline.StripeHub, opts Options) (*Analysis, error) {
	opts = opts.withDefaults()
	a := &Analysis{opts: opts, q: q, ids: opts.Identity, stripes: &stripeBuffer{}, firstSeen: map[string]time.Time{}}
	a.ident = &identityStage{a: a}
	if hub != nil {
		hub.Subscribe(a.stripes.add)
	}
	var err error
	if a.hot, err = newHotspotStage(a); err != nil {
		return nil, err
	}
	if a.ckpt, err = newCheckpointStage(a); err != nil {
		return nil, err
	}
	if a.wl, err = newWorkloadStage(a); err != nil {
		return nil, err
	}
	if a.st, err = newStarvationStage(a); err != nil {
		return nil, err
	}
	if a.dh, err = newDriveStage(a); err != nil {
		return nil, err
	}
	a.cap = newCapacityStage(a)
	return a, nil
}

// Pipeline returns the stages in the order they must run (the stripe
// buffer's tick first, then the identity stage that names its deltas,
// starvation after hotspot and checkpoint) and the actuator that records
// when each finding was first reported. Stages whose subjects the device
// table names add the ids behind the names as evidence.
func (a *Analysis) Pipeline() ([]pipeline.Stage, []pipeline.Actuator) {
	n := func(s pipeline.Stage) pipeline.Stage { return named{s, a.ids} }
	return []pipeline.Stage{a.stripes, a.ident, n(a.hot), a.ckpt, a.wl, n(a.st), n(a.dh), a.cap}, []pipeline.Actuator{(*firstSeenRecorder)(a)}
}

// Identity returns the device table the stages name subjects with.
func (a *Analysis) Identity() *identity.Table { return a.ids }

// FirstReported returns, per finding id, the tick at which it was first
// returned by a stage.
func (a *Analysis) FirstReported() map[string]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]time.Time, len(a.firstSeen))
	for k, v := range a.firstSeen {
		out[k] = v
	}
	return out
}

// Labels returns every workload window label so far, in order.
func (a *Analysis) Labels() []WindowLabel { return a.wl.labelsCopy() }

// Blame returns the starvation analyzer's idle GPU-seconds per cause and
// minute so far.
func (a *Analysis) Blame() []BlameRecord { return a.st.blame() }

// Series returns the series the stages derive beyond findings, at now:
// MetricGPULostSeconds per cause. The mds writes them after every tick
// (pipeline.SeriesRecorder).
func (a *Analysis) Series(now time.Time) []models.Sample { return a.st.series(now) }

// StarvationEpisodes returns every gpu_starvation episode so far as the
// finding it would be on its own, with when it was first reported (in its
// own finding or its cause's recurring one), for scoring.
func (a *Analysis) StarvationEpisodes() []starvation.Episode { return a.st.episodesCopy() }

// Forecasts returns every change of a checkpoint forecast so far.
func (a *Analysis) Forecasts() []ForecastRecord { return a.ckpt.recordsCopy() }

// CheckpointsWriting returns the client groups the checkpoint stage saw
// writing a checkpoint at its last tick: in a burst, or with a write rate
// clearly above their idle level before a burst is confirmed (the burst's
// first seconds, checkpoint.Detector.Raised), in subject order. The
// actions engine pauses non-urgent copies on it (actuator.Options.Writing).
func (a *Analysis) CheckpointsWriting() []models.Subject {
	a.ckpt.mu.Lock()
	defer a.ckpt.mu.Unlock()
	return append([]models.Subject(nil), a.ckpt.writing...)
}

type firstSeenRecorder Analysis

func (r *firstSeenRecorder) Name() string { return "analysis-first-seen" }

func (r *firstSeenRecorder) Reconcile(_ context.Context, now time.Time, fs []models.Finding) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range fs {
		if _, ok := r.firstSeen[f.ID]; !ok {
			r.firstSeen[f.ID] = now
		}
	}
	return nil
}

// stripeBuffer collects the hub's deltas between ticks; as the first stage
// of a tick it hands them over to the stages of that tick.
type stripeBuffer struct {
	mu      sync.Mutex
	pending []models.StripeDelta
	tick    []models.StripeDelta
}

func (b *stripeBuffer) add(ds []models.StripeDelta) {
	b.mu.Lock()
	b.pending = append(b.pending, ds...)
	b.mu.Unlock()
}

func (b *stripeBuffer) Name() string { return "stripes" }

func (b *stripeBuffer) Run(context.Context, time.Time) ([]models.Finding, error) {
	b.mu.Lock()
	b.tick, b.pending = b.pending, b.tick[:0]
	b.mu.Unlock()
	return nil, nil
}

// closer ends findings a stateless analyzer stops returning: the pipeline
// journals findings by id, so one that silently disappears would stay
// active for ever.
type closer struct {
	active map[string]models.Finding
}

func (c *closer) update(now time.Time, fs []models.Finding) []models.Finding {
	if c.active == nil {
		c.active = map[string]models.Finding{}
	}
	seen := make(map[string]bool, len(fs))
	for _, f := range fs {
		seen[f.ID] = true
		if f.Active() {
			c.active[f.ID] = f
		} else {
			delete(c.active, f.ID)
		}
	}
	var ids []string
	for id := range c.active {
		if !seen[id] {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		f := c.active[id]
		f.End = now
		f.LastSeen = now
		fs = append(fs, f)
		delete(c.active, id)
	}
	return fs
}

// groupOf returns the client-group subject of a series: the job_group
// label when set, else the node.
func groupOf(s *storage.Series) (models.Subject, bool) {
	if g := s.Label(GroupLabel); g != "" {
		return models.Subject{Kind: models.SubjectJob, ID: g}, true
	}
	if n := s.Label("node"); n != "" {
		return models.Subject{Kind: models.SubjectClient, ID: n}, true
	}
	return models.Subject{}, false
}

func lastValue(s *storage.Series) (float64, bool) {
	if len(s.Values) == 0 {
		return 0, false
	}
	return s.Values[len(s.Values)-1], true
}
