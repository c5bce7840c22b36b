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

// measure reads the numbers behind a plan, averaged over the verify window
// before it started (after = false: at its start) or after its moves ended
// (after = true: at now). Missing numbers are left out.
func (e *Engine) measure(ctx context.Context, p *models.Action, kids []models.Action, at time.Time, after bool) map[string]float64 {
	out := map[string]float64{}
	w := time.Duration(e.cfg.Verify.Window)
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

// verdict compares before and after. Worse: the affected clients' GPU
// utilisation fell by more than verify.worse_gpu_drop, or (rebalance) the
// pool's max/mean load rose by 10 %. Effective: an evacuation left no
// stripe behind; a rebalance lowered the moved-from devices' load or read
// latency, or the pool's max/mean load, by at least 5 %, or raised GPU
// utilisation by a point. Otherwise ineffective; unknown without numbers.
func (e *Engine) verdict(_ context.Context, p *models.Action) (models.Verdict, string) {
	b, a := p.Effect.Before, p.Effect.After
	get := func(m map[string]float64, k string) (float64, bool) { v, ok := m[k]; return v, ok }
	if gb, ok1 := get(b, EffectGPUUtil); ok1 {
		if ga, ok2 := get(a, EffectGPUUtil); ok2 && gb-ga > e.cfg.Verify.WorseGPUDrop {
			return models.VerdictWorse, fmt.Sprintf("GPU utilisation of the affected clients fell from %.3f to %.3f", gb, ga)
		}
	}
	if p.Kind == models.ActionEvacuateDevice || p.Kind == models.ActionPromoteSpare {
		left, ok := get(a, EffectStripesLeft)
		switch {
		case !ok:
			return models.VerdictUnknown, "the device's stripes could not be listed"
		case left == 0:
			return models.VerdictEffective, "the device holds no stripe"
		default:
			return models.VerdictIneffective, fmt.Sprintf("%.0f stripes are still on the device", left)
		}
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
