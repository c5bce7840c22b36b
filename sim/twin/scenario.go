package twin

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

//go:embed scenarios/*.yaml
var embedded embed.FS

// Scenario is a parsed and validated scenario file: the topology of a
// simulated cluster, the workloads that run on it and the faults injected
// into it. Every field is documented, with its unit and default, in
// docs/scenarios.md.
type Scenario struct {
	Name        string        `yaml:"name,omitempty"`
	Description string        `yaml:"description,omitempty"`
	Tick        time.Duration `yaml:"tick,omitempty"`
	Duration    time.Duration `yaml:"duration,omitempty"`
	Topology    Topology      `yaml:"topology,omitempty"`
	Datasets    []Dataset     `yaml:"datasets,omitempty"`
	Workloads   []Workload    `yaml:"workloads,omitempty"`
	Faults      []Fault       `yaml:"faults,omitempty"`
	Migration   MigrationSpec `yaml:"migration,omitempty"`
}

// Topology is the hardware of the simulated cluster.
type Topology struct {
	MDS         int           `yaml:"mds,omitempty"`
	DataServers []DSGroup     `yaml:"data_servers,omitempty"`
	Clients     []ClientGroup `yaml:"clients,omitempty"`
	// NetRTTMicros is the client↔DS round trip of one NFS RPC on an idle
	// network, in µs.
	NetRTTMicros float64 `yaml:"net_rtt_us,omitempty"`
}

// DSGroup is a set of identical data servers that form one pool (tier).
type DSGroup struct {
	NamePrefix  string  `yaml:"name_prefix,omitempty"`
	Count       int     `yaml:"count,omitempty"`
	Pool        string  `yaml:"pool,omitempty"`
	Drives      int     `yaml:"drives,omitempty"`
	Spares      int     `yaml:"spares,omitempty"`
	Drive       Drive   `yaml:"drive,omitempty"`
	NICGbps     float64 `yaml:"nic_gbps,omitempty"`
	PortGbps    float64 `yaml:"port_gbps,omitempty"`
	CounterBits int     `yaml:"diskstats_counter_bits,omitempty"`
}

// Drive is the performance envelope of one NVMe drive model.
type Drive struct {
	Model          string  `yaml:"model,omitempty"`
	CapacityGB     float64 `yaml:"capacity_gb,omitempty"`
	ReadMBps       float64 `yaml:"read_mbps,omitempty"`
	WriteMBps      float64 `yaml:"write_mbps,omitempty"`
	ReadIOPS       float64 `yaml:"read_iops,omitempty"`
	WriteIOPS      float64 `yaml:"write_iops,omitempty"`
	ReadLatencyUS  float64 `yaml:"read_latency_us,omitempty"`
	WriteLatencyUS float64 `yaml:"write_latency_us,omitempty"`
	EndurancePBW   float64 `yaml:"endurance_pbw,omitempty"`
	AgeHours       float64 `yaml:"age_hours,omitempty"`
}

// ClientGroup is a set of identical client (GPU) nodes with one pNFS mount
// each.
type ClientGroup struct {
	NamePrefix  string  `yaml:"name_prefix,omitempty"`
	Count       int     `yaml:"count,omitempty"`
	GPUs        int     `yaml:"gpus,omitempty"`
	GPUModel    string  `yaml:"gpu_model,omitempty"`
	NICGbps     float64 `yaml:"nic_gbps,omitempty"`
	PortGbps    float64 `yaml:"port_gbps,omitempty"`
	ReadAheadKB float64 `yaml:"read_ahead_kb,omitempty"`
	RsizeKB     float64 `yaml:"rsize_kb,omitempty"`
}

// Dataset is a set of files laid out over a pool's devices.
type Dataset struct {
	Name       string  `yaml:"name,omitempty"`
	Pool       string  `yaml:"pool,omitempty"`
	Files      int     `yaml:"files,omitempty"`
	FileSizeMB float64 `yaml:"file_size_mb,omitempty"`
	Layout     Layout  `yaml:"layout,omitempty"`
}

