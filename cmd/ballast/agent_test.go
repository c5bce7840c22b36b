package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

var agentListenRe = regexp.MustCompile(`msg="agent started" role=\S+ listen=(\S+)`)

// agentProc is a `ballast ds` subprocess over the fake host tree in
// testdata/host.
type agentProc struct {
	cmd  *exec.Cmd
	addr string
	done chan error
}

// startAgent runs `ballast ds` on listen (127.0.0.1:0 for a free port) with
// extra flags and waits until it serves.
func startAgent(t *testing.T, listen string, extra ...string) *agentProc {
	t.Helper()
	host, err := filepath.Abs("testdata/host")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "ds.yml")
	os.WriteFile(cfg, []byte("role: ds\nsmartctl_drop_dir: "+filepath.Join(host, "smartctl")+"\n"), 0o644)
	args := append([]string{"ds", "--config", cfg, "--listen", listen,
		"--proc-root", filepath.Join(host, "proc"), "--sys-root", filepath.Join(host, "sys"), "--dev-root", filepath.Join(host, "dev")}, extra...)
	cmd := exec.Command(ballastBin, args...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &agentProc{cmd: cmd, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := agentListenRe.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() { p.kill() })
	select {
	case p.addr = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("ds agent did not start within 30s")
	}
	return p
}

// kill ends the agent with SIGKILL and waits for it.
func (p *agentProc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		<-p.done
	}
}

// TestAgentScrapedByMDS runs `ballast ds` over the fake host tree in
// testdata/host, an mds that scrapes it, and queries the agent's series
// through the mds query API, labelled with the agent's node and role.
func TestAgentScrapedByMDS(t *testing.T) {
	dir := t.TempDir()
	agent := startAgent(t, "127.0.0.1:0", "--node-name", "ds42").addr
	mdsCfg := filepath.Join(dir, "mds.yml")
	os.WriteFile(mdsCfg, []byte("role: mds\nscrape:\n  interval: 1s\n  timeout: 1s\n"), 0o644)
	p := startMDS(t, filepath.Join(dir, "data"), "--config", mdsCfg, "--scrape-target", agent)
	now := time.Now()
	// diskstats of the pcp fixture: sda and its partitions, with the node
	// and role the agent announces in ballast_build_info.
	p.waitCount(t, `ballast_disk_reads_completed_total{device="sda",job="ballast-agents",node="ds42",role="ds"}`, now.Add(5*time.Second), 1)
	// the drop-directory smartctl captures: one NVMe and one ATA drive.
	p.waitCount(t, `ballast_drive_temperature_celsius`, now.Add(5*time.Second), 2)
	p.waitCount(t, `ballast_collector_success{collector="nfsd"}`, now.Add(5*time.Second), 1)
}
