package analysis

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ballast-io/ballast/analyzer/hotspot"
	"github.com/ballast-io/ballast/analyzer/starvation"
	"github.com/ballast-io/ballast/models"
)

// latencySmoothing is the time constant of the read-latency average the
// starvation stage gives the analyzer.
const latencySmoothing = 30 * time.Second

// latencyAvg is a subject's smoothed read latency (mean, seconds) and its
// recent reads and read time per second, averaged alike.
type latencyAvg struct {
	mean, ops, secs float64
}

// add blends a tick of dt seconds whose n reads took lat on average into
// the average, w being the tick's 1 − e^(−dt/latencySmoothing). A tick
// that carried at least the recent reads per second, or at least the
// recent read time per second, moves the mean by w, as a plain time
// average; one that carried less of both moves it by w times the larger
// share: what a handful of reads took says little next to the thousands
// a tick usually brings. A device whose job paused for a synchronous
// checkpoint and that completed one read in the tick, queued behind the
// checkpoint's writes, is then not slow for the next minute on that one
// read against peers that completed none (port-saturation, seed 1: ds00's
// drives, 1–3 reads at 1.6 ms against ~20,000 at 0.2 ms in the ticks
// before and after, read 0.5 ms for three ticks and made a network path
// finding). Either share counts in full because each alone is biased: a
// slow path completes fewer reads (a client keeps so many in flight), so
// a fault's first ticks carry fewer reads but more read time, and the
// ticks after it more reads in less time. A tick with no reads (NaN, n 0)
// leaves the mean and lets the rates decay. The first reads set it.
func (l latencyAvg) add(ok bool, lat, n, dt, w float64) latencyAvg {
	has := !math.IsNaN(lat) && n > 0
	opsRate, secsRate := 0.0, 0.0
	if has && dt > 0 {
		opsRate, secsRate = n/dt, n*lat/dt
	}
	if !ok || math.IsNaN(l.mean) {
		if !has {
			return latencyAvg{mean: math.NaN()}
		}
		return latencyAvg{mean: lat, ops: opsRate, secs: secsRate}
	}
	if has {
		f := 1.0
		if l.ops > 0 && l.secs > 0 && opsRate > 0 {
			f = min(1, max(opsRate/l.ops, secsRate/l.secs))
		}
		l.mean += w * f * (lat - l.mean)
	}
	if dt > 0 {
		l.ops += w * (opsRate - l.ops)
		l.secs += w * (secsRate - l.secs)
	}
	return l
}

// gpuQuery reads every GPU's DCGM utilisation.
const gpuQuery = `last_over_time(ballast_gpu_utilization_ratio[30s]) keep_metric_names`

// gpuHistoryQuery reads every GPU's level over window, sampled every
// step: the median of its readings within band of its highest reading in
// the window, the level a GPU had reached before the stage first saw it
// (GPU.Before). Not the highest reading itself: a fed GPU reads a little
// under 1 by a different amount each sample (the host's gaps between
// steps), so its highest reading over half an hour is above its level
// (1 − |N(0, 0.02)| per reading: max ≈ 1.000 against a mean of 0.984 and
// a median of 0.986), and an mds started during a fault would charge that
// difference for as long as the fault lasts. The band is the one the
// analyzer's level follows readings in (MinDrop/2) and fedLevel takes its
// median from, so a GPU fed for part of the window and starved since
// gets the level of its fed readings, whichever share of the window they
// are.
func gpuHistoryQuery(window, step time.Duration, band float64) string {
	w, st := int(window.Seconds()), max(1, int(step.Seconds()))
	return fmt.Sprintf(`quantile_over_time(0.5, (ballast_gpu_utilization_ratio >= on(node, gpu) group_left() (max by (node, gpu) (max_over_time(ballast_gpu_utilization_ratio[%ds] @ end())) - %g))[%ds:%ds]) keep_metric_names`, w, band, w, st)
}

// nicSpeedQuery reads each agent's NIC link speeds (bytes/s); a link
// without one (virtual, down, a host whose agent predates the series)
// has none.
const nicSpeedQuery = `max by (node, device) (last_over_time(` + models.MetricNetSpeed + `[10m]))`

