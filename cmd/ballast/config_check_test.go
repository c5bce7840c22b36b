package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConfigCheckIsDaemonStart is issue 9's acceptance 6: over one table of
// config files, `ballast config check FILE` accepts exactly the files the
// daemon of their role (`ballast ROLE --config FILE`, a real subprocess)
// starts with, and both refuse the others with the same message naming
// the field and the value.
func TestConfigCheckIsDaemonStart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, role, body string
		want             string // "" for a valid file, else a substring of both errors
	}{
		{"mds minimal", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\n", ""},
		{"mds full", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nstorage:\n  retention: 30d\n  flush_interval: 2s\nscrape:\n  interval: 2s\n  timeout: 1s\n  targets: [127.0.0.1:1]\n  target_files: [DIR/targets.json]\nreport:\n  capacity_every: 0s\n", ""},
		{"ds", "ds", "listen: 127.0.0.1:0\nnode_name: ds01\ncollectors: {smartctl: false}\n", ""},
		{"client with dcgm-exporter", "client", "listen: 127.0.0.1:0\ndcgm_exporter_url: http://127.0.0.1:1/metrics\n", ""},
		{"mds durability wal", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nstorage:\n  durability: wal\n", ""},
		{"durability unknown", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nstorage:\n  durability: fsync\n", `storage.durability: "fsync" is not window or wal`},
		{"retention too short", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nstorage:\n  retention: 2h\n", "storage.retention: 2h0m0s is below the minimum of 24h"},
		{"duration without unit", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nstorage:\n  flush_interval: 5\n", `storage.flush_interval: cannot parse duration "5"`},
		{"agent duration typo", "ds", "listen: 127.0.0.1:0\ncollector_timeout: 5 s\n", `collector_timeout: cannot parse duration "5 s"`},
		{"unknown field", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nscrap:\n  interval: 5s\n", "field scrap not found"},
		{"scrape timeout over interval", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nscrape:\n  interval: 5s\n  timeout: 10s\n", "scrape.timeout: 10s must be positive and at most scrape.interval (5s)"},
		{"scrape target without port", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nscrape:\n  targets: [ds01]\n", `scrape.targets[0]: "ds01": not HOST:PORT`},
		{"otlp endpoint without port", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\ntelemetry:\n  otlp_endpoint: collector\n", `telemetry.otlp_endpoint: "collector"`},
		{"unknown collector", "ds", "listen: 127.0.0.1:0\ncollectors: {nvmee: true}\n", `collectors: "nvmee" is not a collector`},
		{"malformed dcgm URL", "client", "listen: 127.0.0.1:0\ndcgm_exporter_url: http//gpu01:9400/metrics\n", `dcgm_exporter_url: invalid dcgm-exporter URL "http//gpu01:9400/metrics"`},
		{"dcgm URL not http", "client", "listen: 127.0.0.1:0\ndcgm_exporter_url: ftp://gpu01/metrics\n", "want http:// or https://"},
		{"missing proc root", "ds", "listen: 127.0.0.1:0\nroots:\n  proc: DIR/nope\n", `roots.proc: "DIR/nope" is not a directory on this host`},
		{"node name too long", "ds", "listen: 127.0.0.1:0\nnode_name: " + strings.Repeat("n", 254) + "\n", "node_name: \"nnnn"},
		{"bad log level", "client", "listen: 127.0.0.1:0\nlog_level: loud\n", `log_level: "loud" is not one of debug, info, warn, error`},
		// Files the daemons read before they start: a missing one is
		// refused by config check too (it was accepted, then the daemon
		// refused it).
		{"listener token file missing", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nauth:\n  clients: [{name: grafana, token_file: DIR/nope, scopes: [query]}]\n", `cannot read token file "DIR/nope" of client "grafana"`},
		{"agent TLS certificate missing", "ds", "listen: 127.0.0.1:0\nnode_name: ds01\ntls: {cert_file: DIR/nope.crt, key_file: DIR/nope.key}\n", `cannot read TLS file "DIR/nope.crt"`},
		{"remote store CA missing", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nstorage:\n  backend: remote\n  remote: {write_url: http://127.0.0.1:1/api/v1/write, query_url: http://127.0.0.1:1, tls: {ca_file: DIR/nope.pem}}\n", `cannot read storage.remote.tls.ca_file "DIR/nope.pem"`},
		{"remote store token missing", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nstorage:\n  backend: remote\n  remote: {write_url: http://127.0.0.1:1/api/v1/write, query_url: http://127.0.0.1:1, bearer_token_file: DIR/nope}\n", `cannot read storage.remote.bearer_token_file "DIR/nope"`},
		{"etcd password file missing", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nha: {etcd_endpoints: [http://127.0.0.1:1], username: ballast, password_file: DIR/nope}\n", `cannot read ha.password_file "DIR/nope"`},
		{"twin driver on a real mds", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nactuators: {driver: twin}\n", `actuators.driver: "twin" moves data on the cluster twin`},
		{"exec driver", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nactuators:\n  driver: exec\n  exec:\n    devices: [{device: \"01\", ds: ds01}]\n    commands: {locate: [\"true\"], stripes: [\"true\"], copy: [\"true\"], verify: [\"true\"], commit: [\"true\"], cleanup: [\"true\"], abort: [\"true\"]}\n", ""},
		{"exec restripe command while restripe is off", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nactuators:\n  driver: exec\n  exec:\n    devices: [{device: \"01\", ds: ds01}]\n    commands: {locate: [\"true\"], stripes: [\"true\"], copy: [\"true\"], verify: [\"true\"], commit: [\"true\"], cleanup: [\"true\"], abort: [\"true\"], restripe_commit: [\"true\"]}\n", "actuators.exec.commands.restripe_commit: given while actuators.exec.restripe is off"},
		{"exec restripe without its commands", "mds", "listen: 127.0.0.1:0\ndata_dir: DIR/data\nactuators:\n  driver: exec\n  exec:\n    restripe: true\n    devices: [{device: \"01\", ds: ds01}]\n    commands: {locate: [\"true\"], stripes: [\"true\"], copy: [\"true\"], verify: [\"true\"], commit: [\"true\"], cleanup: [\"true\"], abort: [\"true\"]}\n", "actuators.exec.commands.restripe_copy: must give a command (restripe is on)"},
		{"read-ahead CA missing", "client", "listen: 127.0.0.1:0\nnode_name: gpu01\nreadahead: {mds_url: https://127.0.0.1:1, ca_file: DIR/nope.pem, state_file: DIR/ra.json}\n", "cannot read readahead.ca_file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			body := strings.ReplaceAll("role: "+c.role+"\n"+c.body, "DIR", dir)
			want := strings.ReplaceAll(c.want, "DIR", dir)
			os.WriteFile(filepath.Join(dir, "targets.json"), []byte("[]"), 0o644)
			file := filepath.Join(dir, "config.yml")
			if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, checkErr := runCLI("config", "check", file)
			started, daemonErr := startDaemon(t, c.role, file)
			switch {
			case c.want == "" && (code != 0 || !started):
				t.Errorf("valid config: config check exit %d (%s); daemon started %v (%s); want both to accept it", code, checkErr, started, daemonErr)
			case c.want != "" && (code != 1 || started):
				t.Errorf("invalid config: config check exit %d; daemon started %v; want both to refuse it", code, started)
			case c.want != "":
				for who, msg := range map[string]string{"config check": checkErr, "ballast " + c.role: daemonErr} {
					if !strings.Contains(msg, want) {
						t.Errorf("%s: got %q; want it to contain %q", who, msg, want)
					}
				}
			}
		})
	}
}

// startDaemon runs `ballast ROLE --config FILE` and reports whether it
// started (then stops it with SIGTERM and expects a clean exit) or what it
// said when it refused to.
func startDaemon(t *testing.T, role, file string) (bool, string) {
	t.Helper()
	cmd := exec.Command(ballastBin, role, "--config", file)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	started := make(chan bool, 1)
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		sent := false
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if !sent && (strings.Contains(sc.Text(), `msg="mds started"`) || strings.Contains(sc.Text(), `msg="agent started"`)) {
				started <- true
				sent = true
			}
		}
		done <- cmd.Wait()
	}()
	select {
	case <-started:
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ballast %s stopped with %v after SIGTERM\n%s", role, err, logs.String())
			}
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("ballast %s did not stop within 60s of SIGTERM", role)
		}
		return true, ""
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("ballast %s: got %v; want exit status 1", role, err)
		}
		return false, logs.String()
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("ballast %s neither started nor exited within 60s", role)
		return false, ""
	}
}

// TestConfigCheckTakesConfigFlag: the file can be named as the daemons take
// it (--config FILE); naming it twice, or not at all, is a usage error that
// says so.
func TestConfigCheckTakesConfigFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "ds.yml")
	if err := os.WriteFile(file, []byte("role: ds\nlisten: 127.0.0.1:0\nnode_name: ds01\ncollectors: {smartctl: false}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI("config", "check", "--config", file); code != 0 || !strings.Contains(out, file+": valid ds config") {
		t.Fatalf("config check --config FILE: exit %d, stdout %q, stderr %q; want 0 and valid ds config", code, out, errOut)
	}
	for _, args := range [][]string{{"--config", file, file}, {}} {
		code, _, errOut := runCLI(append([]string{"config", "check"}, args...)...)
		if code != 2 || !strings.Contains(errOut, "usage error") {
			t.Errorf("config check %q: exit %d, stderr %q; want a usage error (exit 2)", args, code, errOut)
		}
	}
}
