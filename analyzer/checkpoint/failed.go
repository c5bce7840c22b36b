package checkpoint

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/models"
)

// KindFailed is the finding kind of a checkpoint that failed: write errors
// its group's clients reported during (or just after) the burst.
const KindFailed = "checkpoint_failed"

// TrackedBurst is a burst with the id of its checkpoint_burst finding.
type TrackedBurst struct {
	ID string
	Burst
}

// TrackedBursts returns the bursts of subject found by the last Findings
// call, with their finding ids.
func (d *Detector) TrackedBursts(subject models.Subject) []TrackedBurst {
	g := d.groups[subject]
	if g == nil {
		return nil
	}
	out := make([]TrackedBurst, len(g.known))
	for i, k := range g.known {
		out[i] = TrackedBurst{ID: k.id, Burst: k.b}
	}
	return out
}

// WriteError is data-server write errors that clients of a group reported
// (LAYOUTERROR, ff_ioerr4) and the mds first saw at At.
type WriteError struct {
	At     time.Time
	Device string // what findings call the device
	DS     string // its data server; "" when the device table does not know it
	Status string // nfsstat4 name, e.g. NFS4ERR_NOSPC
	Count  float64
	// ExpectedStart and ExpectedEnd are the group's forecast checkpoint
	// window that covered At (ending up to Grace before it); zero without
	// a forecast.
	ExpectedStart, ExpectedEnd time.Time
}

// FailureOptions tune Failures; zero values take the defaults in brackets.
type FailureOptions struct {
	// Grace is how long after a burst's last write a reported write error
	// still counts against it [3m]: a write to a data server that does not
	// answer fails only after the client's timeout (Linux flex-files
	// dataserver_timeo, 60 s by default) while the burst's bandwidth has
	// already dropped, and the error reaches the mds with the next
	// LAYOUTSTATS report (up to a minute later).
	Grace time.Duration
	// Retention is how long errors wait for a burst detected late [30m].
	Retention time.Duration
	// Settle is how long errors that match no burst wait before they fail
	// the forecast window that covered them [1m]: a burst is detected
	// within seconds of its start, so errors still unmatched by then came
	// from a checkpoint that failed before it wrote a burst.
	Settle time.Duration
}

// Failures matches groups' write errors to their checkpoint bursts and
// reports each burst that met errors as one checkpoint_failed finding. Feed
// it with Observe; read it with Findings for every group, each tick, with
// the group's tracked bursts. Not safe for concurrent use.
type Failures struct {
	opts FailureOptions
	errs map[models.Subject][]WriteError
	// reported holds the findings of failed bursts by id; done is set once
	// the final (ended) one was returned.
	reported map[string]*failure
}

type failure struct {
	f    models.Finding
	done bool
	seen bool // returned by this call
}

// NewFailures returns a Failures with opts.
func NewFailures(opts FailureOptions) *Failures {
	if opts.Grace <= 0 {
		opts.Grace = 3 * time.Minute
	}
	if opts.Retention <= 0 {
		opts.Retention = 30 * time.Minute
	}
	if opts.Settle <= 0 {
		opts.Settle = time.Minute
	}
	return &Failures{opts: opts, errs: map[models.Subject][]WriteError{}, reported: map[string]*failure{}}
}

// Grace returns the grace of the options in use.
func (fl *Failures) Grace() time.Duration { return fl.opts.Grace }

// Observe records write errors of group g.
func (fl *Failures) Observe(g models.Subject, e WriteError) {
	fl.errs[g] = append(fl.errs[g], e)
}