// nicRateQuery is each agent NIC's busier direction over the rate window:
// a full-duplex link saturates in one direction at a time (checkpoint
// writes fill a DS's receive side, reads its transmit side).
func (s *starvationStage) nicRateQuery() string {
	return fmt.Sprintf(`max by (node, device) (rate({__name__=~"%s|%s"}[%ds]))`,
		models.MetricNetReceiveBytes, models.MetricNetTransmitBytes, int(s.a.opts.RateWindow.Seconds()))
}

// nicReceiveQuery is each agent NIC's receive rate over the rate window:
// what a client node's reads arrive through (its own checkpoint writes
// fill the other direction and do not slow them).
func (s *starvationStage) nicReceiveQuery() string {
	return fmt.Sprintf(`max by (node, device) (rate(%s[%ds]))`, models.MetricNetReceiveBytes, int(s.a.opts.RateWindow.Seconds()))
}

// nicUtils is each node's NIC utilisation, the max over its interfaces
// with a link speed: busier is max(receive, transmit rate) / speed (a
// DS's link), receive the receive rate / speed (a client's reads); speed
// is its fastest interface's link speed, bytes/s.
type nicUtils struct{ busier, receive, speed map[string]float64 }

// nicUtil returns each node's NIC utilisation (nicUtils). A node with no
// speed series is absent (its utilisation stays unknown).
func (s *starvationStage) nicUtil(ctx context.Context, now time.Time) (nicUtils, error) {
	speeds, err := s.a.q.Query(ctx, nicSpeedQuery, now)
	if err != nil || len(speeds) == 0 {
		return nicUtils{}, err
	}
	type nic struct{ node, dev string }
	speed := map[nic]float64{}
	var out nicUtils
	out.speed = map[string]float64{}
	for i := range speeds {
		sr := &speeds[i]
		if v, ok := lastValue(sr); ok && v > 0 && sr.Label("node") != "" {
			speed[nic{sr.Label("node"), sr.Label("device")}] = v
			out.speed[sr.Label("node")] = max(out.speed[sr.Label("node")], v)
		}
	}
	util := func(expr string) (map[string]float64, error) {
		rates, err := s.a.q.Query(ctx, expr, now)
		if err != nil {
			return nil, err
		}
		out := map[string]float64{}
		for i := range rates {
			sr := &rates[i]
			k := nic{sr.Label("node"), sr.Label("device")}
			v, ok := lastValue(sr)
			if sp := speed[k]; ok && sp > 0 && v >= 0 && !math.IsNaN(v) {
				if u, seen := out[k.node]; !seen || v/sp > u {
					out[k.node] = v / sp
				}
			}
		}
		return out, nil
	}
	if out.busier, err = util(s.nicRateQuery()); err != nil {
		return nicUtils{}, err
	}
	if out.receive, err = util(s.nicReceiveQuery()); err != nil {
		return nicUtils{}, err
	}
	return out, nil
}

// starvationStage feeds analyzer/starvation: GPU utilisation from DCGM
// (and, at the first sight of a GPU, its level in the store over
// LevelTau: before),
// each node's read paths from the tick's stripe deltas (the analyzer
// remembers them while a node goes quiet), the health of stripes, devices
// and DSs from the tick's LAYOUTSTATS sums (latency), a DS's NIC
// utilisation from its agent's netdev series (nicUtil; the DS subject is
// its agent's node once the device table names it), whether the DS's
// agent answers and bytes not delivered (down: downRule) and the hotspot
// stage's findings whose condition holds at this tick (hotNow), and the groups the checkpoint stage sees writing a
// burst or starting one (a write rate clearly above idle, checkpointStage). Each GPU node's own side is a client subject at the root of its
// path, judged by its NIC's receive utilisation (a node behind a link too
// slow for its GPUs, or one filled by other traffic) and by its read
// latency against the other clients' on the same devices (clientside.go).
// A GPU's job is its node's client group, the subject the checkpoint
// stage uses.
type starvationStage struct {
	a       *Analysis
	an      *starvation.Analyzer
	prev    map[string]float64
	mu      sync.Mutex
	minutes map[time.Time]map[string]float64
	parents map[models.Subject]models.Subject // device → DS
	latency map[models.Subject]float64        // smoothed read latency
	// latAvg is what latency is averaged from (latencyAvg.add).
	latAvg map[models.Subject]latencyAvg
	// clientLat is each client's smoothed read latency against the other
	// clients' on the same devices (clientside.go).
	clientLat map[string]clientLatency
	// nics is the last tick's NIC utilisation, which the hotspot stage's
	// network-path judgement reads too (it runs first, so it sees the
	// previous tick's).
	nics nicUtils
	// latAt is the tick observeLatency last ran for; latNow its averages
	// of the subjects that completed reads in it.
	latAt  time.Time
	latNow map[models.Subject]float64
	// episodes are every episode on its own, by id, for scoring.
	episodes map[string]starvation.Episode
	// seen are the GPUs the analyzer has had; a GPU not among them gets
	// its earlier level from the store (before).
	seen map[string]bool
	// historyFailing is set while the history query fails, so the failure
	// is logged once.
	historyFailing bool
}

