// Package readahead is the client agent's side of read-ahead tuning: it
// finds the mounts it manages and their backing device info
// (/proc/self/mountinfo field 3 → /sys/class/bdi/<major:minor>/read_ahead_kb),
// reports their read-ahead to the mds and reconciles toward the desired
// value the mds answers, within bounds of its own that it enforces
// whatever the mds asks. It remembers each value it found before its first
// write in a state file (written before the write), and restores those
// values on shutdown, when the mds stops asking for a value, and when it
// has not reached the mds for longer than its lease (docs/readahead.md).
package readahead

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/procfs"

	"github.com/ballast-io/ballast/internal/units"
	"github.com/ballast-io/ballast/models"
)

// SyncPath is the mds endpoint agents POST their report to; the answer is
// the desired state.
const SyncPath = "/api/v1/readahead/sync"

// Config is the `readahead:` section of the client agent's config.
type Config struct {
	// MDSURL is the mds base URL (http://mds:9750); empty turns read-ahead
	// tuning off (the agent only reports read-ahead on /metrics).
	MDSURL string `yaml:"mds_url"`
	// TokenFile holds a bearer token with the act scope (docs/security.md).
	TokenFile string `yaml:"token_file"`
	// CAFile verifies an https mds.
	CAFile string `yaml:"ca_file"`
	// Poll is how often the agent syncs with the mds.
	Poll units.Duration `yaml:"poll"`
	// Lease: without a successful sync for this long, every original value
	// is restored.
	Lease units.Duration `yaml:"lease"`
	// MinKB and MaxKB bound any value written; MaxStepKB bounds one change.
	MinKB     int64 `yaml:"min_kb"`
	MaxKB     int64 `yaml:"max_kb"`
	MaxStepKB int64 `yaml:"max_step_kb"`
	// FSTypes are the filesystem types whose mounts are managed.
	FSTypes []string `yaml:"fs_types"`
	// MountPoints, when set, limits management to these mount points.
	MountPoints []string `yaml:"mountpoints"`
	// StateFile keeps the original values across restarts.
	StateFile string `yaml:"state_file"`
}

// DefaultConfig is off (no mds_url) with the bounds of docs/readahead.md.
func DefaultConfig() Config {
	return Config{
		Poll:      units.Duration(15 * time.Second),
		Lease:     units.Duration(5 * time.Minute),
		MinKB:     64,
		MaxKB:     16384,
		MaxStepKB: 8192,
		FSTypes:   []string{"nfs", "nfs4"},
		StateFile: "/var/lib/ballast/readahead.json",
	}
}

// Enabled reports whether the agent syncs with an mds.
func (c *Config) Enabled() bool { return c.MDSURL != "" }