// Layout is a flex-files striping layout.
type Layout struct {
	StripeUnitKB float64 `yaml:"stripe_unit_kb,omitempty"`
	StripeCount  int     `yaml:"stripe_count,omitempty"`
	Placement    string  `yaml:"placement,omitempty"`
}

// Placement policies for new files.
const (
	PlaceRoundRobin = "round_robin"
	PlaceRandom     = "random"
	PlaceLeastUsed  = "least_used"
)

// Workload kinds.
const (
	KindTraining  = "training"
	KindInference = "inference"
	KindAnalytics = "analytics"
)

// Workload is one job running on a group of clients.
type Workload struct {
	Name    string        `yaml:"name,omitempty"`
	Kind    string        `yaml:"kind,omitempty"`
	Clients string        `yaml:"clients,omitempty"`
	First   int           `yaml:"first,omitempty"`
	Count   int           `yaml:"count,omitempty"`
	Dataset string        `yaml:"dataset,omitempty"`
	Start   time.Duration `yaml:"start,omitempty"`
	End     time.Duration `yaml:"end,omitempty"`

	// training
	SamplesPerSec  float64     `yaml:"samples_per_sec,omitempty"`
	BytesPerSample float64     `yaml:"bytes_per_sample,omitempty"`
	PrefetchMB     float64     `yaml:"prefetch_mb,omitempty"`
	Workers        int         `yaml:"workers,omitempty"`
	ReadKB         float64     `yaml:"read_kb,omitempty"`
	Checkpoint     *Checkpoint `yaml:"checkpoint,omitempty"`
	// LogKBps is what each node of the job appends to its own log file,
	// KB/s (stdout of its ranks, metrics and event files); nil is the
	// default (DefaultLogKBps), 0 none. LogFlush is how often the node's
	// NFS client writes the dirty pages back (the kernel's writeback
	// interval).
	LogKBps  *float64      `yaml:"log_kbps,omitempty"`
	LogFlush time.Duration `yaml:"log_flush,omitempty"`

	// inference and analytics
	Streams     int     `yaml:"streams,omitempty"`
	QueueDepth  int     `yaml:"queue_depth,omitempty"`
	RateMBps    float64 `yaml:"rate_mbps,omitempty"`
	HotFraction float64 `yaml:"hot_fraction,omitempty"`
}

// DefaultLogKBps is what a training node appends to its logs when the
// scenario does not say (docs/scenarios.md, step 2).
const DefaultLogKBps = 16

// Checkpoint is the periodic checkpoint of a training job.
type Checkpoint struct {
	SizeGB   float64       `yaml:"size_gb,omitempty"`
	Interval time.Duration `yaml:"interval,omitempty"`
	Jitter   time.Duration `yaml:"jitter,omitempty"`
	Mode     string        `yaml:"mode,omitempty"`
	Keep     int           `yaml:"keep,omitempty"`
	Pool     string        `yaml:"pool,omitempty"`
	Layout   Layout        `yaml:"layout,omitempty"`
	WriteKB  float64       `yaml:"write_kb,omitempty"`
	Depth    int           `yaml:"queue_depth,omitempty"`
	First    time.Duration `yaml:"first,omitempty"`
}

// Checkpoint modes.
const (
	ModeSync  = "sync"
	ModeAsync = "async"
)

// Fault kinds.
const (
	FaultFailingDrive     = "failing_drive"
	FaultSlowDrive        = "slow_drive"
	FaultHotShard         = "hot_shard"
	FaultNodeLoss         = "node_loss"
	FaultPortSaturation   = "port_saturation"
	FaultCapacityPressure = "capacity_pressure"
	FaultWorkloadShift    = "workload_shift"
)