func newStarvationStage(a *Analysis) (*starvationStage, error) {
	an, err := starvation.New(starvation.Options{})
	if err != nil {
		return nil, err
	}
	return &starvationStage{a: a, an: an, latency: map[models.Subject]float64{}, latAvg: map[models.Subject]latencyAvg{}, latNow: map[models.Subject]float64{}, clientLat: map[string]clientLatency{}, prev: map[string]float64{}, minutes: map[time.Time]map[string]float64{}, parents: map[models.Subject]models.Subject{},
		episodes: map[string]starvation.Episode{}, seen: map[string]bool{}}, nil
}

func (s *starvationStage) Name() string { return "starvation" }

func (s *starvationStage) Run(ctx context.Context, now time.Time) ([]models.Finding, error) {
	series, err := s.a.q.Query(ctx, gpuQuery, now)
	if err != nil {
		return nil, err
	}
	var in starvation.Input
	seen := map[string]bool{}
	for i := range series {
		sr := &series[i]
		v, ok := lastValue(sr)
		node := sr.Label("node")
		if !ok || node == "" || math.IsNaN(v) {
			continue
		}
		id := node + "/" + sr.Label("gpu")
		if seen[id] {
			continue
		}
		seen[id] = true
		job := node
		if g, ok := groupOf(sr); ok {
			job = g.ID
		}
		in.GPUs = append(in.GPUs, starvation.GPU{ID: id, Node: node, Job: job, Util: min(max(v, 0), 1)})
	}
	s.before(ctx, now, in.GPUs)

	// Paths at device level: the analyzer remembers paths and topology
	// per device anyway, and listing every stripe a node touched (tens of
	// thousands) would make each tick cost as much as the twin's physics.
	// This is starvation.PathsFromStripes folded to devices, summed
	// directly. Hot stripes (only on hot devices) are listed under their
	// device, so the blame walk still reaches them.
	type nodeDev struct {
		node string
		dev  models.Subject
	}
	bytes := map[nodeDev]float64{}
	total := map[string]float64{}
	hotStripes := map[models.Subject]models.Subject{}
	for i := range s.a.stripes.tick {
		d := &s.a.stripes.tick[i]
		dev := models.Subject{Kind: models.SubjectDevice, ID: d.DeviceID}
		if d.DS != "" {
			s.parents[dev] = models.Subject{Kind: models.SubjectDS, ID: d.DS}
		}
		b := float64(d.Read.BytesCompleted)
		if b == 0 {
			b = float64(d.Read.Bytes)
		}
		if b <= 0 {
			continue
		}
		bytes[nodeDev{d.Client, dev}] += b
		total[d.Client] += b
		if s.a.hot.hotNow[dev] {
			if st := (models.Subject{Kind: models.SubjectStripe, ID: hotspot.StripeID(d)}); s.a.hot.hotNow[st] {
				hotStripes[st] = dev
			}
		}
	}
	keys := make([]nodeDev, 0, len(bytes))
	for k := range bytes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].node != keys[j].node {
			return keys[i].node < keys[j].node
		}
		return keys[i].dev.ID < keys[j].dev.ID
	})
	for _, k := range keys {
		in.Paths = append(in.Paths, starvation.Path{Node: k.node, Subject: k.dev, Share: min(bytes[k]/total[k.node], 1)})
	}

	// Health: every device and DS with LAYOUTSTATS series, and the hot
	// stripes under their devices.
	listed := map[models.Subject]bool{}
	down := s.downRule()
	nics, err := s.nicUtil(ctx, now)
	if err != nil {
		return nil, err
	}
	s.nics = nics
	util := func(sub models.Subject) float64 {
		if u, ok := nics.busier[sub.ID]; ok && sub.Kind == models.SubjectDS {
			return u
		}
		return math.NaN()
	}
	s.observeLatency(now)
	for _, l := range s.a.hot.loads {
		lat, ok := s.latNow[l.subject]
		if !ok {
			lat = math.NaN()
		}
		h := starvation.Health{Subject: l.subject, Parent: s.parents[l.subject], Util: util(l.subject),
			Latency: lat, Down: down(l), Hot: s.a.hot.hotNow[l.subject]}
		in.Health = append(in.Health, h)
		listed[l.subject] = true
	}
	stripes := make([]models.Subject, 0, len(hotStripes))
	for sub := range hotStripes {
		stripes = append(stripes, sub)
	}
	sort.Slice(stripes, func(i, j int) bool { return stripes[i].ID < stripes[j].ID })
	for _, sub := range stripes {
		in.Health = append(in.Health, starvation.Health{Subject: sub, Parent: hotStripes[sub], Util: math.NaN(), Latency: math.NaN(), Hot: true})
		listed[sub] = true
	}
	// Parents a path walks through must be listed for the walk to reach
	// the root; add any the series did not cover.
	for i := 0; i < len(in.Health); i++ {
		p := in.Health[i].Parent
		if p.ID != "" && !listed[p] {
			listed[p] = true
			in.Health = append(in.Health, starvation.Health{Subject: p, Parent: s.parents[p], Util: util(p), Latency: math.NaN(), Hot: s.a.hot.hotNow[p],
				Down: p.Kind == models.SubjectDS && s.agentDown(p.ID)})
		}
	}
	for _, p := range in.Paths {
		if !listed[p.Subject] {
			listed[p.Subject] = true
			in.Health = append(in.Health, starvation.Health{Subject: p.Subject, Parent: s.parents[p.Subject], Util: math.NaN(), Latency: math.NaN()})
		}
	}
	// Each GPU node's own side (its NIC, its link) is a root of its path
	// with share 1: every byte it reads arrives through it. Its health is
	// its agent's receive utilisation and its read latency against what
	// the other clients see from the same devices (expected); a node with
	// neither gets no client subject (nothing to judge it by).
	var clients []string
	seenNode := map[string]bool{}
	for _, g := range in.GPUs {
		_, nic := nics.receive[g.Node]
		_, lat := s.clientLat[g.Node]
		if (nic || lat) && !seenNode[g.Node] {
			seenNode[g.Node] = true
			clients = append(clients, g.Node)
		}
	}
	sort.Strings(clients)
	for _, node := range clients {
		sub := models.Subject{Kind: models.SubjectClient, ID: node}
		if listed[sub] {
			continue
		}
		listed[sub] = true
		h := starvation.Health{Subject: sub, Util: math.NaN(), Latency: math.NaN()}
		if u, ok := nics.receive[node]; ok {
			h.Util = u
		}
		if l, ok := s.clientLat[node]; ok {
			h.Latency, h.ExpectedLatency = l.own, l.expected
		}
		in.Paths = append(in.Paths, starvation.Path{Node: node, Subject: sub, Share: 1})
		in.Health = append(in.Health, h)
	}
	for g := range s.a.ckpt.active {
		in.Checkpointing = append(in.Checkpointing, g)
	}
	sort.Strings(in.Checkpointing)
	for g := range s.a.ckpt.starting {
		in.Starting = append(in.Starting, g)
	}
	sort.Strings(in.Starting)
	if err := s.an.Observe(now, in); err != nil {
		return nil, err
	}
	s.recordBlame(now)
	s.recordEpisodes()
	return s.an.Findings(now), nil
}

