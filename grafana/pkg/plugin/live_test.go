package plugin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/backend/grpcplugin"
	"github.com/grafana/grafana-plugin-sdk-go/genproto/pluginv2"
	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/ballast-io/ballast/grafana/pkg/plugin"
)

// These tests run what a user runs: the ballast binary (a demo run, then
// `ballast mds` on its store) and the plugin's executable, started and
// spoken to the way Grafana does it — go-plugin's handshake and Grafana's
// gRPC plugin protocol (pluginv2).

// demoDuration is the simulated time of the demo the tests read: long
// enough for three 15-minute checkpoints (a checkpoint forecast needs
// three bursts), a hot shard, a failing drive and GPU starvation.
const demoDuration = "50m"

// live is the shared fixture: the mds, the demo's time range and the
// plugin's clients.
var live struct {
	mdsURL     string
	start, end time.Time
	// actionMode is the mode the demo's actuators ran in (auto: nothing
	// ever waits for approval)
	actionMode string
	data       grpcplugin.DataClient
	diag       grpcplugin.DiagnosticsClient
	resource   grpcplugin.ResourceClient
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ballast-grafana-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := filepath.Abs("../../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ballast := filepath.Join(dir, "ballast")
	exe := filepath.Join(dir, "gpx_ballast_linux_amd64")
	for _, b := range []struct{ dir, out, pkg string }{
		{root, ballast, "./cmd/ballast"},
		{filepath.Join(root, "grafana"), exe, "./pkg"},
	} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir = b.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "cannot build %s: %v\n%s", b.pkg, err, out)
			return 1
		}
	}
	out := filepath.Join(dir, "demo")
	demo := exec.Command(ballast, "demo", "--scenario", "mixed", "--seed", "1", "--duration", demoDuration, "--out", out, "--listen", "127.0.0.1:0", "--quiet")
	if b, err := demo.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "ballast demo: %v\n%s", err, b)
		return 1
	}
	var sum struct {
		Start       time.Time `json:"sim_start"`
		End         time.Time `json:"sim_end"`
		Remediation struct {
			Mode string `json:"mode"`
		} `json:"remediation"`
	}
	if b, err := os.ReadFile(filepath.Join(out, "summary.json")); err != nil || json.Unmarshal(b, &sum) != nil {
		fmt.Fprintf(os.Stderr, "cannot read the demo's summary.json: %v\n", err)
		return 1
	}
	live.start, live.end, live.actionMode = sum.Start, sum.End, sum.Remediation.Mode

	// A real mds on the demo's store, serving the demo's capacity report.
	cfg := filepath.Join(dir, "mds.yml")
	if err := os.WriteFile(cfg, []byte("report:\n  capacity_dir: "+filepath.Join(out, "report")+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mds, addr, err := startMDS(ballast, filepath.Join(out, "data"), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopProcess(mds)
	live.mdsURL = "http://" + addr

	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig: goplugin.HandshakeConfig{
			ProtocolVersion:  grpcplugin.ProtocolVersion,
			MagicCookieKey:   grpcplugin.MagicCookieKey,
			MagicCookieValue: grpcplugin.MagicCookieValue,
		},
		VersionedPlugins: map[int]goplugin.PluginSet{grpcplugin.ProtocolVersion: {
			"diagnostics": &grpcplugin.DiagnosticsGRPCPlugin{},
			"resource":    &grpcplugin.ResourceGRPCPlugin{},
			"data":        &grpcplugin.DataGRPCPlugin{},
		}},
		Cmd:              exec.Command(exe),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Error}),
	})
	defer client.Kill()
	rpc, err := client.Client()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot start the plugin over go-plugin: %v\n", err)
		return 1
	}
	for name, dst := range map[string]any{"data": &live.data, "diagnostics": &live.diag, "resource": &live.resource} {
		raw, err := rpc.Dispense(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "the plugin does not serve %s: %v\n", name, err)
			return 1
		}
		switch d := dst.(type) {
		case *grpcplugin.DataClient:
			*d = raw.(grpcplugin.DataClient)
		case *grpcplugin.DiagnosticsClient:
			*d = raw.(grpcplugin.DiagnosticsClient)
		case *grpcplugin.ResourceClient:
			*d = raw.(grpcplugin.ResourceClient)
		}
	}
	return m.Run()
}

var listenRe = regexp.MustCompile(`msg="mds started" listen=(\S+)`)

// startMDS runs `ballast mds` on a free loopback port and returns once it
// reports its address.
func startMDS(bin, dataDir, cfg string) (*exec.Cmd, string, error) {
	cmd := exec.Command(bin, "mds", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--config", cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	addr := make(chan string, 1)
	var logs strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if m := listenRe.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return cmd, a, nil
	case <-time.After(60 * time.Second):
		stopProcess(cmd)
		return nil, "", fmt.Errorf("ballast mds did not start within 60 s:\n%s", logs.String())
	}
}

// stopProcess ends a process this test started: SIGTERM, then SIGKILL.
func stopProcess(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// pluginContext is what Grafana sends with every call for a data source
// configured with url and token.
func pluginContext(id int64, url, token string) backend.PluginContext {
	secure := map[string]string{}
	if token != "" {
		secure["token"] = token
	}
	return backend.PluginContext{
		PluginID: plugin.ID,
		DataSourceInstanceSettings: &backend.DataSourceInstanceSettings{
			ID: id, UID: fmt.Sprintf("ballast-%d", id), Name: "ballast", URL: url, JSONData: []byte(`{}`),
			DecryptedSecureJSONData: secure, Updated: time.Unix(1, 0),
		},
	}
}

// queryData sends queries over gRPC and decodes the frames.
func queryData(t *testing.T, pc backend.PluginContext, qs ...backend.DataQuery) *backend.QueryDataResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := live.data.QueryData(ctx, backend.ToProto().QueryDataRequest(&backend.QueryDataRequest{PluginContext: pc, Queries: qs}))
	if err != nil {
		t.Fatalf("QueryData over gRPC: %v", err)
	}
	out, err := backend.FromProto().QueryDataResponse(resp)
	if err != nil {
		t.Fatalf("cannot decode the QueryData response: %v", err)
	}
	return out
}

func demoQuery(refID, queryType, jsonBody string) backend.DataQuery {
	return backend.DataQuery{
		RefID: refID, QueryType: queryType, JSON: []byte(jsonBody),
		TimeRange: backend.TimeRange{From: live.start, To: live.end}, Interval: time.Minute, MaxDataPoints: 500,
	}
}

func callResource(t *testing.T, pc backend.PluginContext, method, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := live.resource.CallResource(ctx, &pluginv2.CallResourceRequest{
		PluginContext: backend.ToProto().PluginContext(pc), Path: path, Method: method, Url: path,
	})
	if err != nil {
		t.Fatalf("CallResource %s %s: %v", method, path, err)
	}
	var code int
	var body strings.Builder
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("CallResource %s %s: %v", method, path, err)
		}
		if r.Code != 0 {
			code = int(r.Code)
		}
		body.Write(r.Body)
	}
	return code, body.String()
}

func checkHealth(t *testing.T, pc backend.PluginContext) *pluginv2.CheckHealthResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := live.diag.CheckHealth(ctx, &pluginv2.CheckHealthRequest{PluginContext: backend.ToProto().PluginContext(pc)})
	if err != nil {
		t.Fatalf("CheckHealth over gRPC: %v", err)
	}
	return r
}

// mdsAnswers reports the HTTP status of GET path on the mds.
func mdsAnswers(t *testing.T, path string) int {
	t.Helper()
	resp, err := http.Get(live.mdsURL + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
