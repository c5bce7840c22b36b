package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ballast-io/ballast/analyzer/capacity"
	"github.com/ballast-io/ballast/models"
)

// maxBody bounds what the plugin reads from one mds response.
const maxBody = 64 << 20

// client reads a ballast mds over its HTTP API: the findings and actions
// APIs, the Prometheus query API and the capacity report.
type client struct {
	base  *url.URL
	token string // bearer token; never logged nor put in an error
	http  *http.Client
}

// StatusError is a non-2xx answer of the mds.
type StatusError struct {
	Path   string
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("the ballast mds answered %s with HTTP %d: %s", e.Path, e.Status, e.Body)
}

func newClient(rawURL, token string, hc *http.Client) (*client, error) {
	if strings.TrimSpace(rawURL) == "" {
		return nil, errors.New("no URL: set the URL of the ballast mds, e.g. http://mds:9750")
	}
	u, err := url.Parse(strings.TrimRight(rawURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("URL %q is not an http:// or https:// address of a ballast mds", redact(rawURL))
	}
	return &client{base: u, token: token, http: hc}, nil
}

// redact hides the password of a URL with user information.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

// do sends one request and returns the body of a 2xx answer.
func (c *client) do(ctx context.Context, method, path string, q url.Values, body io.Reader) ([]byte, error) {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("cannot build the request for %s: %w", path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the ballast mds at %s: %w", c.base.Redacted(), unwrapURLError(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("cannot read the answer of %s: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, &StatusError{Path: path, Status: resp.StatusCode, Body: apiError(b)}
	}
	return b, nil
}

// unwrapURLError drops net/url's "Get "URL": " prefix, which repeats the
// address (and could carry credentials).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// apiError extracts the error of a Prometheus-style error body, or the
// start of any other body.
func apiError(b []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return e.Error
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// envelope is the {"status":"success","data":…} wrapping of the API.
type envelope[T any] struct {
	Status string `json:"status"`
	Data   T      `json:"data"`
}

func getJSON[T any](ctx context.Context, c *client, path string, q url.Values) (T, error) {
	var env envelope[T]
	b, err := c.do(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return env.Data, err
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return env.Data, fmt.Errorf("the answer of %s is not ballast's JSON: %w", path, err)
	}
	if env.Status != "success" {
		return env.Data, fmt.Errorf("the answer of %s has status %q", path, env.Status)
	}
	return env.Data, nil
}

// PipelineStatus is GET /api/v1/status/pipeline.
type PipelineStatus struct {
	Sources   []string `json:"sources"`
	Stages    []string `json:"stages"`
	Actuators []string `json:"actuators"`
}

func (c *client) pipeline(ctx context.Context) (PipelineStatus, error) {
	return getJSON[PipelineStatus](ctx, c, "/api/v1/status/pipeline", nil)
}

// findings reads GET /api/v1/findings with the given filter.
func (c *client) findings(ctx context.Context, kind, subject string, active *bool, since time.Time) ([]models.Finding, error) {
	q := url.Values{}
	if kind != "" {
		q.Set("kind", kind)
	}
	if subject != "" {
		q.Set("subject", subject)
	}
	if active != nil {
		q.Set("active", strconv.FormatBool(*active))
	}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	return getJSON[[]models.Finding](ctx, c, "/api/v1/findings", q)
}

// Action is one action as GET /api/v1/actions returns it: the journaled
// models.Action and, when the mds reports them, what was moved and the
// measured effect.
type Action struct {
	models.Action
	Extra map[string]json.RawMessage `json:"-"`
}

func (c *client) actions(ctx context.Context, q url.Values) ([]Action, error) {
	raw, err := getJSON[[]json.RawMessage](ctx, c, "/api/v1/actions", q)
	if err != nil {
		return nil, err
	}
	out := make([]Action, 0, len(raw))
	for _, r := range raw {
		var a Action
		if err := json.Unmarshal(r, &a.Action); err != nil {
			return nil, fmt.Errorf("an action of /api/v1/actions is not ballast's JSON: %w", err)
		}
		json.Unmarshal(r, &a.Extra)
		out = append(out, a)
	}
	return out, nil
}

// promSeries is one series of a Prometheus range or instant query.
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"` // range: [[t, "v"], …]
	Value  [2]any            `json:"value"`  // instant: [t, "v"]
}

type promData struct {
	ResultType string       `json:"resultType"`
	Result     []promSeries `json:"result"`
}

func (c *client) queryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]promSeries, error) {
	q := url.Values{"query": {expr}, "start": {unixString(start)}, "end": {unixString(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	d, err := getJSON[promData](ctx, c, "/api/v1/query_range", q)
	return d.Result, err
}

func (c *client) query(ctx context.Context, expr string, at time.Time) ([]promSeries, error) {
	d, err := getJSON[promData](ctx, c, "/api/v1/query", url.Values{"query": {expr}, "time": {unixString(at)}})
	return d.Result, err
}

func unixString(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)
}

// sample converts a [t, "v"] pair.
func sample(p [2]any) (time.Time, float64, bool) {
	ts, ok1 := p[0].(float64)
	vs, ok2 := p[1].(string)
	if !ok1 || !ok2 {
		return time.Time{}, 0, false
	}
	v, err := strconv.ParseFloat(vs, 64)
	if err != nil {
		return time.Time{}, 0, false
	}
	return time.UnixMilli(int64(ts * 1000)).UTC(), v, true
}

// Report is the part of the capacity report (report.json, written by
// cluster/report) the plugin shows.
type Report struct {
	GeneratedAt time.Time   `json:"generated_at"`
	Summary     []string    `json:"summary"`
	Pools       []ReportRow `json:"pools"`
	DataServers []ReportRow `json:"data_servers"`
	Cluster     *ReportRow  `json:"cluster"`
	Devices     []ReportRow `json:"devices"`
	Plots       []struct {
		Subject  models.Subject       `json:"subject"`
		Capacity float64              `json:"capacity_bytes"`
		History  []capacity.Point     `json:"history"`
		Forecast []capacity.BandPoint `json:"forecast"`
		Levels   []capacity.Level     `json:"levels"`
	} `json:"plots"`
}

// ReportRow is one subject's forecast in the report.
type ReportRow struct {
	Subject   models.Subject      `json:"subject"`
	Pool      string              `json:"pool"`
	Used      float64             `json:"used_bytes"`
	Capacity  float64             `json:"capacity_bytes"`
	UsedRatio float64             `json:"used_ratio"`
	Growth    float64             `json:"growth_bytes_per_day"`
	Crossings []capacity.Crossing `json:"crossings"`
	Error     string              `json:"error"`
}

func (c *client) report(ctx context.Context) (*Report, error) {
	b, err := c.do(ctx, http.MethodGet, "/api/v1/reports/capacity/report.json", nil, nil)
	if err != nil {
		var se *StatusError
		if errors.As(err, &se) && se.Status == http.StatusNotFound {
			return nil, fmt.Errorf("the mds has no capacity report yet (it writes the first an hour after start, then every report.capacity_every): %w", err)
		}
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("the capacity report is not ballast's report.json: %w", err)
	}
	return &r, nil
}