// historyQuery is gpuHistoryQuery with the analyzer's LevelTau and
// MinDrop/2, sampled at the scrape interval.
func (s *starvationStage) historyQuery() string {
	o := s.an.Options()
	return gpuHistoryQuery(o.LevelTau, s.a.opts.ScrapeInterval, o.MinDrop/2)
}

// before sets GPU.Before of the GPUs the analyzer has not had yet — all
// of them at the mds's first tick — to their level in the store over the
// analyzer's LevelTau (gpuHistoryQuery), one query for all. An mds that
// starts (or restarts, or takes over as leader) while GPUs already starve
// then counts their loss against the level they had, as one that had been
// running would. A failed query is logged once and leaves Before unknown.
func (s *starvationStage) before(ctx context.Context, now time.Time, gpus []starvation.GPU) {
	fresh := false
	for _, g := range gpus {
		if !s.seen[g.ID] {
			fresh = true
			break
		}
	}
	if !fresh {
		return
	}
	q := s.historyQuery()
	series, err := s.a.q.Query(ctx, q, now)
	if err != nil {
		if !s.historyFailing {
			s.a.opts.Logger.Warn("starvation: cannot read GPU utilisation history; GPUs seen for the first time take their current utilisation as their level", "query", q, "err", err)
		}
		s.historyFailing = true
		series = nil
	} else {
		s.historyFailing = false
	}
	hist := map[string]float64{}
	for i := range series {
		sr := &series[i]
		if v, ok := lastValue(sr); ok && v >= 0 && sr.Label("node") != "" {
			id := sr.Label("node") + "/" + sr.Label("gpu")
			hist[id] = max(hist[id], min(v, 1))
		}
	}
	for i := range gpus {
		g := &gpus[i]
		if !s.seen[g.ID] {
			g.Before = hist[g.ID]
			s.seen[g.ID] = true
		}
	}
}

