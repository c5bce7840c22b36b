package plugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"gopkg.in/yaml.v3"

	"github.com/ballast-io/ballast/grafana/pkg/plugin"
	"github.com/ballast-io/ballast/models"
)

// dashboard is the part of a dashboard's JSON the tests read.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name     string          `json:"name"`
			Type     string          `json:"type"`
			Query    json.RawMessage `json:"query"`
			AllValue string          `json:"allValue"`
			Current  struct {
				Value any `json:"value"`
			} `json:"current"`
		} `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []struct {
			Name       string          `json:"name"`
			Datasource dsRef           `json:"datasource"`
			Target     json.RawMessage `json:"target"`
		} `json:"list"`
	} `json:"annotations"`
	Panels []panel `json:"panels"`
}

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int               `json:"id"`
	Type       string            `json:"type"`
	Title      string            `json:"title"`
	Datasource dsRef             `json:"datasource"`
	Interval   string            `json:"interval"`
	Targets    []json.RawMessage `json:"targets"`
	Panels     []panel           `json:"panels"` // collapsed rows
}

type promTarget struct {
	RefID      string `json:"refId"`
	Datasource dsRef  `json:"datasource"`
	Expr       string `json:"expr"`
	Instant    bool   `json:"instant"`
}

func loadDashboards(t *testing.T) []dashboard {
	t.Helper()
	files, err := filepath.Glob("../../dashboards/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in grafana/dashboards: %v", err)
	}
	var out []dashboard
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if want := strings.TrimSuffix(filepath.Base(f), ".json"); d.UID != want {
			t.Errorf("%s: uid %q; want the file's name %q", f, d.UID, want)
		}
		out = append(out, d)
	}
	return out
}

// TestDashboardUIDsAreTheDocumentedOnes checks the dashboards are exactly
// those models.Dashboard* names (alerts and the console link to them).
func TestDashboardUIDsAreTheDocumentedOnes(t *testing.T) {
	want := []string{models.DashboardOverview, models.DashboardDataServers, models.DashboardStripes, models.DashboardCheckpoints,
		models.DashboardNFSClients, models.DashboardCapacity, models.DashboardActions, models.DashboardSelf}
	var got []string
	for _, d := range loadDashboards(t) {
		got = append(got, d.UID)
	}
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("dashboards: got %v; want %v", got, want)
	}
}

// TestProvisioning checks the provisioning files name the data sources the
// dashboards default to and a folder provider for the dashboards.
func TestProvisioning(t *testing.T) {
	var dss struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, URL string
		} `yaml:"datasources"`
	}
	readYAML(t, "../../provisioning/datasources/ballast.yaml", &dss)
	uids := map[string]string{}
	for _, d := range dss.Datasources {
		uids[d.UID] = d.Type
		if d.URL == "" {
			t.Errorf("provisioned data source %s has no url", d.Name)
		}
	}
	for _, d := range loadDashboards(t) {
		for _, v := range d.Templating.List {
			if v.Type != "datasource" {
				continue
			}
			var typ string
			json.Unmarshal(v.Query, &typ)
			if got := uids[fmt.Sprint(v.Current.Value)]; got != typ {
				t.Errorf("%s: variable %s defaults to data source %v, which provisioning does not define as a %s data source", d.UID, v.Name, v.Current.Value, typ)
			}
		}
	}
	if uids["ballast"] != plugin.ID {
		t.Errorf("provisioning: data source uid ballast has type %q; want %s", uids["ballast"], plugin.ID)
	}
	var dbs struct {
		Providers []struct {
			Name, Type, Folder string
			Options            struct{ Path string } `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "../../provisioning/dashboards/ballast.yaml", &dbs)
	if len(dbs.Providers) != 1 || dbs.Providers[0].Type != "file" || dbs.Providers[0].Options.Path == "" {
		t.Errorf("dashboard provisioning: got %+v; want one file provider with a path", dbs.Providers)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(false)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// interpolate replaces the dashboard variables and Grafana's built-in
// interval variables the way Grafana would with every variable at "All".
func interpolate(s string, d dashboard, interval time.Duration) string {
	rng := live.end.Sub(live.start)
	r := strings.NewReplacer(
		"$__rate_interval", "1m",
		"$__interval", fmt.Sprintf("%ds", int(interval.Seconds())),
		"$__range", fmt.Sprintf("%ds", int(rng.Seconds())),
	)
	s = r.Replace(s)
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			all := v.AllValue
			if all == "" {
				all = ".*"
			}
			s = strings.ReplaceAll(s, "${"+v.Name+"}", all)
			s = strings.ReplaceAll(s, "$"+v.Name, all)
		}
	}
	return s
}

