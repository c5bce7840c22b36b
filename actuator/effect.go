package actuator

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/models"
)

// Effect metric names, as ActionEffect.Before and After key them.
const (
	EffectSourceLoad    = "source_load_bytes_per_second" // Σ load of the devices moved from
	EffectSourceLatency = "source_read_latency_seconds"  // their mean read latency
	EffectPoolMaxMean   = "pool_max_mean"                // max/mean device load of the pool
	EffectGPUUtil       = "gpu_util"                     // mean GPU utilisation of the clients that read the moved stripes
	EffectStripesLeft   = "stripes_left"                 // stripes still on an evacuated device
)

// maxRegexDevices bounds the devices named in one query; larger pools are
// measured over every device.
const maxRegexDevices = 512

// measure reads the numbers behind a plan, averaged over the window w
// ending at at: before it started (after = false: at its start, over
// beforeWindow) or after its moves ended (after = true: at now, over the
// verify window). Missing numbers are left out.
func (e *Engine) measure(ctx context.Context, p *models.Action, kids []models.Action, at time.Time, w time.Duration, after bool) map[string]float64 {
	out := map[string]float64{}
	win := fmt.Sprintf("%ds", int(math.Max(1, w.Seconds())))
	srcs := map[string]bool{}
	for i := range kids {
		if kids[i].Move != nil && kids[i].RollbackOf == "" {
			srcs[kids[i].Move.From] = true
			if r := kids[i].Move.Restripe; r != nil {
				for _, d := range r.From {
					srcs[d] = true
				}
			}
		}
	}
	if p.Subject.Kind == models.SubjectDevice {
		srcs[p.Subject.ID] = true
	}
	if e.opts.Measure != nil && len(srcs) > 0 {
		re := idRegex(srcs)
		get := func(expr string) (float64, bool) {
			v, ok, err := e.opts.Measure(ctx, expr, at)
			if err != nil {
				e.log.Debug("effect query failed", "action", p.ID, "query", expr, "err", err)
				return 0, false
			}
			return v, ok && !math.IsNaN(v) && !math.IsInf(v, 0)
		}
		q := func(name, expr string) {
			if v, ok := get(expr); ok {
				out[name] = roundEffect(v)
			}
		}
		q(EffectSourceLoad, fmt.Sprintf(`sum(avg_over_time(%s{%s=~%q}[%s]))`, models.MetricLayoutStatsDeviceBytes, models.LabelLayoutStatsDeviceID, re, win))
		q(EffectSourceLatency, fmt.Sprintf(`avg(avg_over_time(%s{%s=~%q,%s="read"}[%s]))`, models.MetricLayoutStatsDeviceLatency, models.LabelLayoutStatsDeviceID, re, models.LabelLayoutStatsOp, win))
		pool := e.poolDevices(p)
		sel := ""
		if len(pool) > 0 && len(pool) <= maxRegexDevices {
			sel = fmt.Sprintf(`{%s=~%q}`, models.LabelLayoutStatsDeviceID, idRegex(pool))
		}
		load := fmt.Sprintf(`sum by (%s) (avg_over_time(%s%s[%s]))`, models.LabelLayoutStatsDeviceID, models.MetricLayoutStatsDeviceBytes, sel, win)
		// max and mean in two queries, so that each is one aggregate
		// (MeasureFunc may then take it in a fixed order) and the ratio is
		// taken here
		if mx, ok := get(fmt.Sprintf(`max(%s)`, load)); ok {
			if mean, ok := get(fmt.Sprintf(`avg(%s)`, load)); ok && mean != 0 {
				out[EffectPoolMaxMean] = roundEffect(mx / mean)
			}
		}
		if cl := p.Params["clients"]; cl != "" {
			set := map[string]bool{}
			for _, c := range strings.Split(cl, ",") {
				set[c] = true
			}
			q(EffectGPUUtil, fmt.Sprintf(`avg(avg_over_time(%s{node=~%q}[%s]))`, models.MetricGPUUtilization, idRegex(set), win))
		}
	}
	if after && (p.Kind == models.ActionEvacuateDevice || p.Kind == models.ActionPromoteSpare) {
		if refs, err := e.mover.Stripes(ctx, p.Subject.ID); err == nil {
			n := 0
			for _, r := range refs {
				if r.Bytes > 0 {
					n++
				}
			}
			out[EffectStripesLeft] = float64(n)
		}
	}
	return out
}