// observeLatency updates, once per tick, the smoothed read latency of
// every device and DS in the tick's loads (without the reads of clients
// slow on their own side) and each client's latency against its peers'.
// The hotspot stage calls it before judging network paths, so a path is
// judged on this tick's reads, not the previous tick's (the starvation
// stage runs after it); the starvation stage calls it too and finds it
// done. latNow holds the tick's averages of the subjects that completed
// reads in it.
func (s *starvationStage) observeLatency(now time.Time) {
	if !s.latAt.IsZero() && !now.After(s.latAt) {
		return
	}
	// One tick's mean read latency is a handful of requests on a quiet
	// device; smoothing it over latencySmoothing keeps one slow burst of
	// requests from reading as a slow device.
	w, dt := 1.0, 0.0
	if !s.latAt.IsZero() {
		dt = now.Sub(s.latAt).Seconds()
		w = 1 - math.Exp(-dt/latencySmoothing.Seconds())
	}
	s.latAt = now
	// Clients slow on their own side (clientside.go): their reads are left
	// out of the devices' and DSs' latency, which they would make look slow.
	reads := clientReads(s.a.stripes.tick)
	for c, l := range clientLatencies(reads) {
		if prev, ok := s.clientLat[c]; ok {
			l = clientLatency{own: prev.own + w*(l.own-prev.own), expected: prev.expected + w*(l.expected-prev.expected)}
		}
		s.clientLat[c] = l
	}
	var excluded []string
	for c, l := range s.clientLat {
		if l.slowSide() {
			excluded = append(excluded, c)
		}
	}
	sort.Strings(excluded)
	clear(s.latNow)
	for _, l := range s.a.hot.loads {
		lat, n := latencyWithout(l, reads, excluded)
		avg, ok := s.latAvg[l.subject]
		avg = avg.add(ok, lat, n, dt, w)
		s.latAvg[l.subject] = avg
		if !math.IsNaN(lat) {
			s.latency[l.subject] = avg.mean
			s.latNow[l.subject] = avg.mean
		}
	}
}