// TestEveryDashboardPanelReturnsData runs every panel's queries (PromQL on
// the mds's query API, plugin queries through the plugin over gRPC) and
// every annotation query over the demo's time range, with every variable
// at "All", and fails any that returns nothing.
func TestEveryDashboardPanelReturnsData(t *testing.T) {
	hasActions := mdsAnswers(t, "/api/v1/actions") != http.StatusNotFound
	pc := pluginContext(1, live.mdsURL, "")
	var checked, skipped int
	for _, d := range loadDashboards(t) {
		// Variables first: a query variable must offer values (cluster
		// may be unset, then "All" stands for every series).
		for _, v := range d.Templating.List {
			if v.Type != "query" || v.Name == "cluster" {
				continue
			}
			var q struct{ Query string }
			json.Unmarshal(v.Query, &q)
			if vals := labelValues(t, interpolate(q.Query, d, time.Minute)); len(vals) == 0 {
				t.Errorf("%s: variable %s (%s) has no values", d.UID, v.Name, q.Query)
			}
		}
		var panels []panel
		for _, p := range d.Panels {
			panels = append(panels, p)
			panels = append(panels, p.Panels...)
		}
		for _, p := range panels {
			if p.Type == "row" {
				continue
			}
			interval := time.Minute
			if p.Interval != "" {
				if iv, err := time.ParseDuration(p.Interval); err == nil {
					interval = iv
				}
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s / %s: panel has no queries", d.UID, p.Title)
			}
			for _, raw := range p.Targets {
				name := fmt.Sprintf("%s / %s", d.UID, p.Title)
				ok, skip := runTarget(t, name, d, p.Datasource, raw, interval, pc, hasActions)
				switch {
				case skip:
					skipped++
				case ok:
					checked++
				}
			}
		}
		for _, a := range d.Annotations.List {
			if len(a.Target) == 0 {
				continue // Grafana's built-in annotations
			}
			ok, skip := runTarget(t, d.UID+" / annotation "+a.Name, d, a.Datasource, a.Target, time.Minute, pc, hasActions)
			if ok && !skip {
				checked++
			}
		}
	}
	t.Logf("%d panel and annotation queries returned data; %d skipped (no actions API on this mds)", checked, skipped)
}

