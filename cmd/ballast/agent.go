package main

import (
	"context"
	"fmt"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/cluster"
)

func init() {
	for _, role := range []string{cluster.RoleDS, cluster.RoleClient} {
		register(&command{name: role, summary: agentSummary[role], run: func(ctx context.Context, env *cmdEnv, args []string) error {
			return runAgent(ctx, env, role, args)
		}})
	}
}

var agentSummary = map[string]string{
	cluster.RoleDS:     "run the data-server agent: serves /metrics for the mds to scrape",
	cluster.RoleClient: "run the GPU-node agent: serves /metrics for the mds to scrape",
}

func agentUsage(role string) string {
	what := map[string]string{
		cluster.RoleDS:     "a data server (NVMe SMART, diskstats, nfsd, NIC counters)",
		cluster.RoleClient: "a GPU node (DCGM GPU telemetry, NFS client mountstats, NIC counters, read-ahead)",
	}[role]
	return fmt.Sprintf(`Usage: ballast %s [flags]

Runs the agent of %s. It serves /metrics in Prometheus
exposition format for the mds (or any Prometheus or vmagent) to scrape,
plus /healthz and /readyz.

NOTE: the hardware collectors are not in this build yet; until they land
the agent serves only ballast's own process metrics.

Configuration comes from --config (YAML, see docs/config.md); the flags
below override the file.`, role, what)
}

func runAgent(ctx context.Context, env *cmdEnv, role string, args []string) error {
	fs := newFlagSet(env, role, agentUsage(role))
	d := cluster.DefaultAgentConfig(role)
	config := fs.String("config", "", "YAML config file of the "+role+" role (default: built-in defaults)")
	listen := fs.String("listen", d.Listen, "HOST:PORT of the HTTP listener serving /metrics")
	logLevel := fs.String("log-level", d.LogLevel, "debug, info, warn or error")
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
	if isSet(fs, "listen") {
		cfg.Listen = *listen
	}
	if isSet(fs, "log-level") {
		cfg.LogLevel = *logLevel
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	logger := newLogger(env.stderr, cfg.LogLevel)
	set := metrics.NewSet()
	set.NewGauge(fmt.Sprintf(`ballast_build_info{version=%q,role=%q}`, version, role), func() float64 { return 1 })
	srv := cluster.NewServer(cfg.Listen, set, logger)
	if err := srv.Start(); err != nil {
		return err
	}
	srv.SetReady("")
	logger.Info("agent started", "role", role, "listen", srv.Addr())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return srv.Stop(sctx)
}
