package main

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ballast-io/ballast/cluster"
	"github.com/ballast-io/ballast/collector"
)

func init() {
	for _, role := range []string{cluster.RoleDS, cluster.RoleClient} {
		register(&command{name: role, summary: agentSummary[role], run: func(ctx context.Context, env *cmdEnv, args []string) error {
			return runAgent(ctx, env, role, args)
		}})
	}
}

var agentSummary = map[string]string{
	cluster.RoleDS:     "run the data-server agent: NVMe SMART, diskstats, nfsd, NIC counters on /metrics",
	cluster.RoleClient: "run the GPU-node agent: DCGM GPUs, NFS client mountstats, NIC, read-ahead on /metrics",
}

func agentUsage(role string) string {
	what := map[string]string{
		cluster.RoleDS:     "a data server (NVMe SMART, smartctl, diskstats, nfsd, NIC counters)",
		cluster.RoleClient: "a GPU node (DCGM GPU telemetry, NFS client mountstats, NIC counters, read-ahead)",
	}[role]
	return fmt.Sprintf(`Usage: ballast %s [flags]

Runs the agent of %s.
It serves /metrics in Prometheus exposition format (gzip when asked) for the
mds, or any Prometheus or vmagent, to scrape, plus /healthz and /readyz.
Collection runs on scrape, every collector under its own timeout, and a
result is reused for --cache-for so that two scrapers do not double the
device load. A collector that does not apply to the host (no libdcgm, no
smartctl, no nfsd) reports ballast_collector_success 0 and the agent keeps
running; a collector that fails is logged at warn when it starts failing,
then at most every 5 minutes while it fails, and once when it recovers.
Metrics: docs/metrics.md.

Configuration comes from --config (YAML, see docs/config.md); the flags
below override the file.`, role, what)
}

func runAgent(ctx context.Context, env *cmdEnv, role string, args []string) error {
	fs := newFlagSet(env, role, agentUsage(role))
	d := cluster.DefaultAgentConfig(role)
	config := fs.String("config", "", "YAML config file of the "+role+" role (default: built-in defaults)")
	listen := fs.String("listen", d.Listen, "HOST:PORT of the HTTP listener serving /metrics")
	nodeName := fs.String("node-name", d.NodeName, "this host's name in the node label of its series (default: the host name)")
	logLevel := fs.String("log-level", d.LogLevel, "debug, info, warn or error")
	proc := fs.String("proc-root", d.Roots.Proc, "where /proc is read from")
	sys := fs.String("sys-root", d.Roots.Sys, "where /sys is read from")
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
		enable[n] = fs.Bool("collector."+n, defaults[n], "run the "+n+" collector")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg := d
	if *config != "" {
		var err error
		if cfg, err = cluster.LoadAgentConfig(*config, role); err != nil {
			return err
		}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "listen":
			cfg.Listen = *listen
		case "node-name":
			cfg.NodeName = *nodeName
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
			cfg.CollectorTimeout = cluster.Duration(*timeout)
		case "cache-for":
			cfg.CacheFor = cluster.Duration(*cacheFor)
		}
	})
	node, err := cfg.Check()
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

	logger := newLogger(env.stderr, cfg.LogLevel)
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
		ConstLabels: prometheus.Labels{"version": version, "role": role, "node": node},
	})
	buildInfo.Set(1)
	for _, c := range []prometheus.Collector{h, buildInfo, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector()} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("cannot register agent metrics: %w", err)
		}
	}
	srv, err := cluster.NewServer(cluster.ServerOptions{Addr: cfg.Listen, Role: role, Logger: logger, Auth: cfg.Auth, TLS: cfg.TLS, HTTP: cfg.HTTP})
	if err != nil {
		return err
	}
	srv.SetMetricsHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	if err := srv.Start(); err != nil {
		return err
	}
	srv.SetReady("")
	// Drop the pages of mds-only code that initialisation touched.
	released := cluster.ReleaseExecutablePages()
	logger.Debug("released executable pages", "bytes", released)
	logger.Info("agent started", "role", role, "listen", srv.Addr(), "node", node, "collectors", strings.Join(names, ","))
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return srv.Stop(sctx)
}
