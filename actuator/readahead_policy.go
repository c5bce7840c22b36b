package actuator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/models"
)

// The closed loop (actuators.readahead.policy) chooses a mount's
// read-ahead from what the mds sees of it, never from anything a real
// cluster would not show: the node's workload class (the workload
// analyzer's workload_profile findings), the mount's read amplification
// (server ÷ application read bytes, from mountstats), its writes, the
// node's GPU utilisation (dcgm), gpu_starvation findings, and the data
// servers' headroom (the busiest DS device's utilisation, diskstats). It
// takes one step at a time as a set_read_ahead action, which the engine
// verifies and rolls back when it did not help; a direction that did not
// help is not tried again on that mount within policy.hold
// (docs/readahead.md#how-values-are-chosen).

// Params of a policy's set_read_ahead action.
const (
	ParamPolicy    = "policy"    // "closed_loop"
	ParamDirection = "direction" // "raise" or "lower"
	policyName     = "closed_loop"
)

// Workload classes and finding kinds the policy reads (analyzer/workload's
// and analyzer/starvation's; actuator does not import the analyzers).
const (
	findingProfile    = "workload_profile"
	findingStarvation = "gpu_starvation"
	findingBurst      = "checkpoint_burst"
	classTraining     = "training-read"
	classScan         = "analytics-scan"
	classInference    = "inference"
)

// ReadAheadPolicy is actuators.readahead.policy.
type ReadAheadPolicy struct {
	// Enabled turns the closed loop on; off, only pins change read-ahead.
	Enabled bool `yaml:"enabled"`
	// StarvedGPUUtil: a node whose GPUs averaged below it over the verify
	// window is starved.
	StarvedGPUUtil float64 `yaml:"starved_gpu_util"`
	// SequentialAmplification: a mount whose servers sent at most this
	// many bytes per byte the applications read does not waste read-ahead.
	SequentialAmplification float64 `yaml:"sequential_amplification"`
	// RandomAmplification: a mount at or above it wastes read-ahead.
	RandomAmplification float64 `yaml:"random_amplification"`
	// MinKB and MaxKB bound the values the loop asks for (the agent's own
	// bounds apply too).
	MinKB int64 `yaml:"min_kb"`
	MaxKB int64 `yaml:"max_kb"`
	// MaxDSUtil: no raise while the busiest data server device is busier.
	MaxDSUtil float64 `yaml:"max_ds_util"`
	// Hold is how long a direction whose change did not help (rolled back
	// or failed) is not tried again on that mount.
	Hold Duration `yaml:"hold"`
}

func defaultReadAheadPolicy() ReadAheadPolicy {
	return ReadAheadPolicy{Enabled: true, StarvedGPUUtil: 0.9, SequentialAmplification: 1.1, RandomAmplification: 1.5,
		MinKB: 64, MaxKB: 16384, MaxDSUtil: 0.8, Hold: Duration(24 * time.Hour)}
}

func (p *ReadAheadPolicy) validate(prefix string) []error {
	var errs []error
	bad := func(field string, v any, why string) {
		errs = append(errs, fmt.Errorf("%s%s: %v %s", prefix, field, v, why))
	}
	if !(p.StarvedGPUUtil > 0 && p.StarvedGPUUtil <= 1) {
		bad("starved_gpu_util", p.StarvedGPUUtil, "is outside (0, 1]")
	}
	if !(p.SequentialAmplification >= 1) {
		bad("sequential_amplification", p.SequentialAmplification, "is below 1")
	}
	if !(p.RandomAmplification > p.SequentialAmplification) {
		bad("random_amplification", p.RandomAmplification, fmt.Sprintf("is not above sequential_amplification (%v)", p.SequentialAmplification))
	}
	if p.MinKB < 4 {
		bad("min_kb", p.MinKB, "is below 4")
	}
	if p.MaxKB < p.MinKB {
		bad("max_kb", p.MaxKB, fmt.Sprintf("is below min_kb (%d)", p.MinKB))
	}
	if !(p.MaxDSUtil > 0 && p.MaxDSUtil <= 1) {
		bad("max_ds_util", p.MaxDSUtil, "is outside (0, 1]")
	}
	if p.Hold < 0 {
		bad("hold", time.Duration(p.Hold), "is negative")
	}
	return errs
}