// Fault is one injected fault with its timing.
type Fault struct {
	Kind  string        `yaml:"kind,omitempty"`
	Start time.Duration `yaml:"start,omitempty"`
	// End is when the fault stops (for failing_drive: when the drive
	// fails). Zero means it lasts to the end of the run.
	End time.Duration `yaml:"end,omitempty"`

	Device   string  `yaml:"device,omitempty"`   // failing_drive, slow_drive
	DS       string  `yaml:"ds,omitempty"`       // node_loss
	Port     string  `yaml:"port,omitempty"`     // port_saturation
	Pool     string  `yaml:"pool,omitempty"`     // capacity_pressure
	Dataset  string  `yaml:"dataset,omitempty"`  // hot_shard
	Workload string  `yaml:"workload,omitempty"` // workload_shift
	Files    []int   `yaml:"files,omitempty"`    // hot_shard
	Share    float64 `yaml:"share,omitempty"`    // hot_shard
	Factor   float64 `yaml:"factor,omitempty"`   // slow_drive, workload_shift
	Gbps     float64 `yaml:"gbps,omitempty"`     // port_saturation
	MBps     float64 `yaml:"mbps,omitempty"`     // capacity_pressure
	// Intensity in (0, 1] grades the fault's effect (Graded); 0 (unset)
	// and 1 are the fault as its other fields say.
	Intensity float64 `yaml:"intensity,omitempty"`

	// failing_drive
	MediaErrors float64 `yaml:"media_errors,omitempty"`
	FinalSpare  float64 `yaml:"final_spare,omitempty"`
	WearRise    float64 `yaml:"wear_rise,omitempty"`
	TempExcursC float64 `yaml:"temp_excursion_c,omitempty"`
	OutlierRate float64 `yaml:"outlier_rate,omitempty"`
	FinalSpeed  float64 `yaml:"final_speed,omitempty"`
	// Fail is refused when set: a failing_drive always fails at end. The
	// field is kept only to answer scenarios that use it with a clear
	// error instead of silently ignoring it.
	Fail *bool `yaml:"fail,omitempty"`
}

// MigrationSpec sets how fast data moves by default.
type MigrationSpec struct {
	// MBps caps one stripe copy; ThrottleMBps caps all copies together
	// (0 = unlimited) until a throttle_migration action changes it.
	MBps         float64 `yaml:"mbps,omitempty"`
	ThrottleMBps float64 `yaml:"throttle_mbps,omitempty"`
}

// ScenarioNames lists the scenarios shipped inside the binary, sorted.
func ScenarioNames() []string {
	ents, err := embedded.ReadDir("scenarios")
	if err != nil {
		panic(err) // embedded at build time; cannot fail
	}
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// LoadScenario loads a shipped scenario by name (see ScenarioNames), a
// generated one by "generated:SEED" (see GenerateScenario) or a scenario file
// by path. A name wins over a file of the same name only when it contains no
// path separator and no ".yaml" suffix.
func LoadScenario(nameOrPath string) (*Scenario, error) {
	if strings.HasPrefix(nameOrPath, GeneratedPrefix) {
		return loadGenerated(nameOrPath)
	}
	if !strings.ContainsAny(nameOrPath, "/\\") && !strings.HasSuffix(nameOrPath, ".yaml") && !strings.HasSuffix(nameOrPath, ".yml") {
		b, err := embedded.ReadFile(path.Join("scenarios", nameOrPath+".yaml"))
		if err != nil {
			return nil, fmt.Errorf("cannot load scenario %q: no such shipped scenario (have %s, or generated:SEED) and not a file path", nameOrPath, strings.Join(ScenarioNames(), ", "))
		}
		return ParseScenario(bytes.NewReader(b), nameOrPath)
	}
	f, err := os.Open(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("cannot load scenario %q: %w", nameOrPath, err)
	}
	defer f.Close()
	return ParseScenario(f, nameOrPath)
}

// ParseScenario decodes a scenario from r, rejects unknown fields, fills in
// defaults and validates it. source names r in errors.
func ParseScenario(r io.Reader, source string) (*Scenario, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	var sc Scenario
	if err := dec.Decode(&sc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("cannot parse scenario %q: empty file", source)
		}
		return nil, fmt.Errorf("cannot parse scenario %q: %w", source, err)
	}
	sc.applyDefaults()
	if err := sc.validate(); err != nil {
		return nil, fmt.Errorf("invalid scenario %q: %w", source, err)
	}
	return &sc, nil
}

func defF(p *float64, v float64) {
	if *p == 0 {
		*p = v
	}
}

func defI(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}