// minBeforeSamples is the fewest samples of each series a before-window
// spans, however recent the onset of the plan's condition: an average,
// not one reading. More reach back before the onset for a plan started
// soon after it (hot-shard, 30 s after: a third sample, from before the
// fault, took the pool's max/mean from 1.76 to 1.46).
const minBeforeSamples = 2

// defaultSampleInterval stands for Options.SampleInterval when it is zero:
// the default scrape interval and LAYOUTSTATS emit interval.
const defaultSampleInterval = 15 * time.Second

// beforeWindow is how far back from now (plan p's start) its before
// numbers are averaged, and a note when that is not verify.window. A plan
// with an onset (a rebalance: the earliest start of the hotspot findings
// that motivated it) reads from the onset when it started sooner than
// verify.window after it: the numbers it is judged against are the
// condition's, not a blend with the minutes before the condition began
// (hot-shard: a plan 30 s after the onset read 90 s of its 120-s window
// from before it: the pool's max/mean 1.16, 1.76 since the onset).
// The window spans minBeforeSamples samples at least, so it can start
// shortly before the onset; the note says so. Plans without an onset
// (evacuations: their verdict counts the stripes left) use verify.window.
func (e *Engine) beforeWindow(p *models.Action, now time.Time) (time.Duration, string) {
	w := time.Duration(e.cfg.Verify.Window)
	if p.Onset.IsZero() || !p.Onset.After(now.Add(-w)) {
		return w, ""
	}
	every := e.opts.SampleInterval
	if every <= 0 {
		every = defaultSampleInterval
	}
	least := min(w, minBeforeSamples*every)
	since := now.Sub(p.Onset).Truncate(time.Second)
	onset := fmt.Sprintf("the onset of %s at %s", p.FindingID, p.Onset.UTC().Format(time.RFC3339))
	if since >= least {
		return since, fmt.Sprintf("before: the %s since %s (verify.window %s reaches back before it)", since, onset, w)
	}
	return least, fmt.Sprintf("before: %s, the least for %d samples every %s: it starts %s before %s, so it includes numbers from before the condition",
		least, minBeforeSamples, every, least-max(since, 0), onset)
}

// effectDigits is how many significant digits of a measured number an
// effect keeps.
const effectDigits = models.JournalDigits

// roundEffect rounds a measured number to effectDigits significant digits
// and then to 6 decimals. The store does not give a number back to the
// last bit: VictoriaMetrics keeps the values of a block as integers at one
// decimal scale (lib/decimal), and which rows share a block depends on
// when it flushes and merges on its own wall-clock timers, so a value read
// back, and a sum over it, can differ in its last bit from run to run.
// Six decimals alone kept that bit for large numbers (7.8e10 B/s was
// journaled as 78419353223.0535 in one eval and 78419353223.05351 in
// another run of the same seed, CI stop 25); ten significant digits are
// far above what verification compares (10 % changes) and a last-bit
// difference reaches them only at a rounding boundary.
func roundEffect(x float64) float64 {
	return math.Round(models.RoundSignificant(x, effectDigits)*1e6) / 1e6
}

// idRegex is an anchored alternation of the quoted ids, sorted.
func idRegex(set map[string]bool) string {
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, regexp.QuoteMeta(id))
	}
	sort.Strings(ids)
	return strings.Join(ids, "|")
}

func (e *Engine) poolDevices(p *models.Action) map[string]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	pool := p.Subject.ID
	if p.Subject.Kind == models.SubjectDevice {
		pool = e.devs[p.Subject.ID].Pool
	}
	out := map[string]bool{}
	for id, d := range e.devs {
		if d.Pool == pool && d.State != StateSpare {
			out[id] = true
		}
	}
	return out
}