// raSignals is what the mds sees of one node's mount over the verify
// window, the policy's whole input.
type raSignals struct {
	// Class is the node's confirmed workload class ("" unknown).
	Class string
	// AppBytes, ServerBytes and WriteBytes are per second: what
	// applications read, what the servers sent for it (read-ahead
	// included), what applications wrote.
	AppBytes, ServerBytes, WriteBytes float64
	// GPUUtil is the node's mean GPU utilisation; HasGPU false when the
	// node reports no GPU.
	GPUUtil float64
	HasGPU  bool
	// StarvedFinding is an active gpu_starvation finding on this client.
	StarvedFinding bool
	// Checkpointed: a checkpoint burst of the node was seen within the
	// window (its GPUs paused for the checkpoint, not for data).
	Checkpointed bool
	// PathBlamed names an active gpu_starvation finding that blames a
	// storage subject (device, stripe, DS, port): the rebalancer's case.
	PathBlamed string
	// DSUtil is the busiest data server device's utilisation.
	DSUtil    float64
	HasDSUtil bool
	CurrentKB int64
	Bounds    models.ReadAheadBounds
	// HeldUp and HeldDown: a raise (lower) of this mount did not help
	// within policy.hold.
	HeldUp, HeldDown bool
}

// raChoice is the policy's decision: KB 0 changes nothing; Why explains
// it either way.
type raChoice struct {
	KB        int64
	Direction string
	Why       string
}

