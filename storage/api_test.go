package storage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

func postText(t *testing.T, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(testURL+PathImportPrometheus, "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := new(strings.Builder)
	_, _ = fmt.Fprint(b, readAll(resp))
	return resp.StatusCode, b.String()
}

func TestClientGolangAgainstQueryAPI(t *testing.T) {
	end := time.Now().Truncate(time.Second).Add(-time.Minute)
	start := end.Add(-10 * time.Minute)
	var sb strings.Builder
	for ts := start; !ts.After(end); ts = ts.Add(10 * time.Second) {
		for d := 0; d < 3; d++ {
			fmt.Fprintf(&sb, "capi_disk_read_bytes_total{ds=\"ds%02d\",device=\"nvme%dn1\"} %d %d\n", d, d, int(ts.Sub(start).Seconds())*(d+1)*1000, ts.UnixMilli())
		}
	}
	if code, body := postText(t, sb.String()); code != http.StatusNoContent {
		t.Fatalf("import: got %d %s; want 204", code, body)
	}
	c, err := api.NewClient(api.Config{Address: testURL})
	if err != nil {
		t.Fatal(err)
	}
	v1 := promv1.NewAPI(c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	waitFor(t, "imported series", func() (bool, error) {
		v, _, err := v1.Query(ctx, `count(capi_disk_read_bytes_total)`, end)
		if err != nil {
			return false, err
		}
		vec, ok := v.(model.Vector)
		return ok && len(vec) == 1 && vec[0].Value == 3, fmt.Errorf("got %v", v)
	})

	// query_range with a step: rate over 1m of a counter growing 1000*(d+1)/s.
	r := promv1.Range{Start: start.Add(2 * time.Minute), End: end, Step: 30 * time.Second}
	v, _, err := v1.QueryRange(ctx, `rate(capi_disk_read_bytes_total{ds="ds01"}[1m])`, r)
	if err != nil {
		t.Fatalf("query_range: %v", err)
	}
	m, ok := v.(model.Matrix)
	if !ok || len(m) != 1 {
		t.Fatalf("query_range: got %v; want one series", v)
	}
	wantPoints := int(r.End.Sub(r.Start)/r.Step) + 1
	if len(m[0].Values) != wantPoints {
		t.Errorf("query_range: got %d points; want %d", len(m[0].Values), wantPoints)
	}
	for _, p := range m[0].Values {
		if p.Value != 2000 {
			t.Errorf("rate at %v: got %v; want 2000", p.Timestamp, p.Value)
		}
	}

	// series with matchers
	series, _, err := v1.Series(ctx, []string{`capi_disk_read_bytes_total{device=~"nvme[01]n1"}`}, start, end)
	if err != nil {
		t.Fatalf("series: %v", err)
	}
	if len(series) != 2 {
		t.Errorf("series: got %v; want 2 series", series)
	}
	// labels and label values
	names, _, err := v1.LabelNames(ctx, []string{"capi_disk_read_bytes_total"}, start, end)
	if err != nil {
		t.Fatalf("labels: %v", err)
	}
	if names.String() != "__name__, device, ds" {
		t.Errorf("labels: got %v; want [__name__ device ds]", names)
	}
	vals, _, err := v1.LabelValues(ctx, "ds", []string{"capi_disk_read_bytes_total"}, start, end)
	if err != nil {
		t.Fatalf("label values: %v", err)
	}
	if fmt.Sprint(vals) != "[ds00 ds01 ds02]" {
		t.Errorf("label values: got %v; want [ds00 ds01 ds02]", vals)
	}

	// bad PromQL gives a Prometheus-shaped error the client understands.
	_, _, err = v1.Query(ctx, `rate(capi_disk_read_bytes_total[1m]`, end)
	var perr *promv1.Error
	if !errors.As(err, &perr) {
		t.Fatalf("bad query: got %v; want *v1.Error", err)
	}
	if perr.Type != promv1.ErrBadData || !strings.Contains(perr.Msg, "rate(") {
		t.Errorf("bad query: got type %q msg %q; want bad_data naming the query", perr.Type, perr.Msg)
	}
}
