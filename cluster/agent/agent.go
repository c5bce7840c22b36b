// Package agent runs the ds and client roles: collectors behind /metrics
// on the HTTP server every role runs. It links no store, so both the
// ballast binary and the lean ballast-agent binary run it
// (docs/decisions.md).
package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ballast-io/ballast/cluster/agent/readahead"
	"github.com/ballast-io/ballast/cluster/node"
	"github.com/ballast-io/ballast/collector"
	"github.com/ballast-io/ballast/internal/cli"
)

// Summary is the one-line description of each agent role.
var Summary = map[string]string{
	node.RoleDS:     "run the data-server agent: NVMe SMART, diskstats, nfsd, NIC counters on /metrics",
	node.RoleClient: "run the GPU-node agent: GPUs (DCGM or NVML), NFS client mountstats, NIC, read-ahead on /metrics",
}

// Usage is the --help text of the role, for a command named prog.
func Usage(prog, role string) string {
	what := map[string]string{
		node.RoleDS:     "a data server (NVMe SMART, smartctl, diskstats, nfsd, NIC counters)",
		node.RoleClient: "a GPU node (GPU telemetry from DCGM, or the driver's NVML without DCGM; NFS client mountstats, NIC counters, read-ahead)",
	}[role]
	return fmt.Sprintf(`Usage: %s %s [flags]

Runs the agent of %s.
It serves /metrics in Prometheus exposition format (gzip when asked) for the
mds, or any Prometheus or vmagent, to scrape, plus /healthz and /readyz.
Collection runs on scrape, every collector under its own timeout, and a
result is reused for --cache-for so that two scrapers do not double the
device load. A collector that does not apply to the host (no libdcgm nor
NVML, no smartctl, no nfsd) reports ballast_collector_success 0 and the
agent keeps running; a collector that fails is logged at warn when it starts failing,
then at most every 5 minutes while it fails, and once when it recovers.
Metrics: docs/metrics.md.

Configuration comes from --config (YAML, see docs/config.md); the flags
below override the file. The agent runs with GOGC=200 unless the GOGC
environment variable says otherwise.`, prog, role, what)
}

// collectorHelp says in --help what each collector reads (its series:
// docs/metrics.md).
var collectorHelp = map[string]string{
	"dcgm":       "GPU telemetry through libdcgm, else the driver's NVML, or dcgm_exporter_url",
	"diskstats":  "per block device I/O from <proc>/diskstats",
	"filesystem": "size and free space of mounted filesystems (statfs under --rootfs)",
	"mountstats": "per NFS mount client statistics from <proc>/self/mountstats",
	"netdev":     "NIC counters from <proc>/net/dev",
	"nfsd":       "NFS server counters from <proc>/net/rpc/nfsd",
	"nvme":       "SMART and health logs of NVMe (and SATA) drives by ioctl on --dev-root",
	"readahead":  "read_ahead_kb of block devices and NFS mounts from --sys-root",
	"smartctl":   "SMART through smartctl --json (smartctl_path, or files in smartctl_drop_dir)",
}

// DefaultGOGC is the agent's garbage-collection target unless the GOGC
// environment variable sets one. An agent's live heap is a few MB, so at
// Go's default of 100 a collection runs every few scrapes and costs about
// a quarter of the agent's CPU per scrape; 200 halves that for about 4 MB
// more RSS (BENCHMARKS.md, agent section; docs/decisions.md).
const DefaultGOGC = 200

// ShutdownTimeout bounds how long an agent takes to stop after ctx is done.
const ShutdownTimeout = 30 * time.Second