// Findings returns the checkpoint_failed findings of group g at now: one
// per burst of g during which (from its start to Grace after its end) a
// client of g reported write errors, while the burst may still collect
// errors, and once more ended (End set) when it no longer can. An error
// counts against the latest burst that started before it. Errors that
// match no burst but fell in the group's forecast window, and stayed
// unmatched for Settle, fail that window as a checkpoint that wrote no
// burst (one that failed at its first writes).
func (fl *Failures) Findings(now time.Time, g models.Subject, bursts []TrackedBurst) []models.Finding {
	errs := fl.errs[g]
	keep := errs[:0]
	for _, e := range errs {
		if now.Sub(e.At) <= fl.opts.Retention {
			keep = append(keep, e)
		}
	}
	if len(keep) == 0 {
		delete(fl.errs, g)
	} else {
		fl.errs[g] = keep
	}
	bs := append([]TrackedBurst(nil), bursts...)
	sort.Slice(bs, func(i, j int) bool { return bs[i].Start.Before(bs[j].Start) })
	matched := make([][]WriteError, len(bs))
	for _, e := range keep {
		for i := len(bs) - 1; i >= 0; i-- {
			b := &bs[i]
			if e.At.Before(b.Start) {
				continue
			}
			end := b.End
			if b.Open {
				end = now
			}
			if !e.At.After(end.Add(fl.opts.Grace)) {
				matched[i] = append(matched[i], e)
			}
			break
		}
	}
	// Errors no burst explains fail the forecast window that covered
	// them, one finding per window.
	expected := map[int64]int{} // window start → index in bs
	predicted := make([]bool, len(bs))
	for _, e := range keep {
		if e.ExpectedStart.IsZero() || now.Sub(e.At) < fl.opts.Settle || matchedAny(matched, e) {
			continue
		}
		k := e.ExpectedStart.UnixMilli()
		i, ok := expected[k]
		if !ok {
			i = len(bs)
			expected[k] = i
			bs = append(bs, TrackedBurst{ID: fmt.Sprintf("%s:%s:%d", KindBurst, g, k), Burst: Burst{Start: e.ExpectedStart, End: e.ExpectedEnd}})
			matched = append(matched, nil)
			predicted = append(predicted, true)
		}
		matched[i] = append(matched[i], e)
	}
	var out []models.Finding
	for _, r := range fl.reported {
		r.seen = false
	}
	for i := range bs {
		b := &bs[i]
		id := KindFailed + ":" + strings.TrimPrefix(b.ID, KindBurst+":")
		r := fl.reported[id]
		if r != nil && r.done {
			continue
		}
		if len(matched[i]) == 0 {
			continue
		}
		f := failedFinding(g, b, matched[i], predicted[i])
		if !b.Open && now.Sub(b.End) > fl.opts.Grace {
			f.End = f.LastSeen
		}
		if r == nil {
			r = &failure{}
			fl.reported[id] = r
		}
		r.f, r.done, r.seen = f, !f.End.IsZero(), true
		out = append(out, f)
	}
	// A failed burst the detector no longer tracks ends where it was.
	var gone []string
	for id, r := range fl.reported {
		if !r.done && !r.seen && r.f.Subject == g {
			gone = append(gone, id)
		}
	}
	sort.Strings(gone)
	for _, id := range gone {
		r := fl.reported[id]
		r.f.End, r.done = r.f.LastSeen, true
		out = append(out, r.f)
	}
	// Forget what can no longer be reported again.
	for id, r := range fl.reported {
		if r.done && now.Sub(r.f.LastSeen) > fl.opts.Retention {
			delete(fl.reported, id)
		}
	}
	return out
}

// matchedAny reports whether e counts against a burst already.
func matchedAny(matched [][]WriteError, e WriteError) bool {
	for _, m := range matched {
		for _, x := range m {
			if x == e {
				return true
			}
		}
	}
	return false
}

func failedFinding(g models.Subject, b *TrackedBurst, errs []WriteError, predicted bool) models.Finding {
	type devKey struct{ dev, ds, status string }
	per := map[devKey]float64{}
	var total float64
	last := b.Start
	statuses := map[string]bool{}
	dss := map[string]bool{}
	for _, e := range errs {
		per[devKey{e.Device, e.DS, e.Status}] += e.Count
		total += e.Count
		if e.At.After(last) {
			last = e.At
		}
		statuses[e.Status] = true
		if e.DS != "" {
			dss[e.DS] = true
		}
	}
	keys := make([]devKey, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].dev != keys[j].dev {
			return keys[i].dev < keys[j].dev
		}
		return keys[i].status < keys[j].status
	})
	var devs []string
	ev := []models.Evidence{{Name: "write_errors", Value: total, Series: models.MetricLayoutStatsIOErrors},
		{Name: "burst_bytes", Value: math.Round(b.Bytes), Unit: "B"}}
	for _, k := range keys {
		if len(devs) == 0 || devs[len(devs)-1] != k.dev {
			devs = append(devs, k.dev)
		}
		note := k.dev + " " + k.status
		if k.ds != "" {
			note = k.dev + " (" + k.ds + ") " + k.status
		}
		ev = append(ev, models.Evidence{Name: "device_write_errors", Value: per[k], Series: models.MetricLayoutStatsIOErrors, Note: note})
	}
	var whats []string
	other := len(statuses)
	if statuses["NFS4ERR_NOSPC"] || statuses["NFS4ERR_DQUOT"] {
		whats = append(whats, "no space")
		other -= btoi(statuses["NFS4ERR_NOSPC"]) + btoi(statuses["NFS4ERR_DQUOT"])
	}
	if statuses["NFS4ERR_NXIO"] {
		whats = append(whats, "data server unreachable")
		other--
	}
	if other > 0 {
		whats = append(whats, "I/O errors")
	}
	what := strings.Join(whats, ", ")
	where := strings.Join(devs, ", ")
	if len(dss) > 0 {
		names := make([]string, 0, len(dss))
		for d := range dss {
			names = append(names, d)
		}
		sort.Strings(names)
		where += " (DS " + strings.Join(names, ", ") + ")"
	}
	lastSeen := last
	if b.End.After(lastSeen) {
		lastSeen = b.End
	}
	what2 := fmt.Sprintf("the checkpoint burst from %s failed", b.Start.UTC().Format(time.RFC3339))
	if predicted {
		what2 = fmt.Sprintf("the checkpoint expected from %s failed before it wrote a burst", b.Start.UTC().Format(time.RFC3339))
		ev = append(ev, models.Evidence{Name: "expected_window", Value: 1, Note: "no burst was written; the window is the checkpoint forecast's"})
	}
	return models.Finding{
		ID:       KindFailed + ":" + strings.TrimPrefix(b.ID, KindBurst+":"),
		Kind:     KindFailed,
		Subject:  g,
		Severity: models.SeverityCritical,
		Score:    total,
		Start:    b.Start,
		LastSeen: lastSeen,
		Summary:  fmt.Sprintf("%s %s: %s (%s): %.0f write errors on %s", g.Kind, g.ID, what2, what, total, where),
		Evidence: ev,
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