func defS(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

// applyDefaults fills every zero field that has a documented default. The
// drive defaults are a PCIe Gen4 data-centre NVMe drive (docs/scenarios.md).
func (sc *Scenario) applyDefaults() {
	if sc.Tick == 0 {
		sc.Tick = time.Second
	}
	if sc.Duration == 0 {
		sc.Duration = time.Hour
	}
	defI(&sc.Topology.MDS, 2)
	defF(&sc.Topology.NetRTTMicros, 50)
	for i := range sc.Topology.DataServers {
		g := &sc.Topology.DataServers[i]
		defS(&g.NamePrefix, "ds")
		defS(&g.Pool, "default")
		defI(&g.Drives, 8)
		defF(&g.NICGbps, 200)
		defF(&g.PortGbps, g.NICGbps)
		defI(&g.CounterBits, 64)
		d := &g.Drive
		defS(&d.Model, "simulated-gen4-nvme")
		defF(&d.CapacityGB, 7680)
		defF(&d.ReadMBps, 6500)
		defF(&d.WriteMBps, 3500)
		defF(&d.ReadIOPS, 900_000)
		defF(&d.WriteIOPS, 200_000)
		defF(&d.ReadLatencyUS, 80)
		defF(&d.WriteLatencyUS, 20)
		defF(&d.EndurancePBW, 18.2)
		defF(&d.AgeHours, 8760)
	}
	for i := range sc.Topology.Clients {
		g := &sc.Topology.Clients[i]
		defS(&g.NamePrefix, "gpu")
		defS(&g.GPUModel, "simulated-h100-sxm")
		defF(&g.NICGbps, 400)
		defF(&g.PortGbps, g.NICGbps)
		defF(&g.ReadAheadKB, 128)
		defF(&g.RsizeKB, 1024)
	}
	for i := range sc.Datasets {
		defLayout(&sc.Datasets[i].Layout)
	}
	for i := range sc.Workloads {
		w := &sc.Workloads[i]
		defI(&w.Workers, 4)
		defF(&w.PrefetchMB, 1024)
		defI(&w.Streams, 4)
		defI(&w.QueueDepth, 8)
		switch w.Kind {
		case KindInference:
			defF(&w.ReadKB, 64)
		case KindAnalytics:
			defF(&w.ReadKB, 1024)
		default:
			defF(&w.ReadKB, 256)
		}
		if w.Kind == KindTraining {
			if w.LogKBps == nil {
				v := float64(DefaultLogKBps)
				w.LogKBps = &v
			}
			if w.LogFlush == 0 {
				w.LogFlush = 5 * time.Second
			}
		}
		if c := w.Checkpoint; c != nil {
			defS(&c.Mode, ModeSync)
			defI(&c.Keep, 2)
			defF(&c.WriteKB, 1024)
			defI(&c.Depth, 16)
			defLayout(&c.Layout)
			if c.First == 0 {
				c.First = c.Interval
			}
		}
	}
	for i := range sc.Faults {
		f := &sc.Faults[i]
		switch f.Kind {
		case FaultFailingDrive:
			defF(&f.MediaErrors, 5000)
			defF(&f.FinalSpare, 2)
			defF(&f.WearRise, 8)
			defF(&f.TempExcursC, 18)
			defF(&f.OutlierRate, 0.2)
			defF(&f.FinalSpeed, 0.3)
		case FaultSlowDrive:
			defF(&f.Factor, 0.1)
		case FaultHotShard:
			defF(&f.Share, 0.5)
		case FaultWorkloadShift:
			defF(&f.Factor, 2)
		}
	}
	defF(&sc.Migration.MBps, 1000)
}

func defLayout(l *Layout) {
	defF(&l.StripeUnitKB, 1024)
	defI(&l.StripeCount, 4)
	defS(&l.Placement, PlaceRoundRobin)
}

// fieldErr formats a validation error that names the field and the value.
func fieldErr(field string, value any, why string) error {
	return fmt.Errorf("field %s: value %v: %s", field, value, why)
}

func (sc *Scenario) validate() error {
	if sc.Name == "" {
		return fieldErr("name", `""`, "a scenario needs a name")
	}
	if sc.Tick < time.Millisecond || sc.Tick > time.Minute {
		return fieldErr("tick", sc.Tick, "must be between 1ms and 1m")
	}
	if sc.Duration < sc.Tick {
		return fieldErr("duration", sc.Duration, "must be at least one tick")
	}
	t := &sc.Topology
	if t.MDS < 1 || t.MDS > 2 {
		return fieldErr("topology.mds", t.MDS, "must be 1 or 2 (an MDS pair)")
	}
	if t.NetRTTMicros < 0 {
		return fieldErr("topology.net_rtt_us", t.NetRTTMicros, "must not be negative")
	}
	if len(t.DataServers) == 0 {
		return fieldErr("topology.data_servers", "[]", "needs at least one group of data servers")
	}
	if len(t.Clients) == 0 {
		return fieldErr("topology.clients", "[]", "needs at least one group of clients")
	}
	prefixes := map[string]bool{}
	pools := map[string]bool{}
	for i, g := range t.DataServers {
		p := fmt.Sprintf("topology.data_servers[%d]", i)
		if prefixes[g.NamePrefix] {
			return fieldErr(p+".name_prefix", g.NamePrefix, "used by another group")
		}
		prefixes[g.NamePrefix] = true
		pools[g.Pool] = true
		if g.Count < 1 || g.Count > 4096 {
			return fieldErr(p+".count", g.Count, "must be between 1 and 4096")
		}
		if g.Drives < 1 || g.Drives > 128 {
			return fieldErr(p+".drives", g.Drives, "must be between 1 and 128")
		}
		if g.Spares < 0 || g.Spares > 32 {
			return fieldErr(p+".spares", g.Spares, "must be between 0 and 32")
		}
		if g.CounterBits != 32 && g.CounterBits != 64 {
			return fieldErr(p+".diskstats_counter_bits", g.CounterBits, "must be 32 or 64")
		}
		for _, c := range []struct {
			n string
			v float64
		}{{"nic_gbps", g.NICGbps}, {"port_gbps", g.PortGbps}, {"drive.capacity_gb", g.Drive.CapacityGB},
			{"drive.read_mbps", g.Drive.ReadMBps}, {"drive.write_mbps", g.Drive.WriteMBps},
			{"drive.read_iops", g.Drive.ReadIOPS}, {"drive.write_iops", g.Drive.WriteIOPS},
			{"drive.read_latency_us", g.Drive.ReadLatencyUS}, {"drive.write_latency_us", g.Drive.WriteLatencyUS},
			{"drive.endurance_pbw", g.Drive.EndurancePBW}} {
			if !(c.v > 0) {
				return fieldErr(p+"."+c.n, c.v, "must be positive")
			}
		}
		if g.Drive.AgeHours < 0 {
			return fieldErr(p+".drive.age_hours", g.Drive.AgeHours, "must not be negative")
		}
	}
	groups := map[string]int{}
	for i, g := range t.Clients {
		p := fmt.Sprintf("topology.clients[%d]", i)
		if prefixes[g.NamePrefix] {
			return fieldErr(p+".name_prefix", g.NamePrefix, "used by another group")
		}
		prefixes[g.NamePrefix] = true
		groups[g.NamePrefix] = g.Count
		if g.Count < 1 || g.Count > 16384 {
			return fieldErr(p+".count", g.Count, "must be between 1 and 16384")
		}
		if g.GPUs < 0 || g.GPUs > 64 {
			return fieldErr(p+".gpus", g.GPUs, "must be between 0 and 64")
		}
		for _, c := range []struct {
			n string
			v float64
		}{{"nic_gbps", g.NICGbps}, {"port_gbps", g.PortGbps}, {"read_ahead_kb", g.ReadAheadKB}, {"rsize_kb", g.RsizeKB}} {
			if !(c.v > 0) {
				return fieldErr(p+"."+c.n, c.v, "must be positive")
			}
		}
	}
	datasets := map[string]bool{}
	for i, d := range sc.Datasets {
		p := fmt.Sprintf("datasets[%d]", i)
		if d.Name == "" || strings.ContainsAny(d.Name, " #/\"") {
			return fieldErr(p+".name", fmt.Sprintf("%q", d.Name), "must be non-empty without spaces, '#', '/' or quotes")
		}
		if datasets[d.Name] {
			return fieldErr(p+".name", d.Name, "used by another dataset")
		}
		datasets[d.Name] = true
		if !pools[d.Pool] {
			return fieldErr(p+".pool", fmt.Sprintf("%q", d.Pool), "no data-server group has this pool")
		}
		if d.Files < 1 || d.Files > 1_000_000 {
			return fieldErr(p+".files", d.Files, "must be between 1 and 1000000")
		}
		if !(d.FileSizeMB > 0) {
			return fieldErr(p+".file_size_mb", d.FileSizeMB, "must be positive")
		}
		if err := d.Layout.validate(p + ".layout"); err != nil {
			return err
		}
	}
	workloads := map[string]bool{}
	for i := range sc.Workloads {
		w := &sc.Workloads[i]
		p := fmt.Sprintf("workloads[%d]", i)
		if w.Name == "" || strings.ContainsAny(w.Name, " #/\"") {
			return fieldErr(p+".name", fmt.Sprintf("%q", w.Name), "must be non-empty without spaces, '#', '/' or quotes")
		}
		if workloads[w.Name] {
			return fieldErr(p+".name", w.Name, "used by another workload")
		}
		workloads[w.Name] = true
		n, ok := groups[w.Clients]
		if !ok {
			return fieldErr(p+".clients", fmt.Sprintf("%q", w.Clients), "no client group has this name_prefix")
		}
		if w.Count == 0 {
			w.Count = n - w.First
		}
		if w.First < 0 || w.Count < 1 || w.First+w.Count > n {
			return fieldErr(p+".first/count", fmt.Sprintf("%d/%d", w.First, w.Count), fmt.Sprintf("must select nodes within the group of %d", n))
		}
		if !datasets[w.Dataset] {
			return fieldErr(p+".dataset", fmt.Sprintf("%q", w.Dataset), "no such dataset")
		}
		if w.Start < 0 || (w.End != 0 && w.End <= w.Start) {
			return fieldErr(p+".start/end", fmt.Sprintf("%s/%s", w.Start, w.End), "start must be ≥ 0 and end (if set) after start")
		}
		if w.Workers < 1 || w.Workers > 64 {
			return fieldErr(p+".workers", w.Workers, "must be between 1 and 64")
		}
		if w.Streams < 1 || w.Streams > 256 {
			return fieldErr(p+".streams", w.Streams, "must be between 1 and 256")
		}
		if w.QueueDepth < 1 || w.QueueDepth > 1024 {
			return fieldErr(p+".queue_depth", w.QueueDepth, "must be between 1 and 1024")
		}
		if !(w.ReadKB > 0) {
			return fieldErr(p+".read_kb", w.ReadKB, "must be positive")
		}
		if w.RateMBps < 0 {
			return fieldErr(p+".rate_mbps", w.RateMBps, "must not be negative (0 = as fast as possible)")
		}
		if w.HotFraction < 0 || w.HotFraction >= 1 {
			return fieldErr(p+".hot_fraction", w.HotFraction, "must be in [0, 1)")
		}
		switch w.Kind {
		case KindTraining:
			gpus := 0
			for _, g := range t.Clients {
				if g.NamePrefix == w.Clients {
					gpus = g.GPUs
				}
			}
			if gpus == 0 {
				return fieldErr(p+".clients", w.Clients, "a training job needs clients with GPUs")
			}
			if !(w.SamplesPerSec > 0) {
				return fieldErr(p+".samples_per_sec", w.SamplesPerSec, "must be positive")
			}
			if !(w.BytesPerSample > 0) {
				return fieldErr(p+".bytes_per_sample", w.BytesPerSample, "must be positive")
			}
			if !(w.PrefetchMB > 0) {
				return fieldErr(p+".prefetch_mb", w.PrefetchMB, "must be positive")
			}
			if v := *w.LogKBps; !(v >= 0 && v <= 1e6) {
				return fieldErr(p+".log_kbps", v, "must be between 0 (no logs) and 1e6 KB/s")
			}
			if w.LogFlush < sc.Tick || w.LogFlush > 10*time.Minute {
				return fieldErr(p+".log_flush", w.LogFlush, "must be between one tick and 10m")
			}
			if c := w.Checkpoint; c != nil {
				cp := p + ".checkpoint"
				if !(c.SizeGB > 0) {
					return fieldErr(cp+".size_gb", c.SizeGB, "must be positive")
				}
				if c.Interval < sc.Tick {
					return fieldErr(cp+".interval", c.Interval, "must be at least one tick")
				}
				if c.Jitter < 0 || c.Jitter >= c.Interval/2 {
					return fieldErr(cp+".jitter", c.Jitter, "must be ≥ 0 and under half the interval")
				}
				if c.Mode != ModeSync && c.Mode != ModeAsync {
					return fieldErr(cp+".mode", fmt.Sprintf("%q", c.Mode), "must be sync or async")
				}
				if c.Keep < 1 || c.Keep > 16 {
					return fieldErr(cp+".keep", c.Keep, "must be between 1 and 16")
				}
				if c.Pool == "" {
					c.Pool = poolOfDataset(sc, w.Dataset)
				}
				if !pools[c.Pool] {
					return fieldErr(cp+".pool", fmt.Sprintf("%q", c.Pool), "no data-server group has this pool")
				}
				if !(c.WriteKB > 0) || c.Depth < 1 {
					return fieldErr(cp+".write_kb/queue_depth", fmt.Sprintf("%v/%d", c.WriteKB, c.Depth), "must be positive")
				}
				if c.First < 0 {
					return fieldErr(cp+".first", c.First, "must not be negative")
				}
				if err := c.Layout.validate(cp + ".layout"); err != nil {
					return err
				}
			}
		case KindInference, KindAnalytics:
			if w.Checkpoint != nil {
				return fieldErr(p+".checkpoint", "set", "only training jobs checkpoint")
			}
			if w.LogKBps != nil || w.LogFlush != 0 {
				return fieldErr(p+".log_kbps/log_flush", "set", "only training jobs' logs are modelled")
			}
		default:
			return fieldErr(p+".kind", fmt.Sprintf("%q", w.Kind), "must be training, inference or analytics")
		}
	}
	for i, f := range sc.Faults {
		p := fmt.Sprintf("faults[%d]", i)
		if f.Fail != nil {
			return fieldErr(p+".fail", *f.Fail, "is not supported: a failing_drive always fails at its end time; for a drive that degrades and recovers use slow_drive")
		}
		if f.Start < 0 || (f.End != 0 && f.End <= f.Start) {
			return fieldErr(p+".start/end", fmt.Sprintf("%s/%s", f.Start, f.End), "start must be ≥ 0 and end (if set) after start")
		}
		if !(f.Intensity >= 0 && f.Intensity <= 1) {
			return fieldErr(p+".intensity", f.Intensity, "must be in (0, 1] (1 or unset: the fault as its other fields say)")
		}
		if f.Kind == FaultNodeLoss && f.Intensity != 0 && f.Intensity != 1 {
			return fieldErr(p+".intensity", f.Intensity, "must be 1 for node_loss: a data server is lost or not (a slow one is slow_drive or port_saturation)")
		}
		switch f.Kind {
		case FaultFailingDrive, FaultSlowDrive:
			if f.Device == "" {
				return fieldErr(p+".device", `""`, "names the drive, e.g. ds03/nvme2n1")
			}
			if f.Kind == FaultFailingDrive && f.End == 0 {
				return fieldErr(p+".end", f.End, "a failing drive needs the time it fails")
			}
			if f.Kind == FaultFailingDrive && (f.FinalSpeed <= 0 || f.FinalSpeed > 1) {
				return fieldErr(p+".final_speed", f.FinalSpeed, "must be in (0, 1]")
			}
			if f.Kind == FaultSlowDrive && (f.Factor <= 0 || f.Factor > 1) {
				return fieldErr(p+".factor", f.Factor, "must be in (0, 1]")
			}
			if f.FinalSpare < 0 || f.FinalSpare > 100 || f.OutlierRate < 0 || f.OutlierRate > 1 {
				return fieldErr(p+".final_spare/outlier_rate", fmt.Sprintf("%v/%v", f.FinalSpare, f.OutlierRate), "out of range")
			}
		case FaultNodeLoss:
			if f.DS == "" {
				return fieldErr(p+".ds", `""`, "names the data server, e.g. ds05")
			}
		case FaultPortSaturation:
			if f.Port == "" || !(f.Gbps > 0) {
				return fieldErr(p+".port/gbps", fmt.Sprintf("%q/%v", f.Port, f.Gbps), "needs a port (e.g. sw/ds05) and cross traffic in Gbit/s")
			}
		case FaultCapacityPressure:
			if !pools[f.Pool] {
				return fieldErr(p+".pool", fmt.Sprintf("%q", f.Pool), "no data-server group has this pool")
			}
			if !(f.MBps > 0) {
				return fieldErr(p+".mbps", f.MBps, "must be positive")
			}
		case FaultHotShard:
			if !datasets[f.Dataset] {
				return fieldErr(p+".dataset", fmt.Sprintf("%q", f.Dataset), "no such dataset")
			}
			if len(f.Files) == 0 {
				return fieldErr(p+".files", "[]", "lists the hot files by index")
			}
			if f.Share <= 0 || f.Share > 1 {
				return fieldErr(p+".share", f.Share, "must be in (0, 1]")
			}
		case FaultWorkloadShift:
			if !workloads[f.Workload] {
				return fieldErr(p+".workload", fmt.Sprintf("%q", f.Workload), "no such workload")
			}
			if !(f.Factor > 0) {
				return fieldErr(p+".factor", f.Factor, "must be positive")
			}
		default:
			return fieldErr(p+".kind", fmt.Sprintf("%q", f.Kind), "unknown fault kind")
		}
	}
	if !(sc.Migration.MBps > 0) || sc.Migration.ThrottleMBps < 0 {
		return fieldErr("migration.mbps/throttle_mbps", fmt.Sprintf("%v/%v", sc.Migration.MBps, sc.Migration.ThrottleMBps), "mbps must be positive, throttle_mbps ≥ 0")
	}
	return nil
}

func (l Layout) validate(p string) error {
	if !(l.StripeUnitKB >= 4) {
		return fieldErr(p+".stripe_unit_kb", l.StripeUnitKB, "must be at least 4")
	}
	if l.StripeCount < 1 || l.StripeCount > 64 {
		return fieldErr(p+".stripe_count", l.StripeCount, "must be between 1 and 64")
	}
	switch l.Placement {
	case PlaceRoundRobin, PlaceRandom, PlaceLeastUsed:
	default:
		return fieldErr(p+".placement", fmt.Sprintf("%q", l.Placement), "must be round_robin, random or least_used")
	}
	return nil
}

func poolOfDataset(sc *Scenario, name string) string {
	for _, d := range sc.Datasets {
		if d.Name == name {
			return d.Pool
		}
	}
	return ""
}

// Graded returns f with its effect scaled by its Intensity i (docs/
// scenarios.md, faults[]): a failing drive's media errors, spare drop, wear
// rise, temperature excursion, outlier rate and speed loss × i (it still
// fails at end); a slow drive's and a failing drive's lost speed × i; a hot
// shard's share × i; cross traffic and fill rate × i; a workload shift's
// change of rate × i (factor 1 + (factor − 1) · i). A lost data server
// cannot be graded (Validate refuses it).
func (f Fault) Graded() Fault {
	i := f.Intensity
	if !(i > 0 && i < 1) {
		return f
	}
	switch f.Kind {
	case FaultFailingDrive:
		f.MediaErrors *= i
		f.FinalSpare = 100 - (100-f.FinalSpare)*i
		f.WearRise *= i
		f.TempExcursC *= i
		f.OutlierRate *= i
		f.FinalSpeed = 1 - (1-f.FinalSpeed)*i
	case FaultSlowDrive:
		f.Factor = 1 - (1-f.Factor)*i
	case FaultHotShard:
		f.Share *= i
	case FaultPortSaturation:
		f.Gbps *= i
	case FaultCapacityPressure:
		f.MBps *= i
	case FaultWorkloadShift:
		f.Factor = 1 + (f.Factor-1)*i
	}
	return f
}
