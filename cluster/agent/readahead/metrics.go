package readahead

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func newClient(cfg Config) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("cannot read readahead.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("readahead.ca_file %q holds no PEM certificate", cfg.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: time.Duration(cfg.Poll)}, nil
}

var (
	descCurrent  = prometheus.NewDesc("ballast_readahead_current_bytes", "Read-ahead of a mount the agent manages, as read back from /sys/class/bdi/<bdi>/read_ahead_kb.", []string{"mountpoint", "bdi"}, nil)
	descOriginal = prometheus.NewDesc("ballast_readahead_original_bytes", "Read-ahead the agent found before its first write to the mount's bdi: what it restores.", []string{"mountpoint", "bdi"}, nil)
	descDesired  = prometheus.NewDesc("ballast_readahead_desired_bytes", "Read-ahead the mds asks for the mount and the agent accepted (absent: none; dry_run=\"true\": shown, never written).", []string{"mountpoint", "bdi", "dry_run"}, nil)
	descWrites   = prometheus.NewDesc("ballast_readahead_writes_total", "Writes of read_ahead_kb toward the mds's desired value.", []string{"mountpoint"}, nil)
	descRefusals = prometheus.NewDesc("ballast_readahead_refusals_total", "Desired values refused because they were outside the agent's bounds (one per sync while asked).", []string{"mountpoint"}, nil)
	descRestores = prometheus.NewDesc("ballast_readahead_restores_total", "Writes of the original value back (shutdown, mds lease lost, no value asked).", []string{"mountpoint"}, nil)
	descSyncErr  = prometheus.NewDesc("ballast_readahead_sync_errors_total", "Syncs with the mds that failed.", nil, nil)
	descContact  = prometheus.NewDesc("ballast_readahead_mds_contact_age_seconds", "Seconds since the last successful sync with the mds; past readahead.lease every original is restored.", nil, nil)
)

// Describe implements prometheus.Collector.
func (a *Agent) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCurrent, descOriginal, descDesired, descWrites, descRefusals, descRestores, descSyncErr, descContact} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (a *Agent) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for mp, m := range a.mounts {
		if m.Error == "" || m.CurrentKB > 0 {
			ch <- prometheus.MustNewConstMetric(descCurrent, prometheus.GaugeValue, float64(m.CurrentKB*1024), mp, m.BDI)
			ch <- prometheus.MustNewConstMetric(descOriginal, prometheus.GaugeValue, float64(m.OriginalKB*1024), mp, m.BDI)
		}
		if m.desiredKB > 0 {
			ch <- prometheus.MustNewConstMetric(descDesired, prometheus.GaugeValue, float64(m.desiredKB*1024), mp, m.BDI, "false")
		}
		if m.dryRunKB > 0 {
			ch <- prometheus.MustNewConstMetric(descDesired, prometheus.GaugeValue, float64(m.dryRunKB*1024), mp, m.BDI, "true")
		}
	}
	for _, c := range []struct {
		d *prometheus.Desc
		m map[string]float64
	}{{descWrites, a.met.writes}, {descRefusals, a.met.refusals}, {descRestores, a.met.restores}} {
		for mp, v := range c.m {
			ch <- prometheus.MustNewConstMetric(c.d, prometheus.CounterValue, v, mp)
		}
	}
	ch <- prometheus.MustNewConstMetric(descSyncErr, prometheus.CounterValue, a.met.syncErrors["mds"])
	if !a.lastOK.IsZero() {
		ch <- prometheus.MustNewConstMetric(descContact, prometheus.GaugeValue, a.opts.Now().Sub(a.lastOK).Seconds())
	}
}
