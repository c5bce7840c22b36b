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

// TestAgentScrapedByMDS runs `ballast ds` over the fake host tree in
// testdata/host, an mds that scrapes it, and queries the agent's series
// through the mds query API.
func TestAgentScrapedByMDS(t *testing.T) {
	host, err := filepath.Abs("testdata/host")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	agentCfg := filepath.Join(dir, "ds.yml")
	os.WriteFile(agentCfg, []byte("role: ds\nsmartctl_drop_dir: "+filepath.Join(host, "smartctl")+"\n"), 0o644)
	ds := exec.Command(ballastBin, "ds", "--config", agentCfg, "--listen", "127.0.0.1:0",
		"--proc-root", filepath.Join(host, "proc"), "--sys-root", filepath.Join(host, "sys"), "--dev-root", filepath.Join(host, "dev"))
	stderr, _ := ds.StderrPipe()
	if err := ds.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Process.Kill(); ds.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := agentListenRe.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	var agent string
	select {
	case agent = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("ds agent did not start within 30s")
	}
	mdsCfg := filepath.Join(dir, "mds.yml")
	os.WriteFile(mdsCfg, []byte("role: mds\nscrape:\n  interval: 1s\n  timeout: 1s\n"), 0o644)
	p := startMDS(t, filepath.Join(dir, "data"), "--config", mdsCfg, "--scrape-target", agent)
	now := time.Now()
	// diskstats of the pcp fixture: sda and its partitions.
	p.waitCount(t, `ballast_disk_reads_completed_total{device="sda",job="ballast-agents"}`, now.Add(5*time.Second), 1)
	// the drop-directory smartctl captures: one NVMe and one ATA drive.
	p.waitCount(t, `ballast_drive_temperature_celsius`, now.Add(5*time.Second), 2)
	p.waitCount(t, `ballast_collector_success{collector="nfsd"}`, now.Add(5*time.Second), 1)
}