// Run parses the flags of the ds or client role from args and runs the
// agent until ctx is done. prog names the command in its help text;
// version goes into ballast_build_info. Bad flags return errors wrapping
// cli.ErrUsage, --help returns flag.ErrHelp.
func Run(ctx context.Context, stdout, stderr io.Writer, prog, version, role string, args []string) error {
	fs := cli.NewFlagSet(stdout, stderr, role, Usage(prog, role))
	d := node.DefaultAgentConfig(role)
	config := fs.String("config", "", "YAML config file of the "+role+" role (default: built-in defaults)")
	listen := fs.String("listen", d.Listen, "HOST:PORT of the HTTP listener serving /metrics")
	nodeFlag := fs.String("node-name", d.NodeName, "this host's name in the node label of its series (default: the host name)")
	logLevel := fs.String("log-level", d.LogLevel, "debug, info, warn or error")
	proc := fs.String("proc-root", d.Roots.Proc, "where /proc is read from")
	sys := fs.String("sys-root", d.Roots.Sys, "where /sys is read from (and, on a client with readahead.mds_url, read_ahead_kb written)")
	dev := fs.String("dev-root", d.Roots.Dev, "where device nodes are opened")
	rootfs := fs.String("rootfs", d.Roots.RootFS, "where the host's / is seen, for statfs of its mounts (e.g. /host in a container)")
	timeout := fs.Duration("collector-timeout", time.Duration(d.CollectorTimeout), "bound on one collector run")
	cacheFor := fs.Duration("cache-for", time.Duration(d.CacheFor), "scrapes within this window reuse one collection")
	defaults := map[string]bool{}
	for _, n := range collector.DefaultEnabled(role) {
		defaults[n] = true
	}
	enable := map[string]*bool{}
	for _, n := range collector.Names() {
		help := "run the " + n + " collector"
		if what, ok := collectorHelp[n]; ok {
			help += ": " + what
		}
		enable[n] = fs.Bool("collector."+n, defaults[n], help)
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	cfg := d
	if *config != "" {
		var err error
		if cfg, err = node.LoadAgentConfig(*config, role); err != nil {
			return err
		}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "listen":
			cfg.Listen = *listen
		case "node-name":
			cfg.NodeName = *nodeFlag
		case "log-level":
			cfg.LogLevel = *logLevel
		case "proc-root":
			cfg.Roots.Proc = *proc
		case "sys-root":
			cfg.Roots.Sys = *sys
		case "dev-root":
			cfg.Roots.Dev = *dev
		case "rootfs":
			cfg.Roots.RootFS = *rootfs
		case "collector-timeout":
			cfg.CollectorTimeout = node.Duration(*timeout)
		case "cache-for":
			cfg.CacheFor = node.Duration(*cacheFor)
		}
	})
	nodeName, err := cfg.Check()
	if err != nil {
		return err
	}
	// Enabled collectors: role defaults, then the file, then the flags.
	on := map[string]bool{}
	for n := range defaults {
		on[n] = true
	}
	for n, v := range cfg.Collectors {
		on[n] = v
	}
	fs.Visit(func(f *flag.Flag) {
		if n, ok := strings.CutPrefix(f.Name, "collector."); ok && enable[n] != nil {
			on[n] = *enable[n]
		}
	})
	var names []string
	for n, v := range on {
		if v {
			names = append(names, n)
		}
	}
	sort.Strings(names)

	logger := cli.NewLogger(stderr, cfg.LogLevel)
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGOGC)
	}
	cacheTTL := time.Duration(cfg.CacheFor)
	if cacheTTL == 0 {
		cacheTTL = -1 // collector.Options: negative disables the cache
	}
	h, err := collector.NewHandler(collector.Options{
		ProcRoot:        cfg.Roots.Proc,
		SysRoot:         cfg.Roots.Sys,
		DevRoot:         cfg.Roots.Dev,
		RootFS:          cfg.Roots.RootFS,
		Timeout:         time.Duration(cfg.CollectorTimeout),
		CacheTTL:        cacheTTL,
		SmartctlPath:    cfg.SmartctlPath,
		SmartctlDropDir: cfg.SmartctlDropDir,
		DCGMExporterURL: cfg.DCGMExporterURL,
		DCGMHostEngine:  cfg.DCGMHostEngine,
		Logger:          logger,
	}, names)
	if err != nil {
		return err
	}
	defer h.Close()
	reg := prometheus.NewRegistry()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "ballast_build_info",
		Help:        "Always 1; labels carry the ballast version, the agent role and its node name, which the mds copies onto every series it scrapes from the agent.",
		ConstLabels: prometheus.Labels{"version": version, "role": role, "node": nodeName},
	})
	buildInfo.Set(1)
	for _, c := range []prometheus.Collector{h, buildInfo, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector()} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("cannot register agent metrics: %w", err)
		}
	}
	var ra *readahead.Agent
	if cfg.ReadAhead.Enabled() {
		if ra, err = readahead.New(cfg.ReadAhead, readahead.Options{ProcRoot: cfg.Roots.Proc, SysRoot: cfg.Roots.Sys, Node: nodeName, Logger: logger}); err != nil {
			return err
		}
		if err := reg.Register(ra); err != nil {
			return fmt.Errorf("cannot register read-ahead metrics: %w", err)
		}
	}
	srv, err := node.NewServer(node.ServerOptions{Addr: cfg.Listen, Role: role, Logger: logger, Auth: cfg.Auth, TLS: cfg.TLS, HTTP: cfg.HTTP})
	if err != nil {
		return err
	}
	srv.SetMetricsHandler(newGzipHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, DisableCompression: true}), 2))
	if err := srv.Start(); err != nil {
		return err
	}
	srv.SetReady("")
	if ra != nil {
		ra.Start()
		logger.Info("read-ahead tuning on", "mds", cfg.ReadAhead.MDSURL, "min_kb", cfg.ReadAhead.MinKB, "max_kb", cfg.ReadAhead.MaxKB, "lease", time.Duration(cfg.ReadAhead.Lease))
	}
	// Drop the pages of mds-only code that initialisation touched.
	released := node.ReleaseExecutablePages()
	logger.Debug("released executable pages", "bytes", released)
	logger.Info("agent started", "role", role, "listen", srv.Addr(), "node", nodeName, "collectors", strings.Join(names, ","))
	<-ctx.Done()
	var raErr error
	if ra != nil {
		// the kernel's value is the floor of risk: put back what was found
		if raErr = ra.Stop(); raErr != nil {
			logger.Error("cannot restore original read-ahead", "err", raErr)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	return errors.Join(srv.Stop(sctx), raErr)
}
