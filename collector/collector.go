package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/ballast-io/ballast/models"
)

// ErrNotApplicable is returned (possibly wrapped) by a collector whose
// source does not exist on this host: no libdcgm nor NVML, no smartctl, no
// nfsd, no NVMe device. The handler logs it at debug level and reports the
// collector as unsuccessful; it never stops the agent.
var ErrNotApplicable = errors.New("not applicable on this host")

// Sample is one value a collector read. Values holds the label values in
// the order of the label names of the metric's descriptor in
// models.Metrics.
type Sample struct {
	Name   string
	Values []string
	Value  float64
}

// Labels pairs the sample's label values with the label names of its
// metric's descriptor in models.Metrics; without a descriptor it has none.
func (s Sample) Labels() []models.Label {
	d, ok := models.LookupMetric(s.Name)
	if !ok {
		return nil
	}
	out := make([]models.Label, 0, len(s.Values))
	for i, v := range s.Values {
		if i < len(d.Labels) {
			out = append(out, models.Label{Name: d.Labels[i], Value: v})
		}
	}
	return out
}

// Collector reads one source of telemetry. Collect is called at most once
// at a time per collector; it returns what it could read, and an error when
// the source as a whole failed. Samples returned with an error are still
// exposed. A collector that holds resources also implements io.Closer.
type Collector interface {
	Collect(ctx context.Context) ([]Sample, error)
}

// Options configures every collector. The zero value of each field has a
// documented default, applied by withDefaults.
type Options struct {
	// ProcRoot, SysRoot and DevRoot are where procfs, sysfs and device
	// nodes are mounted; defaults /proc, /sys and /dev.
	ProcRoot string
	SysRoot  string
	DevRoot  string
	// RootFS is where the host's / is seen, for statfs of the mount
	// points the filesystem collector finds; default /.
	RootFS string
	// Timeout bounds one run of one collector; default 10s.
	Timeout time.Duration
	// CacheTTL is how long a collector's result is reused by later
	// scrapes; default 5s. A negative value disables the cache.
	CacheTTL time.Duration
	// SmartctlPath is the smartctl binary; default "smartctl" looked up in
	// PATH. SmartctlDropDir, when set, is a directory of
	// `smartctl --json --xall` outputs (*.json) read instead of running it.
	SmartctlPath    string
	SmartctlDropDir string
	// DCGMExporterURL, when set, makes the dcgm collector scrape this
	// dcgm-exporter /metrics endpoint instead of loading libdcgm or NVML.
	DCGMExporterURL string
	// DCGMHostEngine is the address of a standalone nv-hostengine
	// ("host:port" or a unix socket path), read through libdcgm only;
	// empty starts an embedded one if libdcgm loads, else reads NVML (the
	// driver's libnvidia-ml.so.1).
	DCGMHostEngine string
	// Logger receives collector logs; default discards them.
	Logger *slog.Logger
	// Now is the clock used for the result cache; default time.Now.
	Now func() time.Time

	// nvmeEnabled is set by NewHandler when the nvme collector runs, so
	// that smartctl leaves NVMe drives to it.
	nvmeEnabled bool
}

func (o Options) withDefaults() Options {
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.SysRoot == "" {
		o.SysRoot = "/sys"
	}
	if o.DevRoot == "" {
		o.DevRoot = "/dev"
	}
	if o.RootFS == "" {
		o.RootFS = "/"
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.CacheTTL == 0 {
		o.CacheTTL = 5 * time.Second
	}
	if o.SmartctlPath == "" {
		o.SmartctlPath = "smartctl"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// factory builds a collector from complete options; it starts nothing.
type factory func(opts Options, log *onceLogger) (Collector, error)

type registration struct {
	name  string
	roles []string // roles that enable the collector by default
	new   factory
}

// registry lists every collector. It is a function rather than a mutable
// package variable so that nothing can register collectors at run time.
func registry() []registration {
	return []registration{
		{"nvme", []string{"ds"}, newNVMeCollector},
		{"smartctl", []string{"ds"}, newSmartctlCollector},
		{"diskstats", []string{"ds"}, newDiskstatsCollector},
		{"nfsd", []string{"ds"}, newNFSDCollector},
		{"filesystem", []string{"ds"}, newFilesystemCollector},
		{"netdev", []string{"ds", "client"}, newNetdevCollector},
		{"dcgm", []string{"client"}, newDCGMCollector},
		{"mountstats", []string{"client"}, newMountstatsCollector},
		{"readahead", []string{"client"}, newReadaheadCollector},
	}
}

// Names returns the names of all collectors, sorted.
func Names() []string {
	var ns []string
	for _, r := range registry() {
		ns = append(ns, r.name)
	}
	sort.Strings(ns)
	return ns
}

// DefaultEnabled returns the collectors that role ("ds" or "client")
// enables by default, in registry order; nil for an unknown role. The
// smartctl collector is on for ds and reports ErrNotApplicable where
// smartctl is not installed.
func DefaultEnabled(role string) []string {
	var ns []string
	for _, r := range registry() {
		for _, ro := range r.roles {
			if ro == role {
				ns = append(ns, r.name)
			}
		}
	}
	return ns
}

// CheckName returns an error unless name is a registered collector.
func CheckName(name string) error {
	_, err := lookup(name)
	return err
}

func lookup(name string) (registration, error) {
	for _, r := range registry() {
		if r.name == name {
			return r, nil
		}
	}
	return registration{}, fmt.Errorf("cannot find collector %q: known collectors are %v", name, Names())
}

// onceLogger logs a device's or field's problem once per distinct reason,
// so that a drive that cannot be opened does not flood the log every
// scrape, and logs again when the reason changes or after a recovery.
type onceLogger struct {
	*slog.Logger
	mu   sync.Mutex
	seen map[string]string
}

func newOnceLogger(l *slog.Logger) *onceLogger {
	return &onceLogger{Logger: l, seen: map[string]string{}}
}

// warnOnce logs msg at warning level unless key last logged the same reason.
func (o *onceLogger) warnOnce(key, reason, msg string, args ...any) {
	o.mu.Lock()
	prev, ok := o.seen[key]
	o.seen[key] = reason
	o.mu.Unlock()
	if !ok || prev != reason {
		o.Warn(msg, append(args, "reason", reason)...)
	}
}

// clear forgets key, so its next problem is logged again.
func (o *onceLogger) clear(key string) {
	o.mu.Lock()
	delete(o.seen, key)
	o.mu.Unlock()
}
