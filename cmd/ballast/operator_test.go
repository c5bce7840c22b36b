package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

// TestRealMDSFindingsForOperators is issue 9's acceptance 1 with real
// binaries: a `ballast ds` agent whose smartctl_drop_dir holds one FAILED
// NVMe capture (SAMSUNG MZWLL3T2HAJQ at /dev/nvme0) beside a healthy NVMe
// and a healthy ATA drive, scraped by a real `ballast mds` with a 1 s scrape
// and tick. Within 30 s /api/v1/findings and `ballast findings` list
// drive_failure_risk for ds42/nvme0n1 — the name operators use, from the
// mds's device table — and nothing for the healthy drives. LAYOUTSTATS
// posted to the same mds, with one of six devices at ten times its peers'
// load, produce a hotspot finding for that drive (and one for its hot
// stripe, named by the drive too).
func TestRealMDSFindingsForOperators(t *testing.T) {
	dir := t.TempDir()
	drop := filepath.Join(dir, "smartctl")
	os.Mkdir(drop, 0o755)
	for src, name := range map[string]string{
		"../../collector/testdata/fixtures/smartctl/nvme-null-SAMSUNG_MZWLL3T2HAJQ-00005-nvme0.json": "failed-nvme0.json",
		"../../collector/testdata/fixtures/smartctl/nvme-null-INTEL_SSDPE2KX010T8-nvme1.json":        "healthy-nvme1.json",
		"testdata/host/smartctl/ST3500418AS_11.json":                                                 "healthy-sdb.json",
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(drop, name), b, 0o644)
	}
	dsCfg := filepath.Join(dir, "ds.yml")
	os.WriteFile(dsCfg, []byte("role: ds\nnode_name: ds42\nsmartctl_drop_dir: "+drop+"\n"), 0o644)
	agent := startAgent(t, "127.0.0.1:0", "--config", dsCfg).addr

	// The device table, as the pNFS server's configuration gives it: six
	// device ids, the drives behind them on ds42.
	ids := make([]string, 6)
	var devs strings.Builder
	for i := range ids {
		ids[i] = fmt.Sprintf("62616c6c6173740000000000000000%02x", i)
		fmt.Fprintf(&devs, "  - {id: %s, ds: ds42, drive: nvme%dn1}\n", ids[i], i)
	}
	mdsCfg := filepath.Join(dir, "mds.yml")
	os.WriteFile(mdsCfg, []byte("role: mds\nscrape:\n  interval: 1s\n  timeout: 1s\npipeline:\n  tick: 1s\ndevices:\n"+devs.String()), 0o644)
	p := startMDS(t, filepath.Join(dir, "data"), "--config", mdsCfg, "--scrape-target", agent)
	started := time.Now()

	findings := func(kind string) []models.Finding {
		t.Helper()
		resp, err := http.Get(p.url("/api/v1/findings?active=true&kind=" + kind))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct {
			Data []models.Finding `json:"data"`
		}
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("/api/v1/findings: %v: %s", err, b)
		}
		return got.Data
	}
	subjects := func(fs []models.Finding) []string {
		var s []string
		for _, f := range fs {
			s = append(s, f.Subject.String())
		}
		return s
	}
	wantDrive := models.Subject{Kind: models.SubjectDevice, ID: "ds42/nvme0n1"}
	var risk []models.Finding
	for risk = findings("drive_failure_risk"); len(risk) == 0 && time.Since(started) < 30*time.Second; risk = findings("drive_failure_risk") {
		time.Sleep(500 * time.Millisecond)
	}
	if len(risk) != 1 || risk[0].Subject != wantDrive {
		t.Fatalf("drive_failure_risk within 30 s of the mds starting: got %v; want one for %s\n%s", subjects(risk), wantDrive, p.logs)
	}
	t.Logf("drive_failure_risk for %s after %s: %s", risk[0].Subject, time.Since(started).Round(100*time.Millisecond), risk[0].Summary)
	code, out, errs := runCLI("findings", "--url", "http://"+p.addr, "--kind", "drive_failure_risk", "--active")
	if code != 0 || !strings.Contains(out, "drive_failure_risk") || !strings.Contains(out, "device ds42/nvme0n1") {
		t.Errorf("ballast findings: exit %d, stderr %q, table:\n%s\nwant drive_failure_risk for device ds42/nvme0n1", code, errs, out)
	}

	// LAYOUTSTATS: one client reads one stripe on each device, reporting
	// every second: 2000 reads/s of 64 KiB from nvme3n1's device and 200/s
	// from the others, each device busy half the time, 1 ms per read.
	nfstime := func(d time.Duration) string {
		return fmt.Sprintf(`{"seconds":%d,"nseconds":%d}`, d/time.Second, d%time.Second)
	}
	hot := 3
	post := func(k int) {
		var reps []string
		for i, id := range ids {
			rate := 200
			if i == hot {
				rate = 2000
			}
			ops, bytes := rate*k, rate*k*65536
			reps = append(reps, fmt.Sprintf(`{"ffis_offset":0,"ffis_length":1048576,"ffis_stateid":{"seqid":1,"other":"0000000000000000000000%02x"},
 "ffis_read":{"ii_count":%d,"ii_bytes":%d},"ffis_write":{"ii_count":0,"ii_bytes":0},"ffis_deviceid":%q,
 "ffis_layoutupdate":{"ffl_addr":{"na_r_netid":"tcp","na_r_addr":"127.0.0.1.8.1"},"ffl_fhandle":"01%02x",
  "ffl_read":{"ffil_ops_requested":%d,"ffil_bytes_requested":%d,"ffil_ops_completed":%d,"ffil_bytes_completed":%d,"ffil_bytes_not_delivered":0,
   "ffil_total_busy_time":%s,"ffil_aggregate_completion_time":%s},
  "ffl_write":{"ffil_ops_requested":0,"ffil_bytes_requested":0,"ffil_ops_completed":0,"ffil_bytes_completed":0,"ffil_bytes_not_delivered":0,
   "ffil_total_busy_time":{"seconds":0,"nseconds":0},"ffil_aggregate_completion_time":{"seconds":0,"nseconds":0}},
  "ffl_duration":{"seconds":%d,"nseconds":0},"ffl_local":false}}`,
				i, ops, bytes, id, i, ops, bytes, ops, bytes, nfstime(time.Duration(k)*time.Second/2), nfstime(time.Duration(ops)*time.Millisecond), k))
		}
		body := fmt.Sprintf(`{"client_id":"gpu01","report_time":%q,"reports":[%s]}`, time.Now().UTC().Format(time.RFC3339Nano), strings.Join(reps, ","))
		code, ans := send(t, http.MethodPost, p.url("/api/v1/layoutstats"), "application/json", []byte(body))
		if code/100 != 2 {
			t.Fatalf("LAYOUTSTATS: got %d %s", code, ans)
		}
	}
	wantHot := models.Subject{Kind: models.SubjectDevice, ID: fmt.Sprintf("ds42/nvme%dn1", hot)}
	start := time.Now()
	var hs []models.Finding
	for k := 1; time.Since(start) < 60*time.Second; k++ {
		post(k)
		if hs = findings("hotspot"); len(hs) > 0 {
			break
		}
		time.Sleep(time.Second)
	}
	// The device's finding, and its hot stripe's, named by the drive.
	var dev *models.Finding
	for i := range hs {
		if hs[i].Subject == wantHot {
			dev = &hs[i]
		}
		if !strings.HasPrefix(hs[i].Subject.ID, wantHot.ID) {
			dev = nil
			break
		}
	}
	if dev == nil {
		t.Fatalf("hotspot from LAYOUTSTATS: got %v; want one for %s (and at most its stripes)\n%s", subjects(hs), wantHot, p.logs)
	}
	t.Logf("hotspot for %s after %s: %s", dev.Subject, time.Since(start).Round(100*time.Millisecond), dev.Summary)
}