// recordEpisodes keeps the latest form of every episode, for scoring:
// findings fold short episodes together, scores count each one.
func (s *starvationStage) recordEpisodes() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.an.Episodes() {
		s.episodes[e.Finding.ID] = e
	}
}

func (s *starvationStage) episodesCopy() []starvation.Episode {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]starvation.Episode, 0, len(s.episodes))
	for _, e := range s.episodes {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Finding.ID < out[j].Finding.ID })
	return out
}

// agentDown reports whether the DS's agent is known to have failed its
// last scrape.
func (s *starvationStage) agentDown(ds string) bool {
	down, known := s.a.ids.AgentDown(ds)
	return known && down
}

// downRule returns whether a device or DS is down this tick. A DS whose
// agent the device table joins to it is down exactly when that agent
// failed its last scrape, and so are its devices. Otherwise bytes not
// delivered mean down — unless some DS is known down: a client's stream
// held up by the lost DS leaves bytes undelivered on the other DSs of the
// same files too, and those peers are waiting, not lost.
func (s *starvationStage) downRule() func(*subjectLoad) bool {
	anyDown := false
	for _, l := range s.a.hot.loads {
		if l.subject.Kind == models.SubjectDS && s.agentDown(l.subject.ID) {
			anyDown = true
			break
		}
	}
	return func(l *subjectLoad) bool {
		ds := l.subject
		if ds.Kind == models.SubjectDevice {
			ds = s.parents[ds]
		}
		if ds.Kind == models.SubjectDS {
			if down, known := s.a.ids.AgentDown(ds.ID); known && down {
				return true
			}
		}
		return l.notDeliveredBytes > 0 && !anyDown
	}
}

// BlameRecord is the idle GPU-seconds the starvation analyzer charged to one
// cause within one minute, recorded for scoring attribution over time.
type BlameRecord struct {
	Minute time.Time `json:"minute"`
	// Cause is the blamed subject's String form, "checkpoint:<group>" for a
	// checkpoint pause, or "not-storage" for idle time on healthy paths.
	Cause   string  `json:"cause"`
	Seconds float64 `json:"gpu_seconds"`
}

// recordBlame books what the analyzer charged since the previous tick to
// the minute the tick's interval belongs to.
func (s *starvationStage) recordBlame(now time.Time) {
	minute := now.Add(-time.Nanosecond).Truncate(time.Minute)
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.an.LostByCause() {
		if d := v - s.prev[k]; d > 0 {
			m := s.minutes[minute]
			if m == nil {
				m = map[string]float64{}
				s.minutes[minute] = m
			}
			m[k] += d
		}
		s.prev[k] = v
	}
}

// MetricGPULostSeconds is the series of idle GPU-seconds the starvation
// analyzer charged to each cause since the mds started: cause is the
// blamed subject ("device:…", "ds:…", "port:…", "stripe:…", or "client:…"
// for a GPU node's own NIC), "checkpoint:<group>" for a checkpoint pause
// or "not-storage" for idle time on healthy storage paths; cause_kind is
// the part before the colon.
// sum by (cause_kind) (increase(…[1h])) / 3600 is GPU-hours lost per hour.
const MetricGPULostSeconds = "ballast_gpu_lost_seconds_total"

// series returns MetricGPULostSeconds at now, one sample per cause.
func (s *starvationStage) series(now time.Time) []models.Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]models.Sample, 0, len(s.prev))
	for cause, v := range s.prev {
		kind, _, _ := strings.Cut(cause, ":")
		out = append(out, models.Sample{
			Name:      MetricGPULostSeconds,
			Labels:    []models.Label{{Name: "cause", Value: cause}, {Name: "cause_kind", Value: kind}},
			Timestamp: now.UnixMilli(),
			Value:     v,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Labels[0].Value < out[j].Labels[0].Value })
	return out
}

func (s *starvationStage) blame() []BlameRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []BlameRecord
	for m, causes := range s.minutes {
		for c, v := range causes {
			out = append(out, BlameRecord{Minute: m, Cause: c, Seconds: math.Round(v*1000) / 1000})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Minute.Equal(out[j].Minute) {
			return out[i].Minute.Before(out[j].Minute)
		}
		return out[i].Cause < out[j].Cause
	})
	return out
}
