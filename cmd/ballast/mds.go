package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/ballast-io/ballast/cluster"
	"github.com/ballast-io/ballast/cluster/node"
)

const mdsUsage = `Usage: ballast mds [flags]

Runs the metadata-server role: the store (embedded VictoriaMetrics, or a
remote engine with --store remote=… or storage.backend: remote), the
Prometheus-compatible query API (/api/v1/query, /api/v1/query_range,
/api/v1/series, /api/v1/labels, /api/v1/label/NAME/values), the push
endpoints (/api/v1/import/prometheus, /api/v1/write), the scraper of ds and
client agents, the analysis pipeline, and the alert senders that deliver
findings and actions to Alertmanager and webhooks (alerting: in the config,
docs/alerting.md). /metrics, /healthz and /readyz report on ballast itself.
The built-in web console is at / (/ui/): findings, actions, a data server ×
drive heat map, GPU time lost, checkpoint forecasts and the capacity report
(/api/v1/reports/capacity/); Grafana dashboards and a data source plugin
are in grafana/ (docs/grafana.md).

Authentication (scoped bearer tokens read from files, client certificates),
TLS and listener limits are set in the config file (docs/security.md);
tokens are never taken from the command line.

Configuration comes from --config (YAML, see docs/config.md); the flags
below override the file. SIGINT or SIGTERM stops it cleanly, flushing data
to disk; a second signal exits at once.`

func init() {
	register(&command{name: "mds", summary: "run the metadata-server role: store, query API, ingest, scraping, analysis", run: runMDS})
}

// mdsFlags holds the flag values that may override the config file.
type mdsFlags struct {
	config, listen, dataDir, logLevel string
	retention, flushInterval          string
	durability                        string
	targets                           stringList
	store                             string
	flushURLs                         stringList
}

func (f *mdsFlags) register(fs *flag.FlagSet) {
	d := cluster.DefaultMDSConfig()
	fs.StringVar(&f.config, "config", "", "YAML config file of the mds role (default: built-in defaults)")
	fs.StringVar(&f.listen, "listen", d.Listen, "HOST:PORT of the HTTP listener (query API, ingest, /metrics)")
	fs.StringVar(&f.dataDir, "data-dir", d.DataDir, "directory of the time-series data; one process at a time")
	fs.StringVar(&f.logLevel, "log-level", d.LogLevel, "debug, info, warn or error")
	fs.StringVar(&f.retention, "retention", d.Storage.Retention.String(), "how long samples are kept (e.g. 30d, 720h; minimum 24h)")
	fs.StringVar(&f.flushInterval, "flush-interval", d.Storage.FlushInterval.String(), "how often in-memory data is written to disk; bounds loss on a crash (minimum 1s)")
	fs.StringVar(&f.durability, "durability", d.Storage.Durability, "window (a crash loses what was acknowledged in the last 2 × flush-interval + 2s) or wal (write-ahead log, fsynced before the answer: a crash loses nothing acknowledged)")
	fs.StringVar(&f.store, "store", d.Storage.Backend, cluster.StoreFlagUsage+"; overrides storage.backend and its URLs")
	fs.Var(&f.flushURLs, "store-flush-url", "with --store remote=…: a URL that makes recent writes searchable (only demo and eval flush); repeatable")
	fs.Var(&f.targets, "scrape-target", "HOST:PORT of an agent to scrape; repeat for several (adds to the config's scrape.targets)")
}

// load builds the config: defaults, then the file, then the flags the user
// set, then validation.
func (f *mdsFlags) load(fs *flag.FlagSet) (cluster.MDSConfig, error) {
	cfg := cluster.DefaultMDSConfig()
	var err error
	if f.config != "" {
		if cfg, err = cluster.LoadMDSConfig(f.config); err != nil {
			return cfg, err
		}
	}
	var ferr error
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "listen":
			cfg.Listen = f.listen
		case "data-dir":
			cfg.DataDir = f.dataDir
		case "log-level":
			cfg.LogLevel = f.logLevel
		case "retention":
			d, err := node.ParseDuration(f.retention)
			if err != nil {
				ferr = fmt.Errorf("--retention: %w", err)
			}
			cfg.Storage.Retention = cluster.Duration(d)
		case "flush-interval":
			d, err := node.ParseDuration(f.flushInterval)
			if err != nil {
				ferr = fmt.Errorf("--flush-interval: %w", err)
			}
			cfg.Storage.FlushInterval = cluster.Duration(d)
		case "durability":
			cfg.Storage.Durability = f.durability
		case "scrape-target":
			cfg.Scrape.Targets = append(cfg.Scrape.Targets, f.targets...)
		case "store":
			if err := cluster.ApplyStoreFlag(&cfg.Storage, f.store, f.flushURLs); err != nil {
				ferr = err
			}
		}
	})
	if ferr != nil {
		return cfg, ferr
	}
	return cfg, cfg.Validate()
}

func runMDS(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "mds", mdsUsage)
	var f mdsFlags
	f.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := f.load(fs)
	if err != nil {
		return err
	}
	logger := newLogger(env.stderr, cfg.LogLevel)
	m := cluster.NewMDS(cfg, cluster.Runtime{}, version, logger)
	if err := m.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("stopping mds")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	start := time.Now()
	err = m.Stop(sctx)
	logger.Info("mds stopped", "took", time.Since(start).Round(time.Millisecond))
	return err
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return "" }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
