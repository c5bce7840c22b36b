package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// format is one push protocol.
type format struct {
	Name    string // "import" or "remote write"
	Path    string
	Headers map[string]string // what a real sender sets
}

var (
	formatImport = format{Name: "import", Path: "/api/v1/import/prometheus", Headers: map[string]string{
		"Content-Type": "text/plain; version=0.0.4",
	}}
	// formatRemoteWrite carries the headers Prometheus' remote-write client
	// sends (storage/remote/client.go).
	formatRemoteWrite = format{Name: "remote write", Path: "/api/v1/write", Headers: map[string]string{
		"Content-Type":                      "application/x-protobuf",
		"Content-Encoding":                  "snappy",
		"X-Prometheus-Remote-Write-Version": "0.1.0",
		"User-Agent":                        "Prometheus/bench",
	}}
)

const requestTimeout = 2 * time.Minute

func newClient(conns int) *http.Client {
	return &http.Client{
		Timeout: requestTimeout,
		Transport: &http.Transport{
			MaxIdleConns:        conns * 2,
			MaxIdleConnsPerHost: conns * 2,
			IdleConnTimeout:     time.Minute,
		},
	}
}

// post sends one body and drains the answer; any status but 204 is an
// error quoting the server's message, a *throttledError for 429.
func post(ctx context.Context, c *http.Client, u string, hdr map[string]string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("cannot POST %s: %w", u, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusNoContent {
		err := fmt.Errorf("POST %s: status %d: %s", u, resp.StatusCode, bytes.TrimSpace(msg))
		if resp.StatusCode == http.StatusTooManyRequests {
			return &throttledError{err: err, retryAfter: retryAfter(resp.Header.Get("Retry-After"))}
		}
		return err
	}
	return nil
}

// throttledError is a 429 answer: the server refused the body for load,
// stored nothing of it, and asks for it again after retryAfter.
type throttledError struct {
	err        error
	retryAfter time.Duration
}

func (e *throttledError) Error() string { return e.err.Error() }

// retryAfter reads a Retry-After header in seconds: 1 s when absent or
// not a number, at most maxRetryAfter.
func retryAfter(h string) time.Duration {
	n, err := strconv.Atoi(h)
	if err != nil || n < 1 {
		return time.Second
	}
	return min(time.Duration(n)*time.Second, maxRetryAfter)
}

const (
	// maxRetryAfter bounds one wait after a 429.
	maxRetryAfter = 10 * time.Second
	// maxThrottled bounds the 429s one body may get before the push fails.
	maxThrottled = 30
)

// pushAll sends every body from `workers` goroutines over keep-alive
// connections and returns the samples acknowledged, the wall time from
// the first send to the last acknowledgement and how many answers were
// 429. A body answered 429 (nothing of it stored) is sent again after the
// server's Retry-After, as Prometheus' remote-write client does, at most
// maxThrottled times; the waits are in the time. Any other error stops
// all workers.
func pushAll(ctx context.Context, c *http.Client, u string, hdr map[string]string, bodies [][]byte, samples []int, workers int) (int, time.Duration, int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next, acked, throttled atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := int(next.Add(1)) - 1
				if k >= len(bodies) {
					return
				}
				err := post(ctx, c, u, hdr, bodies[k])
				var te *throttledError
				for tries := 1; errors.As(err, &te) && tries <= maxThrottled; tries++ {
					throttled.Add(1)
					select {
					case <-ctx.Done():
					case <-time.After(te.retryAfter):
						err = post(ctx, c, u, hdr, bodies[k])
					}
				}
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("body %d: %w", k, err); cancel() })
					return
				}
				acked.Add(int64(samples[k]))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return int(acked.Load()), elapsed, int(throttled.Load()), firstErr
}

// throttledNote says how many bodies were answered 429 and sent again.
func throttledNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("429 answers: %d (overloaded: nothing stored, Retry-After); those bodies were sent again, as Prometheus does, and the waits are in the time", n)
}