// features lists the signals for an action's reason.
func (s raSignals) features() string {
	var b strings.Builder
	fmt.Fprintf(&b, "class %s, read %.3g B/s, servers sent %.3g B/s", orUnknown(s.Class), s.AppBytes, s.ServerBytes)
	if s.AppBytes > 0 {
		fmt.Fprintf(&b, " (amplification %.2f)", s.ServerBytes/s.AppBytes)
	}
	if s.HasGPU {
		fmt.Fprintf(&b, ", GPU utilisation %.3f", s.GPUUtil)
	}
	if s.StarvedFinding {
		b.WriteString(", gpu_starvation finding on the node")
	}
	if s.HasDSUtil {
		fmt.Fprintf(&b, ", busiest DS device %.0f %% busy", 100*s.DSUtil)
	}
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// decideReadAhead is the policy: raise the read-ahead of a starved
// sequential reader (×2, ×4 when its GPUs are below half busy), lower that
// of a random reader that wastes it (÷2); otherwise leave it. Pure: every
// input is in s.
func decideReadAhead(p ReadAheadPolicy, s raSignals) raChoice {
	floor, ceil := max(p.MinKB, s.Bounds.MinKB), p.MaxKB
	if s.Bounds.MaxKB > 0 {
		ceil = min(ceil, s.Bounds.MaxKB)
	}
	if !(s.AppBytes > 0) || s.CurrentKB <= 0 {
		return raChoice{Why: "the mount reads nothing"}
	}
	amp := s.ServerBytes / s.AppBytes
	sequentialClass := s.Class == classTraining || s.Class == classScan
	random := s.Class == classInference || (!sequentialClass && amp >= p.RandomAmplification)
	switch {
	case random:
		if amp < p.RandomAmplification {
			// a random reader whose reads are not amplified (pread:
			// Linux reads ahead only for streams it sees as sequential)
			return raChoice{Why: fmt.Sprintf("random reader without waste (amplification %.2f below %.2f)", amp, p.RandomAmplification)}
		}
		if s.HeldDown {
			return raChoice{Why: "a lower read-ahead did not help this mount before (held)"}
		}
		kb := max(floor, s.CurrentKB/2)
		if kb >= s.CurrentKB {
			return raChoice{Why: fmt.Sprintf("already at the floor (%d KiB)", floor)}
		}
		return raChoice{KB: kb, Direction: "lower", Why: fmt.Sprintf("random reader wasting read-ahead: the servers send %.2f bytes per byte read; halving it", amp)}
	case !sequentialClass:
		return raChoice{Why: fmt.Sprintf("workload class %s: neither a sequential reader nor a random one wasting read-ahead", orUnknown(s.Class))}
	case amp > p.SequentialAmplification:
		return raChoice{Why: fmt.Sprintf("class %s but amplification %.2f is above %.2f: not reading sequentially", s.Class, amp, p.SequentialAmplification)}
	case s.WriteBytes >= s.AppBytes || s.Checkpointed:
		return raChoice{Why: "the node checkpointed within the window (or writes as much as it reads)"}
	case !(s.HasGPU && s.GPUUtil < p.StarvedGPUUtil) && !s.StarvedFinding:
		return raChoice{Why: "the node's GPUs are not starved"}
	case s.PathBlamed != "":
		return raChoice{Why: "starvation is blamed on the storage path (" + s.PathBlamed + "), not on read-ahead"}
	case s.HasDSUtil && s.DSUtil > p.MaxDSUtil:
		return raChoice{Why: fmt.Sprintf("no data server headroom: the busiest device is %.0f %% busy (policy.max_ds_util %.0f %%)", 100*s.DSUtil, 100*p.MaxDSUtil)}
	case s.HeldUp:
		return raChoice{Why: "a higher read-ahead did not help this mount before (held)"}
	}
	f := int64(2)
	if s.HasGPU && s.GPUUtil < 0.5 {
		f = 4
	}
	kb := min(ceil, s.CurrentKB*f)
	if kb <= s.CurrentKB {
		return raChoice{Why: fmt.Sprintf("already at the ceiling (%d KiB)", ceil)}
	}
	return raChoice{KB: kb, Direction: "raise", Why: fmt.Sprintf("starved sequential reader: ×%d", f)}
}

// planReadAheadPolicy runs the closed loop over every mount the agents
// report, except pinned ones and those with an open change.
func (e *Engine) planReadAheadPolicy(ctx context.Context, now time.Time, mode models.ActionMode) error {
	p := e.cfg.ReadAhead.Policy
	if !p.Enabled || e.opts.Measure == nil {
		return nil
	}
	e.mu.Lock()
	reps := make([]raReport, 0, len(e.raReports))
	for _, r := range e.raReports {
		reps = append(reps, r)
	}
	e.mu.Unlock()
	if len(reps) == 0 {
		return nil
	}
	sort.Slice(reps, func(i, j int) bool { return reps[i].rep.Node < reps[j].rep.Node })
	pinned := map[string]bool{}
	for _, pin := range e.cfg.ReadAhead.Pins {
		pinned[raKey(pin.Node, filepath.Clean(pin.MountPoint))] = true
	}
	class, starved, blamed := e.raFindings()
	if blamed == "" {
		e.mu.Lock()
		if b := e.raBlamed; !b.at.IsZero() && !now.Before(b.at) && now.Sub(b.at) <= time.Duration(e.cfg.Verify.Window) {
			blamed = b.subject + ", within the window"
		}
		e.mu.Unlock()
	}
	dsUtil, hasDS := e.raMeasure(ctx, fmt.Sprintf(`max(rate(%s{role="ds"}[%s]))`, models.MetricDiskIOTime, e.raWindow()), now)
	var errs []error
	for _, r := range reps {
		if now.Sub(r.at) > time.Duration(e.cfg.ReadAhead.ApplyTimeout) {
			continue // the node's agent stopped syncing
		}
		for _, m := range r.rep.Mounts {
			key := raKey(r.rep.Node, m.MountPoint)
			if m.Error != "" || pinned[key] || e.openPlanFor(key) {
				continue
			}
			s := e.raSignalsOf(ctx, now, r.rep, m)
			s.Class = class[r.rep.Node]
			s.StarvedFinding = starved[r.rep.Node]
			s.Checkpointed = !now.Before(e.raBurstAt(r.rep.Node)) && now.Sub(e.raBurstAt(r.rep.Node)) <= time.Duration(e.cfg.Verify.Window)
			s.PathBlamed = blamed
			s.DSUtil, s.HasDSUtil = dsUtil, hasDS
			s.HeldUp, s.HeldDown = e.raHeld(key, now, p)
			c := decideReadAhead(p, s)
			if c.KB == 0 {
				e.log.Debug("read-ahead left as it is", "node", r.rep.Node, "mountpoint", m.MountPoint, "why", c.Why, "features", s.features())
				continue
			}
			why := fmt.Sprintf("closed loop: %s on %s from %d to %d KiB: %s (%s)", m.MountPoint, r.rep.Node, m.CurrentKB, c.KB, c.Why, s.features())
			errs = append(errs, e.openReadAhead(ctx, now, mode, r.rep.Node, m, c.KB, false, why, map[string]string{ParamPolicy: policyName, ParamDirection: c.Direction}))
		}
	}
	return errors.Join(errs...)
}

func (e *Engine) raWindow() string {
	return fmt.Sprintf("%ds", int(max(1, time.Duration(e.cfg.Verify.Window).Seconds())))
}

func (e *Engine) raMeasure(ctx context.Context, expr string, at time.Time) (float64, bool) {
	v, ok, err := e.opts.Measure(ctx, expr, at)
	if err != nil {
		e.log.Debug("read-ahead policy query failed", "query", expr, "err", err)
		return 0, false
	}
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// raSignalsOf reads the mount's and node's numbers over the verify window.
func (e *Engine) raSignalsOf(ctx context.Context, now time.Time, rep models.ReadAheadReport, m models.ReadAheadMount) raSignals {
	w := e.raWindow()
	sel := fmt.Sprintf(`node=%q,mountpoint=%q`, rep.Node, m.MountPoint)
	s := raSignals{CurrentKB: m.CurrentKB, Bounds: rep.Bounds}
	s.AppBytes, _ = e.raMeasure(ctx, fmt.Sprintf(`sum(rate(%s{%s}[%s]))`, models.MetricNFSClientReadBytes, sel, w), now)
	s.ServerBytes, _ = e.raMeasure(ctx, fmt.Sprintf(`sum(rate(%s{%s}[%s]))`, models.MetricNFSClientServerReadBytes, sel, w), now)
	s.WriteBytes, _ = e.raMeasure(ctx, fmt.Sprintf(`sum(rate(%s{%s}[%s]))`, models.MetricNFSClientWriteBytes, sel, w), now)
	s.GPUUtil, s.HasGPU = e.raMeasure(ctx, fmt.Sprintf(`avg(avg_over_time(%s{node=%q}[%s]))`, models.MetricGPUUtilization, rep.Node, w), now)
	return s
}

func (e *Engine) raBurstAt(node string) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.raBurst[node]
}

// raFindings reads the active findings the policy uses: each client
// node's workload class, the clients a gpu_starvation finding names, and
// one starvation finding that blames a storage subject ("" none).
func (e *Engine) raFindings() (class map[string]string, starved map[string]bool, blamed string) {
	class, starved = map[string]string{}, map[string]bool{}
	for _, f := range e.activeFindings() {
		switch f.Kind {
		case findingProfile:
			// the analyzer's summary: "<kind> <id> runs workload class <class>"
			if f.Subject.Kind == models.SubjectClient {
				if _, c, ok := strings.Cut(f.Summary, "runs workload class "); ok {
					class[f.Subject.ID] = strings.TrimSpace(c)
				}
			}
		case findingStarvation:
			switch f.Subject.Kind {
			case models.SubjectClient:
				starved[f.Subject.ID] = true
			case models.SubjectJob:
				// a checkpoint pause: the job's own, not storage's
			default:
				if blamed == "" {
					blamed = f.Subject.String()
				}
			}
		}
	}
	return class, starved, blamed
}

// raHeld reports whether a raise (lower) of the mount key did not help
// (rolled back, failed or rejected) within the policy's hold.
func (e *Engine) raHeld(key string, now time.Time, p ReadAheadPolicy) (up, down bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range e.acts {
		if a.Kind != models.ActionSetReadAhead || a.Params[ParamPolicy] != policyName || subjectKey(a) != key {
			continue
		}
		if a.State != models.ActionRolledBack && a.State != models.ActionFailed && a.State != models.ActionRejected {
			continue
		}
		if now.Sub(a.Updated) >= time.Duration(p.Hold) {
			continue
		}
		switch a.Params[ParamDirection] {
		case "raise":
			up = true
		case "lower":
			down = true
		}
	}
	return up, down
}