// verdict compares before and after. An evacuation or spare promotion of
// an at-risk drive is judged by what motivated it, its data: effective when
// the device holds no stripe, else ineffective (unknown when its stripes
// could not be listed); a GPU utilisation drop over its window is named in
// the reason but does not make it worse, because the window is one in
// which a failing drive is declining on its own (slow reads, retries) and
// the action is not reversible anyway (moving data back onto a failing
// drive is never the remedy; the migration budgets bound the copy's share
// of bandwidth). A wear-out replacement (not urgent) whose window saw
// that drop is worse, as a rebalance is. For a rebalance, worse: the
// affected clients' GPU utilisation fell by more than
// verify.worse_gpu_drop, or the pool's max/mean load rose by 10 %;
// effective: it lowered the moved-from devices' load or read latency, or
// the pool's max/mean load, by at least 5 %, or raised GPU utilisation by
// a point. Otherwise ineffective; unknown without numbers.
func (e *Engine) verdict(_ context.Context, p *models.Action) (models.Verdict, string) {
	b, a := p.Effect.Before, p.Effect.After
	get := func(m map[string]float64, k string) (float64, bool) { v, ok := m[k]; return v, ok }
	gpuDrop := ""
	if gb, ok1 := get(b, EffectGPUUtil); ok1 {
		if ga, ok2 := get(a, EffectGPUUtil); ok2 && gb-ga > e.cfg.Verify.WorseGPUDrop {
			gpuDrop = fmt.Sprintf("GPU utilisation of the affected clients fell from %.3f to %.3f", gb, ga)
		}
	}
	// A wear-out replacement's drive is not failing: a drop over its
	// (off-peak) window is the copy's to answer for, as a rebalance's is.
	wearout := strings.HasPrefix(p.FindingID, findingWearout) && !p.Urgent
	if (p.Kind == models.ActionEvacuateDevice || p.Kind == models.ActionPromoteSpare) && !(wearout && gpuDrop != "") {
		left, ok := get(a, EffectStripesLeft)
		v, why := models.VerdictIneffective, fmt.Sprintf("%.0f stripes are still on the device", left)
		switch {
		case !ok:
			v, why = models.VerdictUnknown, "the device's stripes could not be listed"
		case left == 0:
			v, why = models.VerdictEffective, "the device holds no stripe"
		}
		if gpuDrop != "" {
			why += "; " + gpuDrop + " over the window (the failing drive's own decline or the copy's traffic)"
		}
		return v, why
	}
	if gpuDrop != "" {
		return models.VerdictWorse, gpuDrop
	}
	if mb, ok1 := get(b, EffectPoolMaxMean); ok1 {
		if ma, ok2 := get(a, EffectPoolMaxMean); ok2 && ma > 1.1*mb {
			return models.VerdictWorse, fmt.Sprintf("the pool's max/mean device load rose from %.3f to %.3f", mb, ma)
		}
	}
	var better []string
	for _, k := range []string{EffectSourceLoad, EffectSourceLatency, EffectPoolMaxMean} {
		vb, ok1 := get(b, k)
		va, ok2 := get(a, k)
		if ok1 && ok2 && vb > 0 && va <= 0.95*vb {
			better = append(better, fmt.Sprintf("%s %.4g → %.4g", k, vb, va))
		}
	}
	if gb, ok1 := get(b, EffectGPUUtil); ok1 {
		if ga, ok2 := get(a, EffectGPUUtil); ok2 && ga >= gb+0.01 {
			better = append(better, fmt.Sprintf("%s %.3f → %.3f", EffectGPUUtil, gb, ga))
		}
	}
	if len(better) > 0 {
		return models.VerdictEffective, strings.Join(better, "; ")
	}
	if len(b) == 0 || len(a) == 0 {
		return models.VerdictUnknown, "no measurements before or after"
	}
	return models.VerdictIneffective, "no measured number improved by 5 %"
}
