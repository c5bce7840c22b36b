package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/cluster/node"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMDSConfigLoads(t *testing.T) {
	p := writeConfig(t, `
role: mds
listen: 0.0.0.0:9750
data_dir: /var/lib/ballast
storage:
  retention: 90d
  flush_interval: 2s
scrape:
  interval: 10s
  timeout: 5s
  targets: [ds01:9751, gpu01:9752]
`)
	c, err := LoadMDSConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(c.Storage.Retention) != 90*24*time.Hour || c.Scrape.Targets[1] != "gpu01:9752" || c.Ingest.MaxBodyBytes != 32<<20 {
		t.Errorf("got %+v; want the file's values over the defaults", c)
	}
}

func TestConfigErrorsNameFieldAndValue(t *testing.T) {
	cases := []struct{ body, want string }{
		{"role: mds\nlisten: 127.0.0.1:9750\nretension: 30d\n", "field retension not found"},
		{"role: mds\nstorage:\n  retention: 2h\n", "storage.retention: 2h0m0s is below the minimum of 24h"},
		{"role: mds\nstorage:\n  retention: forever\n", `storage.retention: cannot parse duration "forever"`},
		{"role: ds\ncollector_timeout: 5\n", `collector_timeout: cannot parse duration "5"`},
		{"role: mds\nscrape:\n  targets: [ds01:9751]\n  interval: [1s]\n", "scrape.interval"},
		{"role: ds\ncollectors: {nvmee: true}\n", `collectors: "nvmee" is not a collector`},
		{"role: client\ndcgm_exporter_url: http//gpu01:9400/metrics\n", `dcgm_exporter_url: invalid dcgm-exporter URL "http//gpu01:9400/metrics"`},
		{"role: client\ndcgm_exporter_url: http://\n", "no host"},
		{"role: ds\nnode_name: " + strings.Repeat("a", 300) + "\n", "node_name: \"aaaa"},
		{"role: mds\nlisten: localhost\n", `listen: "localhost": not HOST:PORT`},
		{"role: mds\nscrape:\n  targets: [ds01]\n", `scrape.targets[0]: "ds01"`},
		{"role: mds\nscrape:\n  interval: 5s\n  timeout: 10s\n", "scrape.timeout: 10s must be positive and at most scrape.interval (5s)"},
		{"role: mds\nlog_level: loud\n", `log_level: "loud" is not one of`},
		{"role: mds\ningest:\n  max_body_bytes: 10\n", "ingest.max_body_bytes: 10 is below the minimum of 1024"},
		{"role: mds\ningest:\n  max_inflight_requests: 0\n", "ingest.max_inflight_requests: 0 is below the minimum of 1"},
		{"role: mds\ningest:\n  max_inflight_bytes: 10\n", "ingest.max_inflight_bytes: 10 is below the minimum of 1024"},
		{"role: mds\ningest:\n  queue_timeout: 0s\n", "ingest.queue_timeout: 0s must be positive"},
		{"role: mds\ningest:\n  max_workers: -1\n", "ingest.max_workers: -1 is negative"},
		{"role: mds\ntelemetry:\n  sample_ratio: 2\n", "telemetry.sample_ratio: 2 is outside [0, 1]"},
		{"role: mds\nstorage:\n  flush_interval: 100ms\n", "storage.flush_interval: 100ms is below the minimum of 1s"},
		{"role: mds\nstorage:\n  query_timeout: 500ms\n", "storage.query_timeout: 500ms is below the minimum of 1s"},
		{"role: mds\nstorage:\n  max_memory_per_query: -1\n", "storage.max_memory_per_query: -1 is negative"},
		{"role: mds\nstorage:\n  max_concurrent_queries: -2\n", "storage.max_concurrent_queries: -2 is negative"},
		{"role: mds\nstorage:\n  backend: s3\n", `storage.backend: "s3" is not "embedded" or "remote"`},
		{"role: mds\nstorage:\n  backend: remote\n", "storage.remote.write_url: must not be empty"},
		{"role: mds\nstorage:\n  backend: remote\n  remote: {write_url: 'http://a/w', query_url: 'http://b', tenant: x}\n", `storage.remote.tenant: "x" is not accountID`},
		{"role: mds\nstorage:\n  backend: remote\n  remote: {write_url: 'http://a/w', query_url: 'http://b', queue_max_bytes: 5}\n", "storage.remote.queue_max_bytes: 5 is below the minimum"},
		{"role: ds\nroots:\n  proc: ''\n", "roots.proc: must not be empty"},
		{"role: client\ncollectors: {dcgm: maybe}\n", "collectors.dcgm: cannot unmarshal"},
		{"role: gateway\n", `role: "gateway" is not mds, ds or client`},
		{"listen: 127.0.0.1:1\n", "has no role: field"},
		{"role: mds\ndevices:\n  - {id: 62616c6c, ds: ds01}\n", `devices[0].id: "62616c6c" is not a pNFS device id (32 hex digits)`},
		{"role: mds\ndevices:\n  - {id: 62616c6c617374000000000000000001, ds: ds01, export: data}\n", `devices[0].export: "data" is not a clean absolute path`},
		{"role: mds\ndata_servers:\n  - {name: ds01, addresses: [ds01]}\n", `data_servers[0].addresses[0]: "ds01" is not HOST:PORT`},
	}
	for _, c := range cases {
		_, err := CheckFile(writeConfig(t, c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config %q: got %v; want an error containing %q", c.body, err, c.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"15s": 15 * time.Second, "30d": 30 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "1.5h": 90 * time.Minute} {
		got, err := node.ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("node.ParseDuration(%q): got %v, %v; want %v", in, got, err, want)
		}
	}
	if Duration(30*24*time.Hour).String() != "30d" {
		t.Errorf("got %q; want 30d", Duration(30*24*time.Hour).String())
	}
}

func TestApplyStoreFlag(t *testing.T) {
	var s StorageConfig
	if err := ApplyStoreFlag(&s, "remote=http://vm:8428/", nil); err != nil || s.Backend != BackendRemote || s.Remote.WriteURL != "http://vm:8428/api/v1/write" || s.Remote.QueryURL != "http://vm:8428" {
		t.Errorf("remote=URL: got %+v, %v; want write URL/api/v1/write and query URL", s, err)
	}
	if err := ApplyStoreFlag(&s, "remote=http://i/insert/0/prometheus/api/v1/write,http://s/select/0/prometheus", []string{"http://f"}); err != nil || s.Remote.WriteURL != "http://i/insert/0/prometheus/api/v1/write" || s.Remote.QueryURL != "http://s/select/0/prometheus" || len(s.Remote.FlushURLs) != 1 {
		t.Errorf("remote=W,Q: got %+v, %v", s, err)
	}
	for _, bad := range []string{"remote", "s3", "remote=a,b,c"} {
		if err := ApplyStoreFlag(&s, bad, nil); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("--store %q: got %v; want an error naming it", bad, err)
		}
	}
}