// Validate names every bad field under prefix (e.g. "readahead.").
func (c *Config) Validate(prefix string) error {
	var errs []error
	bad := func(field string, v any, why string) {
		errs = append(errs, fmt.Errorf("%s%s: %v %s", prefix, field, v, why))
	}
	if c.MDSURL != "" && !strings.HasPrefix(c.MDSURL, "http://") && !strings.HasPrefix(c.MDSURL, "https://") {
		bad("mds_url", strconv.Quote(c.MDSURL), "is not an http:// or https:// URL")
	}
	if c.Poll < units.Duration(100*time.Millisecond) {
		bad("poll", time.Duration(c.Poll), "is below the minimum of 100ms")
	}
	if c.Lease < 2*c.Poll {
		bad("lease", time.Duration(c.Lease), fmt.Sprintf("must be at least twice poll (%s)", time.Duration(c.Poll)))
	}
	if c.MinKB < 4 {
		bad("min_kb", c.MinKB, "is below 4")
	}
	if c.MaxKB < c.MinKB {
		bad("max_kb", c.MaxKB, fmt.Sprintf("is below min_kb (%d)", c.MinKB))
	}
	if c.MaxStepKB < 4 {
		bad("max_step_kb", c.MaxStepKB, "is below 4")
	}
	if len(c.FSTypes) == 0 {
		bad("fs_types", "[]", "is empty")
	}
	for _, mp := range c.MountPoints {
		if !filepath.IsAbs(mp) {
			bad("mountpoints", strconv.Quote(mp), "is not an absolute path")
		}
	}
	if c.MDSURL != "" && c.StateFile == "" {
		bad("state_file", `""`, "is needed to remember the original values")
	}
	if c.MDSURL != "" && c.CAFile != "" {
		// Read as the agent does at start, so that config check refuses
		// what the agent would.
		if _, err := newClient(*c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Options are where the agent reads and who it is.
type Options struct {
	ProcRoot, SysRoot string
	Node              string
	// Client talks to the mds; nil builds one from the config (token, CA).
	Client *http.Client
	Now    func() time.Time
	Logger *slog.Logger
}

// original is one remembered value.
type original struct {
	MountPoint string `json:"mountpoint"`
	KB         int64  `json:"original_kb"`
}

// state is the durable part: bdi → the value found before the first write.
type state struct {
	Originals map[string]original `json:"originals"`
}

// mount is one managed mount as last seen.
type mount struct {
	models.ReadAheadMount
	desiredKB int64 // 0: none
	dryRunKB  int64
}

// Agent reconciles the read-ahead of the node's mounts toward the mds's
// desired state.
type Agent struct {
	cfg    Config
	opts   Options
	proc   procfs.FS
	client *http.Client
	token  func() (string, error)
	log    *slog.Logger

	mu      sync.Mutex
	st      state
	mounts  map[string]*mount // by mount point
	lastOK  time.Time
	expired bool
	met     counters

	stop chan struct{}
	done chan struct{}
}

type counters struct {
	writes, refusals, restores, syncErrors map[string]float64
}

// New returns an agent; it reads the state file (values a previous run
// changed stay remembered as originals) and touches nothing.
func New(cfg Config, opts Options) (*Agent, error) {
	if err := cfg.Validate("readahead."); err != nil {
		return nil, err
	}
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.SysRoot == "" {
		opts.SysRoot = "/sys"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	p, err := procfs.NewFS(opts.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("cannot open procfs %q: %w", opts.ProcRoot, err)
	}
	a := &Agent{cfg: cfg, opts: opts, proc: p, log: opts.Logger.With("component", "readahead"),
		mounts: map[string]*mount{}, st: state{Originals: map[string]original{}},
		met: counters{map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}}}
	a.client = opts.Client
	if a.client == nil {
		if a.client, err = newClient(cfg); err != nil {
			return nil, err
		}
	}
	a.token = func() (string, error) { return "", nil }
	if cfg.TokenFile != "" {
		path := cfg.TokenFile
		a.token = func() (string, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return "", fmt.Errorf("cannot read readahead.token_file: %w", err)
			}
			return strings.TrimSpace(string(b)), nil
		}
	}
	if err := a.load(); err != nil {
		return nil, err
	}
	return a, nil
}

// load reads the state file; a missing file is an empty state.
func (a *Agent) load() error {
	b, err := os.ReadFile(a.cfg.StateFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read the read-ahead state file: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("cannot parse the read-ahead state file %q: %w", a.cfg.StateFile, err)
	}
	if st.Originals == nil {
		st.Originals = map[string]original{}
	}
	a.st = st
	if len(st.Originals) > 0 {
		a.log.Info("remembered read-ahead originals from a previous run", "mounts", len(st.Originals))
	}
	return nil
}

// save writes the state file durably (temporary file, fsync, rename, fsync
// of the directory) or removes it when nothing is remembered.
func (a *Agent) save() error {
	if len(a.st.Originals) == 0 {
		if err := os.Remove(a.cfg.StateFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cannot remove the read-ahead state file: %w", err)
		}
		return nil
	}
	b, err := json.MarshalIndent(a.st, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(a.cfg.StateFile)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create the read-ahead state directory: %w", err)
	}
	f, err := os.CreateTemp(dir, ".readahead-*.json")
	if err != nil {
		return fmt.Errorf("cannot write the read-ahead state file: %w", err)
	}
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("cannot write the read-ahead state file: %w", err)
	}
	if err := os.Rename(f.Name(), a.cfg.StateFile); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("cannot write the read-ahead state file: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Start runs the sync loop until Stop.
func (a *Agent) Start() {
	a.mu.Lock()
	a.lastOK = a.opts.Now()
	stop, done := make(chan struct{}), make(chan struct{})
	a.stop, a.done = stop, done
	a.mu.Unlock()
	go a.loop(stop, done)
}

func (a *Agent) loop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(time.Duration(a.cfg.Poll))
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(a.cfg.Poll))
		if err := a.SyncOnce(ctx); err != nil {
			a.log.Warn("read-ahead sync failed", "err", err)
		}
		cancel()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// Stop ends the loop and restores every original value.
func (a *Agent) Stop() error {
	a.mu.Lock()
	stop, done := a.stop, a.done
	a.stop = nil
	a.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	return a.RestoreAll("agent shutting down")
}

// discover reads mountinfo and each managed mount's read_ahead_kb.
func (a *Agent) discover() error {
	ms, err := a.proc.GetMounts()
	if err != nil {
		return fmt.Errorf("cannot read mountinfo: %w", err)
	}
	types := map[string]bool{}
	for _, t := range a.cfg.FSTypes {
		types[t] = true
	}
	allowed := map[string]bool{}
	for _, mp := range a.cfg.MountPoints {
		allowed[filepath.Clean(mp)] = true
	}
	seen := map[string]*procfs.MountInfo{}
	for _, m := range ms {
		if !types[m.FSType] || (len(allowed) > 0 && !allowed[m.MountPoint]) {
			continue
		}
		seen[m.MountPoint] = m // the last one mounted wins
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for mp, old := range a.mounts {
		if m, ok := seen[mp]; !ok || m.MajorMinorVer != old.BDI {
			delete(a.mounts, mp)
		}
	}
	for mp, m := range seen {
		cur := a.mounts[mp]
		if cur == nil {
			cur = &mount{ReadAheadMount: models.ReadAheadMount{MountPoint: mp, BDI: m.MajorMinorVer, FSType: m.FSType, Source: m.Source}}
			a.mounts[mp] = cur
		}
		kb, err := a.read(m.MajorMinorVer)
		if err != nil {
			cur.Error = err.Error()
			continue
		}
		cur.CurrentKB, cur.Error = kb, ""
		cur.OriginalKB = kb
		if o, ok := a.st.Originals[m.MajorMinorVer]; ok && o.MountPoint == mp {
			cur.OriginalKB = o.KB
		}
	}
	// A remembered bdi that no longer backs the same mount point is
	// forgotten: its number may belong to another mount now.
	changed := false
	for bdi, o := range a.st.Originals {
		if m, ok := seen[o.MountPoint]; !ok || m.MajorMinorVer != bdi {
			a.log.Warn("forgetting the read-ahead original of a mount that is gone", "mountpoint", o.MountPoint, "bdi", bdi, "original_kb", o.KB)
			delete(a.st.Originals, bdi)
			changed = true
		}
	}
	if changed {
		return a.save()
	}
	return nil
}

func (a *Agent) path(bdi string) string {
	return filepath.Join(a.opts.SysRoot, "class", "bdi", bdi, "read_ahead_kb")
}

func (a *Agent) read(bdi string) (int64, error) {
	b, err := os.ReadFile(a.path(bdi))
	if err != nil {
		return 0, fmt.Errorf("cannot read read_ahead_kb: %w", err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cannot parse %q: %w", a.path(bdi), err)
	}
	return v, nil
}

// write sets read_ahead_kb with one write and reads it back.
func (a *Agent) write(bdi string, kb int64) (int64, error) {
	f, err := os.OpenFile(a.path(bdi), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return 0, fmt.Errorf("cannot open read_ahead_kb: %w", err)
	}
	_, werr := f.Write([]byte(strconv.FormatInt(kb, 10) + "\n"))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return 0, fmt.Errorf("cannot write %d to %s: %w", kb, a.path(bdi), err)
	}
	return a.read(bdi)
}

// SyncOnce reads the mounts, reports them to the mds, and applies its
// answer; without an answer it restores the originals once the lease ran
// out.
func (a *Agent) SyncOnce(ctx context.Context) error {
	if err := a.discover(); err != nil {
		return err
	}
	want, err := a.post(ctx)
	now := a.opts.Now()
	if err != nil {
		a.mu.Lock()
		a.met.syncErrors["mds"]++
		lost := now.Sub(a.lastOK)
		expired := lost > time.Duration(a.cfg.Lease) && !a.expired
		a.mu.Unlock()
		if expired {
			a.log.Warn("lost the mds for longer than the lease: restoring original read-ahead", "for", lost.Round(time.Second), "lease", time.Duration(a.cfg.Lease))
			rerr := a.RestoreAll(fmt.Sprintf("no contact with the mds for %s (lease %s)", lost.Round(time.Second), time.Duration(a.cfg.Lease)))
			a.mu.Lock()
			a.expired = rerr == nil
			a.mu.Unlock()
			return errors.Join(err, rerr)
		}
		return err
	}
	a.mu.Lock()
	a.lastOK, a.expired = now, false
	a.mu.Unlock()
	return a.apply(want)
}

func (a *Agent) report() models.ReadAheadReport {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := models.ReadAheadReport{Node: a.opts.Node, Bounds: models.ReadAheadBounds{MinKB: a.cfg.MinKB, MaxKB: a.cfg.MaxKB, MaxStepKB: a.cfg.MaxStepKB}, Mounts: []models.ReadAheadMount{}}
	for _, m := range a.mounts {
		r.Mounts = append(r.Mounts, m.ReadAheadMount)
	}
	sort.Slice(r.Mounts, func(i, j int) bool { return r.Mounts[i].MountPoint < r.Mounts[j].MountPoint })
	return r
}

func (a *Agent) post(ctx context.Context) (models.ReadAheadDesired, error) {
	var out models.ReadAheadDesired
	body, err := json.Marshal(a.report())
	if err != nil {
		return out, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(a.cfg.MDSURL, "/")+SyncPath, bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	req.Header.Set("Content-Type", "application/json")
	tok, err := a.token()
	if err != nil {
		return out, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return out, fmt.Errorf("cannot reach the mds: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return out, fmt.Errorf("cannot read the mds's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("mds answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var env struct {
		Status string                  `json:"status"`
		Data   models.ReadAheadDesired `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return out, fmt.Errorf("cannot parse the mds's answer: %w", err)
	}
	return env.Data, nil
}

// apply reconciles every mount toward want: a target within bounds is
// stepped toward (at most max_step_kb per sync), one outside is refused,
// and a mount without a target goes back to its original value.
func (a *Agent) apply(want models.ReadAheadDesired) error {
	targets := map[string]models.ReadAheadTarget{}
	for _, t := range want.Targets {
		targets[filepath.Clean(t.MountPoint)] = t
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	mps := make([]string, 0, len(a.mounts))
	for mp := range a.mounts {
		mps = append(mps, mp)
	}
	sort.Strings(mps)
	for _, mp := range mps {
		m := a.mounts[mp]
		if m.Error != "" {
			continue
		}
		t, ok := targets[mp]
		m.desiredKB, m.dryRunKB = 0, 0
		switch {
		case !ok:
			m.Action, m.Refused = "", ""
			if o, held := a.st.Originals[m.BDI]; held {
				errs = append(errs, a.restoreLocked(m, o, "the mds asks for no value"))
			}
			continue
		case t.DryRun:
			m.dryRunKB, m.Action = t.KB, t.Action
			if why := a.outOfBounds(t.KB); why != "" {
				m.Refused = why
			} else {
				m.Refused = ""
			}
			continue
		}
		m.Action = t.Action
		if why := a.outOfBounds(t.KB); why != "" {
			if m.Refused != why {
				a.log.Warn("refused a read-ahead value outside this agent's bounds", "mountpoint", mp, "bdi", m.BDI, "kb", t.KB, "why", why, "action", t.Action)
			}
			m.Refused = why
			a.met.refusals[mp]++
			continue
		}
		m.Refused = ""
		m.desiredKB = t.KB
		if m.CurrentKB == t.KB {
			continue
		}
		next := t.KB
		if d := next - m.CurrentKB; d > a.cfg.MaxStepKB {
			next = m.CurrentKB + a.cfg.MaxStepKB
		} else if d < -a.cfg.MaxStepKB {
			next = m.CurrentKB - a.cfg.MaxStepKB
		}
		if _, held := a.st.Originals[m.BDI]; !held {
			a.st.Originals[m.BDI] = original{MountPoint: mp, KB: m.OriginalKB}
			if err := a.save(); err != nil {
				delete(a.st.Originals, m.BDI)
				errs = append(errs, fmt.Errorf("not changing %s: %w", mp, err))
				continue
			}
		}
		got, err := a.write(m.BDI, next)
		if err != nil {
			m.Error = err.Error()
			errs = append(errs, err)
			continue
		}
		a.met.writes[mp]++
		m.CurrentKB = got
		a.log.Info("set read-ahead", "mountpoint", mp, "bdi", m.BDI, "kb", next, "read_back_kb", got, "target_kb", t.KB, "action", t.Action)
		if got != next {
			m.Error = fmt.Sprintf("wrote %d KiB, the kernel holds %d KiB", next, got)
		}
	}
	return errors.Join(errs...)
}

func (a *Agent) outOfBounds(kb int64) string {
	if kb < a.cfg.MinKB || kb > a.cfg.MaxKB {
		return fmt.Sprintf("%d KiB is outside this agent's bounds [%d, %d] KiB (readahead.min_kb, readahead.max_kb)", kb, a.cfg.MinKB, a.cfg.MaxKB)
	}
	return ""
}

// restoreLocked writes the original value back and forgets it.
func (a *Agent) restoreLocked(m *mount, o original, why string) error {
	if m.CurrentKB != o.KB {
		got, err := a.write(m.BDI, o.KB)
		if err != nil {
			m.Error = err.Error()
			return fmt.Errorf("cannot restore %s: %w", m.MountPoint, err)
		}
		m.CurrentKB = got
		a.met.restores[m.MountPoint]++
		a.log.Info("restored original read-ahead", "mountpoint", m.MountPoint, "bdi", m.BDI, "kb", o.KB, "read_back_kb", got, "why", why)
	}
	delete(a.st.Originals, m.BDI)
	return a.save()
}

// RestoreAll writes back every original value the agent holds.
func (a *Agent) RestoreAll(why string) error {
	if err := a.discover(); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for _, m := range a.mounts {
		m.desiredKB, m.dryRunKB = 0, 0
		if o, ok := a.st.Originals[m.BDI]; ok && o.MountPoint == m.MountPoint {
			errs = append(errs, a.restoreLocked(m, o, why))
		}
	}
	return errors.Join(errs...)
}

// Mounts returns the managed mounts as last seen (tests, /metrics).
func (a *Agent) Mounts() []models.ReadAheadMount {
	return a.report().Mounts
}
