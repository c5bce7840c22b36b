package remote

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fastjson"

	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

type urlValues = url.Values

// maxResponseBytes bounds a query answer read into memory.
const maxResponseBytes = 256 << 20

// Query evaluates expr at one instant on the remote.
func (s *Store) Query(ctx context.Context, expr string, at time.Time) ([]storage.Series, error) {
	return s.query(ctx, "/api/v1/query", expr, func(f url.Values) {
		f.Set("time", formatTime(at))
	})
}

// QueryRange evaluates expr at every step from start to end inclusive.
func (s *Store) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]storage.Series, error) {
	if step <= 0 {
		return nil, fmt.Errorf("cannot run query %q: step %s is not positive", expr, step)
	}
	if end.Before(start) {
		return nil, fmt.Errorf("cannot run query %q: end %s is before start %s", expr, end, start)
	}
	return s.query(ctx, "/api/v1/query_range", expr, func(f url.Values) {
		f.Set("start", formatTime(start))
		f.Set("end", formatTime(end))
		f.Set("step", strconv.FormatFloat(step.Seconds(), 'f', -1, 64))
	})
}

// query posts a form to the Prometheus API and decodes the result.
func (s *Store) query(ctx context.Context, path, expr string, args func(url.Values)) ([]storage.Series, error) {
	f := url.Values{"query": {expr}}
	if !s.opts.QueryCache {
		f.Set("nocache", "1")
	}
	if s.opts.LatencyOffset != 0 {
		// VictoriaMetrics accepts 1ms at the least; it ignores the
		// offset anyway when nocache=1.
		f.Set("latency_offset", max(s.opts.LatencyOffset, time.Millisecond).String())
	}
	args(f)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.queryRoot+path, strings.NewReader(f.Encode()))
	if err != nil {
		return nil, fmt.Errorf("cannot run query %q: %w", expr, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", s.opts.UserAgent)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot run query %q on %s: %w", expr, redact(s.queryRoot), unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot run query %q: reading the answer: %w", expr, err)
	}
	if len(body) > maxResponseBytes {
		return nil, fmt.Errorf("cannot run query %q: the answer is over %d bytes", expr, maxResponseBytes)
	}
	out, err := parseQueryResponse(body)
	if err != nil {
		return nil, fmt.Errorf("cannot run query %q (HTTP %d): %w", expr, resp.StatusCode, err)
	}
	return out, nil
}

// parseQueryResponse decodes a Prometheus API query answer (vector, matrix
// or scalar) into series with labels sorted by name.
func parseQueryResponse(body []byte) ([]storage.Series, error) {
	var p fastjson.Parser
	v, err := p.ParseBytes(body)
	if err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %.200q", body)
	}
	if st := string(v.GetStringBytes("status")); st != "success" {
		return nil, fmt.Errorf("%s: %s", v.GetStringBytes("errorType"), v.GetStringBytes("error"))
	}
	data := v.Get("data")
	switch rt := string(data.GetStringBytes("resultType")); rt {
	case "scalar":
		ts, val, err := parsePoint(data.Get("result"))
		if err != nil {
			return nil, err
		}
		return []storage.Series{{Timestamps: []int64{ts}, Values: []float64{val}}}, nil
	case "vector", "matrix":
		items := data.GetArray("result")
		out := make([]storage.Series, 0, len(items))
		for _, it := range items {
			var s storage.Series
			it.GetObject("metric").Visit(func(k []byte, lv *fastjson.Value) {
				if string(k) == "__name__" {
					s.Name = string(lv.GetStringBytes())
					return
				}
				s.Labels = append(s.Labels, models.Label{Name: string(k), Value: string(lv.GetStringBytes())})
			})
			sort.Slice(s.Labels, func(i, j int) bool { return s.Labels[i].Name < s.Labels[j].Name })
			points := it.GetArray("values")
			if rt == "vector" {
				points = []*fastjson.Value{it.Get("value")}
			}
			s.Timestamps = make([]int64, 0, len(points))
			s.Values = make([]float64, 0, len(points))
			for _, pt := range points {
				ts, val, err := parsePoint(pt)
				if err != nil {
					return nil, err
				}
				s.Timestamps = append(s.Timestamps, ts)
				s.Values = append(s.Values, val)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("result type %q is not vector, matrix or scalar", rt)
	}
}

// parsePoint decodes [seconds, "value"].
func parsePoint(v *fastjson.Value) (int64, float64, error) {
	if v == nil {
		// A scalar without a result, a vector item without a value
		// (found by FuzzParseQueryResponse, kept in testdata/fuzz).
		return 0, 0, fmt.Errorf("a point is missing from the answer")
	}
	a, err := v.Array()
	if err != nil || len(a) != 2 {
		return 0, 0, fmt.Errorf("a point is not [time, \"value\"]: %s", v)
	}
	sec, err := a[0].Float64()
	if err != nil {
		return 0, 0, fmt.Errorf("a point's time is not a number: %s", v)
	}
	val, err := strconv.ParseFloat(string(a[1].GetStringBytes()), 64)
	if err != nil {
		return 0, 0, fmt.Errorf("a point's value is not a number: %s", v)
	}
	return int64(math.Round(sec * 1e3)), val, nil
}

// QueryHandler proxies the Prometheus HTTP API to the remote's query root
// (with the remote's credentials, never the caller's), so Grafana and other
// clients keep ballast's one URL. Error answers take Prometheus' shape.
func (s *Store) QueryHandler() http.Handler {
	target, _ := url.Parse(s.queryRoot) // validated in Open
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
		},
		Transport: s.client.Transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			storage.WriteAPIError(w, http.StatusServiceUnavailable, fmt.Errorf("cannot reach the remote query API %s: %w", redact(s.queryRoot), unwrapURLError(err)))
		},
	}
	return storage.PrometheusErrors(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the request body before proxying: net/http may close an
		// inbound body once the response headers are out, and a transport
		// still finishing the upstream request body then closes the
		// upstream connection in the middle of the answer.
		if r.Body != nil && r.ContentLength != 0 {
			b, err := io.ReadAll(io.LimitReader(r.Body, maxProxyBody+1))
			if err != nil {
				storage.WriteAPIError(w, http.StatusBadRequest, fmt.Errorf("cannot read the request body: %w", err))
				return
			}
			if len(b) > maxProxyBody {
				storage.WriteAPIError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("request body over %d bytes", maxProxyBody))
				return
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}
		rp.ServeHTTP(w, r)
	}))
}

// maxProxyBody bounds a query request body the proxy forwards.
const maxProxyBody = 8 << 20