// promResponse is the Prometheus HTTP API envelope.
type promResponse struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
			Values [][]any           `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

// apiGet runs a GET against the Prometheus API and decodes the envelope.
func apiGet(ctx context.Context, c *http.Client, base, path string, args url.Values) (*promResponse, error) {
	u := base + path + "?" + args.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	var pr promResponse
	if err := json.NewDecoder(resp.Body).Decode(&pr); err != nil {
		return nil, fmt.Errorf("cannot decode answer of %s (status %d): %w", u, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK || pr.Status != "success" {
		return nil, fmt.Errorf("GET %s: status %d: %s", u, resp.StatusCode, pr.Error)
	}
	return &pr, nil
}

// countShard returns how many samples of d's shard the server holds, with
// one instant count_over_time query over the dataset's whole range.
func countShard(ctx context.Context, c *http.Client, base string, d *dataset, shard int) (int64, error) {
	window := time.Duration(d.Points) * d.Step
	q := fmt.Sprintf(`sum(count_over_time(%s{shard="%03d"}[%ds]))`, d.Metric, shard, int64(window/time.Second))
	pr, err := apiGet(ctx, c, base, "/api/v1/query", url.Values{
		"query":   {q},
		"time":    {strconv.FormatInt(d.Last()/1000, 10)},
		"nocache": {"1"},
	})
	if err != nil {
		return 0, err
	}
	if len(pr.Data.Result) == 0 {
		return 0, nil
	}
	v := pr.Data.Result[0].Value
	if len(v) != 2 {
		return 0, fmt.Errorf("query %s: malformed value %v", q, v)
	}
	s, _ := v[1].(string)
	n, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("query %s: value %q is not a number", q, s)
	}
	return int64(n), nil
}

// storedQuiet is how long waitStored waits before its first query. Rows
// become searchable 2–4 s after they are acknowledged; a query for new
// series issued before that caches the empty answer and keeps them hidden
// for about 10 s more (measured on VictoriaMetrics single-node and ballast
// alike), so polling at once would measure the cache, not the store.
const storedQuiet = 4 * time.Second

// waitStored counts d's samples on the server shard by shard, after
// storedQuiet, polling each shard until it holds all its samples or the
// deadline passes, and returns the total found.
func waitStored(ctx context.Context, c *http.Client, base string, d *dataset, timeout time.Duration) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(storedQuiet):
	}
	var total int64
	for shard := range d.Shards() {
		want := int64(min(shardSeries, d.Series-shard*shardSeries) * d.Points)
		var n int64
		for {
			var err error
			n, err = countShard(ctx, c, base, d, shard)
			if err != nil && ctx.Err() == nil {
				return total, err
			}
			if n >= want || ctx.Err() != nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
		total += n
		if ctx.Err() != nil {
			// Count the rest once, without waiting, so the report shows
			// how much was missing.
			for s2 := shard + 1; s2 < d.Shards(); s2++ {
				n, _ := countShard(context.Background(), c, base, d, s2)
				total += n
			}
			return total, nil
		}
	}
	return total, nil
}

// latency is a set of timed requests.
type latency struct {
	Samples []time.Duration
	Series  int // series in the answer
	Points  int // points in the answer
	Bytes   int // answer size
}

// Median and P99 use the nearest-rank method.
func (l *latency) Median() time.Duration { return percentile(l.Samples, 50) }
func (l *latency) P99() time.Duration    { return percentile(l.Samples, 99) }

// percentile returns the nearest-rank p-th percentile of ds (0 if empty).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(float64(len(s))*p/100 + 0.999999)
	rank = max(1, min(rank, len(s)))
	return s[rank-1]
}

// timeQueryRange checks the answer of one query_range once, then times up
// to n requests (bounded by budget), each until the body is fully read.
// nocache=1 bypasses the rollup result cache, so every request evaluates.
func timeQueryRange(ctx context.Context, c *http.Client, base, q string, start, end int64, n int, budget time.Duration) (*latency, error) {
	args := url.Values{
		"query":   {q},
		"start":   {strconv.FormatInt(start, 10)},
		"end":     {strconv.FormatInt(end, 10)},
		"step":    {"1s"},
		"nocache": {"1"},
	}
	pr, err := apiGet(ctx, c, base, "/api/v1/query_range", args)
	if err != nil {
		return nil, err
	}
	l := &latency{Series: len(pr.Data.Result)}
	for _, r := range pr.Data.Result {
		l.Points += len(r.Values)
	}
	u := base + "/api/v1/query_range?" + args.Encode()
	deadline := time.Now().Add(budget)
	for i := 0; i < n+2 && time.Now().Before(deadline); i++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		t := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			return nil, fmt.Errorf("cannot GET %s: %w", u, err)
		}
		nb, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(t)
		if err != nil {
			return nil, fmt.Errorf("cannot read answer of %s: %w", u, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
		}
		if i < 2 {
			continue // warm-up: connection, page cache
		}
		l.Bytes = int(nb)
		l.Samples = append(l.Samples, d)
	}
	if len(l.Samples) == 0 {
		return nil, errors.New("no request finished within the time budget")
	}
	return l, nil
}
