package testpeer

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// VMCluster is a VictoriaMetrics cluster on loopback: two vmstorage, one
// vminsert with -replicationFactor=2 and one vmselect with
// -dedup.minScrapeInterval=1ms, as VictoriaMetrics documents for
// replication, and -replicationFactor=2 so that it answers fully while one
// storage node is down.
type VMCluster struct {
	Insert  *Proc
	Select  *Proc
	Storage []*Proc

	InsertAddr, SelectAddr string
	// StorageHTTP are the vmstorage HTTP addresses (/internal/force_flush).
	StorageHTTP []string
	// StorageSelect are the vmstorage addresses vmselect connects to.
	StorageSelect []string
}

// StartVMCluster starts the cluster and waits until every part answers
// /health. It skips when the binaries are absent. Its ports are found free
// and then handed to the processes, so another process on the machine can
// take one in between (seen beside make eval: vmstorage0 "bind: address
// already in use"); a start that fails that way is tried again, at most
// three times in all, with new ports.
func StartVMCluster(t testing.TB) *VMCluster {
	t.Helper()
	dir := VMClusterDir(t)
	for attempt := 1; ; attempt++ {
		c, err := startVMCluster(t, dir)
		if err == nil {
			c.waitReplicas(t)
			return c
		}
		lost := c.portTaken()
		if !lost || attempt == 3 {
			t.Fatalf("VictoriaMetrics cluster did not start (attempt %d): %v", attempt, err)
		}
		t.Logf("VictoriaMetrics cluster: a port was taken before its process bound it (attempt %d); starting again on new ports", attempt)
		for _, p := range c.procs() {
			p.Kill()
		}
	}
}