// runTarget runs one query and reports whether it returned data, or that
// it was skipped.
func runTarget(t *testing.T, name string, d dashboard, panelDS dsRef, raw json.RawMessage, interval time.Duration, pc backend.PluginContext, hasActions bool) (ok, skipped bool) {
	t.Helper()
	var base promTarget
	if err := json.Unmarshal(raw, &base); err != nil {
		t.Errorf("%s: bad target: %v", name, err)
		return false, false
	}
	ds := base.Datasource
	if ds.Type == "" {
		ds = panelDS
	}
	switch ds.Type {
	case "prometheus":
		expr := interpolate(base.Expr, d, interval)
		n, err := promPoints(expr, base.Instant, interval)
		if err != nil {
			t.Errorf("%s [%s]: %s: %v", name, base.RefID, expr, err)
			return false, false
		}
		if n == 0 {
			t.Errorf("%s [%s]: %s returned no data over the demo's range", name, base.RefID, expr)
			return false, false
		}
		return true, false
	case plugin.ID:
		var q map[string]any
		json.Unmarshal(raw, &q)
		if q["queryType"] == "actions" && !hasActions {
			t.Logf("%s [%s]: skipped: this mds has no actions API yet", name, base.RefID)
			return false, true
		}
		for k, v := range q {
			if s, isStr := v.(string); isStr {
				q[k] = interpolate(s, d, interval)
			}
		}
		body, _ := json.Marshal(q)
		qt, _ := q["queryType"].(string)
		dq := demoQuery("A", qt, string(body))
		dq.Interval = interval
		r := queryData(t, pc, dq).Responses["A"]
		if r.Error != nil {
			t.Errorf("%s [%s]: %s: %v", name, base.RefID, body, r.Error)
			return false, false
		}
		rows := 0
		for _, f := range r.Frames {
			n, _ := f.RowLen()
			rows += n
		}
		if q["queryType"] == "actions" && q["state"] == "awaiting_approval" && live.actionMode == "auto" {
			// the demo acts in auto mode: its approval queue must be empty
			if rows != 0 {
				t.Errorf("%s [%s]: plugin query %s returned %d rows; in auto mode nothing waits for approval", name, base.RefID, body, rows)
				return false, false
			}
			return true, false
		}
		if rows == 0 {
			t.Errorf("%s [%s]: plugin query %s returned no rows", name, base.RefID, body)
			return false, false
		}
		return true, false
	}
	t.Errorf("%s [%s]: data source type %q is neither prometheus nor %s", name, base.RefID, ds.Type, plugin.ID)
	return false, false
}

// promPoints runs expr over the demo's range (or at its end) on the mds
// and counts the finite points.
func promPoints(expr string, instant bool, step time.Duration) (int, error) {
	v := url.Values{"query": {expr}}
	path := "/api/v1/query_range"
	if instant {
		path = "/api/v1/query"
		v.Set("time", strconv.FormatInt(live.end.Unix(), 10))
	} else {
		v.Set("start", strconv.FormatInt(live.start.Unix(), 10))
		v.Set("end", strconv.FormatInt(live.end.Unix(), 10))
		v.Set("step", strconv.Itoa(int(max(step, 15*time.Second).Seconds())))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, live.mdsURL+path, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Values [][2]any `json:"values"`
				Value  [2]any   `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("HTTP %d: %s", resp.StatusCode, body.Error)
	}
	n := 0
	finite := func(p [2]any) bool {
		s, _ := p[1].(string)
		f, err := strconv.ParseFloat(s, 64)
		return err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	for _, r := range body.Data.Result {
		if instant && finite(r.Value) {
			n++
		}
		for _, p := range r.Values {
			if finite(p) {
				n++
			}
		}
	}
	return n, nil
}

// labelValues answers a variable's label_values(selector, label) query
// the way Grafana's Prometheus data source does, with the series API.
func labelValues(t *testing.T, q string) []string {
	t.Helper()
	q = strings.TrimSpace(q)
	if !strings.HasPrefix(q, "label_values(") || !strings.HasSuffix(q, ")") {
		t.Fatalf("variable query %q is not label_values(…)", q)
	}
	inner := strings.TrimSuffix(strings.TrimPrefix(q, "label_values("), ")")
	i := strings.LastIndex(inner, ",")
	sel, label := strings.TrimSpace(inner[:i]), strings.TrimSpace(inner[i+1:])
	v := url.Values{"match[]": {sel}, "start": {strconv.FormatInt(live.start.Unix(), 10)}, "end": {strconv.FormatInt(live.end.Unix(), 10)}}
	resp, err := http.Get(live.mdsURL + "/api/v1/label/" + label + "/values?" + v.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []string `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	return body.Data
}