func startVMCluster(t testing.TB, dir string) (*VMCluster, error) {
	t.Helper()
	c := &VMCluster{}
	used := map[int]bool{}
	addr := func() string { // distinct within the cluster
		for {
			if p := FreePort(t); !used[p] {
				used[p] = true
				return fmt.Sprintf("127.0.0.1:%d", p)
			}
		}
	}
	var insertNodes, selectNodes string
	for i := range 2 {
		httpAddr, ins, sel := addr(), addr(), addr()
		data := filepath.Join(t.TempDir(), fmt.Sprintf("vmstorage%d", i))
		c.Storage = append(c.Storage, Start(t, fmt.Sprintf("vmstorage%d", i), filepath.Join(dir, "vmstorage"),
			"-storageDataPath="+data, "-httpListenAddr="+httpAddr, "-vminsertAddr="+ins, "-vmselectAddr="+sel,
			"-retentionPeriod=1y", "-memory.allowedBytes=256MiB", "-loggerLevel=WARN", "-inmemoryDataFlushInterval=1s"))
		c.StorageHTTP = append(c.StorageHTTP, httpAddr)
		c.StorageSelect = append(c.StorageSelect, sel)
		if i > 0 {
			insertNodes += ","
			selectNodes += ","
		}
		insertNodes += ins
		selectNodes += sel
	}
	c.InsertAddr = addr()
	c.SelectAddr = addr()
	c.Insert = Start(t, "vminsert", filepath.Join(dir, "vminsert"), "-httpListenAddr="+c.InsertAddr,
		"-storageNode="+insertNodes, "-replicationFactor=2", "-loggerLevel=WARN", "-memory.allowedBytes=256MiB")
	c.Select = Start(t, "vmselect", filepath.Join(dir, "vmselect"), "-httpListenAddr="+c.SelectAddr,
		"-storageNode="+selectNodes, "-dedup.minScrapeInterval=1ms", "-replicationFactor=2",
		"-search.latencyOffset=0s", "-loggerLevel=WARN", "-memory.allowedBytes=256MiB",
		"-cacheDataPath="+filepath.Join(t.TempDir(), "vmselect-cache"))
	for _, a := range append(append([]string{}, c.StorageHTTP...), c.InsertAddr, c.SelectAddr) {
		if err := WaitHTTP("http://"+a+"/health", 30*time.Second); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (c *VMCluster) procs() []*Proc {
	return append(append([]*Proc{}, c.Storage...), c.Insert, c.Select)
}

// portTaken reports whether a part of the cluster said it could not bind
// its address.
func (c *VMCluster) portTaken() bool {
	for _, p := range c.procs() {
		if b, err := os.ReadFile(p.log); err == nil && strings.Contains(string(b), "address already in use") {
			return true
		}
	}
	return false
}

// waitReplicas waits until vminsert is connected to every vmstorage: data
// it accepts before that is kept with fewer copies than
// -replicationFactor asks for, and is lost with the one node holding it.
func (c *VMCluster) waitReplicas(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + c.InsertAddr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if n := countReachable(string(b)); n == len(c.Storage) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("vminsert is not connected to all %d vmstorage nodes after 30s", len(c.Storage))
}

func countReachable(metrics string) int {
	n := 0
	for _, l := range strings.Split(metrics, "\n") {
		// vm_rpc_vmstorage_is_reachable is 1 before the first dial too;
		// the dialer's open connections are what count.
		if strings.HasPrefix(l, `vm_tcpdialer_conns{name="vminsert_metric_rows"`) && strings.HasSuffix(l, " 1") {
			n++
		}
	}
	return n
}

// WriteURL is vminsert's root (ballast adds /insert/TENANT/prometheus/…).
func (c *VMCluster) WriteURL() string { return "http://" + c.InsertAddr }

// QueryURL is vmselect's root.
func (c *VMCluster) QueryURL() string { return "http://" + c.SelectAddr }

// FlushURLs are the vmstorage /internal/force_flush endpoints.
func (c *VMCluster) FlushURLs() []string {
	var out []string
	for _, a := range c.StorageHTTP {
		out = append(out, "http://"+a+"/internal/force_flush")
	}
	return out
}

// RestartInsert starts vminsert again (after Stop) and waits for it.
func (c *VMCluster) RestartInsert(t testing.TB) {
	t.Helper()
	if err := c.Insert.Start(); err != nil {
		t.Fatal(err)
	}
	if err := WaitHTTP("http://"+c.InsertAddr+"/health", 30*time.Second); err != nil {
		t.Fatalf("vminsert did not restart: %v", err)
	}
	c.waitReplicas(t)
}

// RestartStorage starts vmstorage i again and waits for it.
func (c *VMCluster) RestartStorage(t testing.TB, i int) {
	t.Helper()
	if err := c.Storage[i].Start(); err != nil {
		t.Fatal(err)
	}
	if err := WaitHTTP("http://"+c.StorageHTTP[i]+"/health", 30*time.Second); err != nil {
		t.Fatalf("vmstorage%d did not restart: %v", i, err)
	}
	c.waitReplicas(t)
}

// Single is a single-node engine serving remote write and the Prometheus
// API on one address.
type Single struct {
	Proc *Proc
	Addr string
	// WritePath is the remote-write path on Addr.
	WritePath string
	// FlushURL makes recent writes searchable ("" when writes are
	// searchable on acknowledgement, as in Prometheus).
	FlushURL string
	// Scheme is http, or https when started with TLS.
	Scheme string
}

func (s *Single) scheme() string {
	if s.Scheme == "" {
		return "http"
	}
	return s.Scheme
}

// WriteURL is the remote-write endpoint.
func (s *Single) WriteURL() string { return s.scheme() + "://" + s.Addr + s.WritePath }

// QueryURL is the Prometheus API root.
func (s *Single) QueryURL() string { return s.scheme() + "://" + s.Addr }

// StartVictoriaMetrics starts Debian's single-node victoria-metrics; extra
// flags (TLS, -httpAuth.*) are appended. With -tls its URLs are https and
// readiness is not polled (the caller's client knows the CA).
func StartVictoriaMetrics(t testing.TB, extra ...string) *Single {
	t.Helper()
	bin := Debian(t, "victoria-metrics", "victoria-metrics")
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	args := append([]string{"-httpListenAddr=" + addr, "-storageDataPath=" + filepath.Join(t.TempDir(), "vm"),
		"-retentionPeriod=1y", "-search.latencyOffset=0s", "-memory.allowedBytes=256MiB", "-loggerLevel=WARN"}, extra...)
	p := Start(t, "victoria-metrics", bin, args...)
	s := &Single{Proc: p, Addr: addr, WritePath: "/api/v1/write", FlushURL: "http://" + addr + "/internal/force_flush"}
	for _, a := range extra {
		if a == "-tls" {
			s.Scheme = "https"
			s.FlushURL = "https://" + addr + "/internal/force_flush"
			return s
		}
	}
	if err := WaitHTTP("http://"+addr+"/health", 30*time.Second); err != nil {
		t.Fatalf("victoria-metrics did not start: %v", err)
	}
	return s
}

// StartPrometheus starts Debian's Prometheus with its remote-write
// receiver and no scrape targets.
func StartPrometheus(t testing.TB) *Single {
	t.Helper()
	bin := Debian(t, "prometheus", "prometheus")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 1h\nscrape_configs: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	p := Start(t, "prometheus", bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+addr, "--web.enable-remote-write-receiver", "--log.level=warn",
		"--storage.tsdb.retention.time=30d")
	if err := WaitHTTP("http://"+addr+"/-/ready", 60*time.Second); err != nil {
		t.Fatalf("prometheus did not start: %v", err)
	}
	return &Single{Proc: p, Addr: addr, WritePath: "/api/v1/write"}
}

// Etcd is a one-member etcd on loopback.
type Etcd struct {
	Proc      *Proc
	ClientURL string
}

// StartEtcd starts Debian's etcd (etcd-server) with a fresh data dir.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	bin := Debian(t, "etcd", "etcd-server")
	dir := t.TempDir()
	client := fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
	p := Start(t, "etcd", bin, "--name=test", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=test="+peer, "--log-level=warn", "--logger=zap")
	if err := WaitHTTP(client+"/health", 30*time.Second); err != nil {
		t.Fatalf("etcd did not start: %v", err)
	}
	return &Etcd{Proc: p, ClientURL: client}
}

// SelectOnly starts a vmselect that reads vmstorage i alone and returns its
// Prometheus API root for tenant, to see what one node holds.
func (c *VMCluster) SelectOnly(t testing.TB, i int, tenant string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	Start(t, fmt.Sprintf("vmselect-node%d", i), filepath.Join(VMClusterDir(t), "vmselect"), "-httpListenAddr="+addr,
		"-storageNode="+c.StorageSelect[i], "-dedup.minScrapeInterval=1ms", "-loggerLevel=WARN", "-memory.allowedBytes=128MiB",
		"-cacheDataPath="+filepath.Join(t.TempDir(), "vmselect-cache"))
	if err := WaitHTTP("http://"+addr+"/health", 30*time.Second); err != nil {
		t.Fatalf("vmselect for vmstorage%d did not start: %v", i, err)
	}
	return "http://" + addr + "/select/" + tenant + "/prometheus"
}
