package layoutstats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

var update = flag.Bool("update", false, "rewrite golden files")

// store is an Appender that keeps samples and can be told to fail.
type store struct {
	samples []models.Sample
	fail    error
	calls   int
}

func (s *store) Append(_ context.Context, ss []models.Sample) error {
	s.calls++
	if s.fail != nil {
		return s.fail
	}
	s.samples = append(s.samples, ss...)
	return nil
}

// sink is a StripeSink that keeps deltas.
type sink struct{ deltas []models.StripeDelta }

func (s *sink) ObserveStripes(d []models.StripeDelta) { s.deltas = append(s.deltas, d...) }

type rig struct {
	in  *Ingester
	st  *store
	sk  *sink
	srv *httptest.Server
	now time.Time
}

func newRig(t *testing.T, opts HandlerOptions) *rig {
	t.Helper()
	return newRigWith(t, Options{}, opts)
}

func newRigWith(t *testing.T, o Options, opts HandlerOptions) *rig {
	t.Helper()
	r := &rig{in: newIngester(t, o), st: &store{}, sk: &sink{}, now: t0.Add(time.Minute)}
	opts.Now = func() time.Time { return r.now }
	r.srv = httptest.NewServer(NewHandler(NewService(r.in, r.st, r.sk), opts))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *rig) post(t *testing.T, body []byte) (int, response) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.srv.URL+Path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out response
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("cannot decode response: %v", err)
	}
	return resp.StatusCode, out
}

func readExample(t testing.TB) []byte {
	t.Helper()
	return readTestdata(t, "batch.json")
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var pathPart = regexp.MustCompile(`^([a-z_]+)(?:\[(\d+)\])?$`)

// mutate returns the example batch with the value at each dotted path
// (with [i] indices) replaced by raw JSON, or deleted when raw is "";
// pairs alternate path, raw.
func mutate(t *testing.T, pairs ...string) []byte {
	t.Helper()
	return mutateBody(t, readExample(t), pairs...)
}

// mutateBody is mutate on another batch.
func mutateBody(t *testing.T, body []byte, pairs ...string) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		set(t, root, pairs[i], pairs[i+1])
	}
	out, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func set(t *testing.T, root any, path, raw string) {
	t.Helper()
	parts := strings.Split(path, ".")
	cur := root
	for i, p := range parts {
		m := pathPart.FindStringSubmatch(p)
		if m == nil {
			t.Fatalf("bad path %q", path)
		}
		obj := cur.(map[string]any)
		last := i == len(parts)-1
		if m[2] == "" && last {
			if raw == "" {
				delete(obj, m[1])
			} else {
				obj[m[1]] = json.RawMessage(raw)
			}
			break
		}
		cur = obj[m[1]]
		if m[2] != "" {
			idx, _ := strconv.Atoi(m[2])
			arr := cur.([]any)
			if last {
				arr[idx] = json.RawMessage(raw)
				break
			}
			cur = arr[idx]
		}
	}
}

func TestHandlerRejectsMalformed(t *testing.T) {
	r0 := "reports[0]."
	lu := r0 + "ffis_layoutupdate."
	cases := []struct {
		name  string
		body  []byte
		field string // want this field path
		msg   string // and this in the message
	}{
		{"empty body", []byte("  "), "body", "is empty"},
		{"truncated JSON", readExample(t)[:200], "body", "unexpected end"},
		{"not an object", []byte(`[1,2]`), "body", "cannot use JSON array"},
		{"trailing data", append(readExample(t), []byte(" {}")...), "body", "trailing data"},
		{"unknown top field", mutate(t, "client", `"x"`), "client", "unknown field"},
		{"unknown report field", mutate(t, "reports[1].fio_offset", `1`), "reports[1].fio_offset", "unknown field"},
		{"negative offset", mutate(t, r0+"ffis_offset", `-1`), r0 + "ffis_offset", "cannot use JSON number -1 as uint64"},
		{"counter beyond 64 bits", mutate(t, "reports[1].ffis_write.ii_bytes", `18446744073709551616`), "reports[1].ffis_write.ii_bytes", "uint64"},
		{"string for a number", mutate(t, lu+"ffl_read.ffil_ops_completed", `"12"`), lu + "ffl_read.ffil_ops_completed", "cannot use JSON string"},
		{"completed exceeds requested", mutate(t, lu+"ffl_read.ffil_ops_completed", `12817`), lu + "ffl_read.ffil_ops_completed", "completed (12817) exceeds requested (12816)"},
		{"not delivered too large", mutate(t, lu+"ffl_write.ffil_bytes_not_delivered", `4194305`), lu + "ffl_write.ffil_bytes_not_delivered", "exceeds requested"},
		{"bad deviceid hex", mutate(t, r0+"ffis_deviceid", `"a1b2c3d400000000000000000000000z"`), r0 + "ffis_deviceid", "non-hex character 'z'"},
		{"short stateid", mutate(t, r0+"ffis_stateid.other", `"5f1e0a"`), r0 + "ffis_stateid.other", "want exactly 12"},
		{"empty file handle", mutate(t, lu+"ffl_fhandle", `""`), lu + "ffl_fhandle", "must not be empty"},
		{"bad universal address", mutate(t, lu+"ffl_addr.na_r_addr", `"192.0.2.21:2049"`), lu + "ffl_addr", "not a universal address"},
		{"port octet out of range", mutate(t, lu+"ffl_addr.na_r_addr", `"192.0.2.21.8.256"`), lu + "ffl_addr", "port octets"},
		{"netid and family disagree", mutate(t, lu+"ffl_addr.na_r_netid", `"tcp6"`), lu + "ffl_addr", "not an IPv6 address"},
		{"unknown netid", mutate(t, lu+"ffl_addr.na_r_netid", `"carrier-pigeon"`), lu + "ffl_addr", "is not one of"},
		{"nseconds too large", mutate(t, lu+"ffl_duration.nseconds", `1000000000`), lu + "ffl_duration.nseconds", "not below 1000000000"},
		{"missing duration", mutate(t, lu+"ffl_duration", ""), lu + "ffl_duration", "must be positive"},
		{"negative busy time", mutate(t, lu+"ffl_read.ffil_total_busy_time.seconds", `-3`), lu + "ffl_read.ffil_total_busy_time.seconds", "negative"},
		{"busy longer than duration", mutate(t, lu+"ffl_read.ffil_total_busy_time.seconds", `61`), lu + "ffl_read.ffil_total_busy_time", "exceeds ffl_duration"},
		{"zero length", mutate(t, r0+"ffis_length", `0`), r0 + "ffis_length", "must not be zero"},
		{"to-EOF length after an offset is valid", mutate(t, r0+"ffis_offset", `10`), "", ""},
		{"range overflows", mutate(t, r0+"ffis_offset", `10`, r0+"ffis_length", `18446744073709551610`), r0 + "ffis_length", "overflows 64 bits"},
		{"missing client", mutate(t, "client_id", ""), "client_id", "must not be empty"},
		{"no reports", mutate(t, "reports", `[]`), "reports", "no reports"},
		{"bad report time", mutate(t, "report_time", `"yesterday"`), "report_time", "RFC 3339"},
		{"report time far ahead", mutate(t, "report_time", `"2027-01-01T00:00:00Z"`), "report_time", "ahead of now"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, HandlerOptions{})
			code, resp := r.post(t, c.body)
			if c.field == "" {
				if code != http.StatusOK {
					t.Fatalf("got %d %q; want 200", code, resp.Error)
				}
				return
			}
			if code != http.StatusBadRequest || resp.Field != c.field || !strings.Contains(resp.Error, c.msg) {
				t.Errorf("got %d field %q error %q; want 400 field %q error containing %q", code, resp.Field, resp.Error, c.field, c.msg)
			}
			if r.st.calls != 0 || len(r.sk.deltas) != 0 || r.in.Keys() != 0 {
				t.Errorf("a rejected batch reached storage (%d calls), the sink (%d deltas) or the state (%d keys)", r.st.calls, len(r.sk.deltas), r.in.Keys())
			}
		})
	}
}

func TestHandlerStatuses(t *testing.T) {
	r := newRig(t, HandlerOptions{MaxBodyBytes: 4096})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	do := func(method, ct string, body []byte) *http.Response {
		req, err := http.NewRequestWithContext(ctx, method, r.srv.URL+Path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := do(http.MethodGet, "", nil); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET: got %d Allow %q; want 405 Allow POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if resp := do(http.MethodPost, "text/plain", readExample(t)); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: got %d; want 415", resp.StatusCode)
	}
	big := append(readExample(t), bytes.Repeat([]byte(" "), 4096)...)
	if resp := do(http.MethodPost, "application/json", big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("body over the limit: got %d; want 413", resp.StatusCode)
	}
	if resp := do(http.MethodPost, "application/json; charset=utf-8", readExample(t)); resp.StatusCode != http.StatusOK {
		t.Errorf("valid batch: got %d; want 200", resp.StatusCode)
	}
}

func TestHandlerAcceptsAndConflicts(t *testing.T) {
	r := newRig(t, HandlerOptions{})
	code, resp := r.post(t, readExample(t))
	if code != http.StatusOK || resp.Accepted != 2 || resp.Deltas != 2 || resp.Resets != 2 {
		t.Fatalf("got %d %+v; want 200 with 2 accepted, 2 deltas, 2 resets", code, resp)
	}
	if len(r.sk.deltas) != 2 || len(r.st.samples) == 0 {
		t.Fatalf("sink got %d deltas, store %d samples; want 2 and some", len(r.sk.deltas), len(r.st.samples))
	}
	// The same batch again: duplicates, nothing new for the sink.
	code, resp = r.post(t, readExample(t))
	if code != http.StatusOK || resp.Duplicates != 2 || resp.Deltas != 0 || len(r.sk.deltas) != 2 {
		t.Errorf("re-sent batch: got %d %+v and %d deltas at the sink; want 200, 2 duplicates, still 2", code, resp, len(r.sk.deltas))
	}
	// Read ops backwards while the duration advanced and bytes stayed.
	body := mutate(t, "reports[0].ffis_layoutupdate.ffl_duration.seconds", `120`)
	body = bytes.Replace(body, []byte(`"ii_count":12800`), []byte(`"ii_count":12000`), 1)
	code, resp = r.post(t, body)
	if code != http.StatusConflict || resp.Field != "reports[0].ffis_read.ii_count" {
		t.Errorf("backwards: got %d %+v; want 409 on reports[0].ffis_read.ii_count", code, resp)
	}
}

func TestHandlerStoreFailureRollsBack(t *testing.T) {
	r := newRig(t, HandlerOptions{})
	r.st.fail = errors.New("disk full")
	code, resp := r.post(t, readExample(t))
	if code != http.StatusServiceUnavailable || !strings.Contains(resp.Error, "disk full") {
		t.Fatalf("got %d %+v; want 503 naming the store error", code, resp)
	}
	if r.in.Keys() != 0 || len(r.sk.deltas) != 0 {
		t.Fatalf("after a store failure: %d keys, %d deltas at the sink; want 0, 0", r.in.Keys(), len(r.sk.deltas))
	}
	// The retry is not mistaken for a duplicate: its data is counted.
	r.st.fail = nil
	code, resp = r.post(t, readExample(t))
	if code != http.StatusOK || resp.Deltas != 2 || len(r.sk.deltas) != 2 {
		t.Errorf("retry: got %d %+v, %d deltas at the sink; want 200 with 2 deltas", code, resp, len(r.sk.deltas))
	}
}

// TestGolden checks what the example batch of docs/layoutstats.md yields.
func TestGolden(t *testing.T) {
	b, err := DecodeBatch(readExample(t))
	if err != nil {
		t.Fatal(err)
	}
	in := newIngester(t, Options{})
	res := mustIngest(t, in, t0.Add(time.Minute), b)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res.Deltas); err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Samples {
		fmt.Fprintf(&out, "%s %d %g\n", s.SeriesKey(), s.Timestamp, s.Value)
	}
	const golden = "testdata/batch.golden"
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("output differs from %s (run with -update and review the diff):\n%s", golden, out.String())
	}
}

func TestServiceTickRetriesAfterStoreFailure(t *testing.T) {
	in := newIngester(t, Options{EmitInterval: 10 * time.Second})
	st, sk := &store{}, &sink{}
	svc := NewService(in, st, sk)
	ctx := context.Background()
	if _, err := svc.Accept(ctx, t0, batch("c", rep(0, time.Minute, ctr{ops: 60, busy: time.Second}, ctr{}))); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Accept(ctx, t0.Add(time.Second), batch("c", rep(0, 2*time.Minute, ctr{ops: 180, busy: time.Second}, ctr{}))); err != nil {
		t.Fatal(err)
	}
	before := len(st.samples)
	st.fail = errors.New("store down")
	if err := svc.Tick(ctx, t0.Add(20*time.Second)); err == nil {
		t.Fatal("tick with a failing store: got no error")
	}
	st.fail = nil
	if err := svc.Tick(ctx, t0.Add(25*time.Second)); err != nil {
		t.Fatal(err)
	}
	got, _ := sampleValue(t, st.samples[before:], models.MetricLayoutStatsDeviceOps, rep(0, 0, ctr{}, ctr{}).DeviceID, "read")
	if got != 2 {
		t.Errorf("after the failed tick the next one wrote ops/s %v; want (180-60)/60 = 2", got)
	}
}

// A store failure after a sweep has evicted keys and emptied aggregates
// must bring all of them back.
func TestStoreFailureRestoresSweptState(t *testing.T) {
	opts := Options{SweepInterval: time.Second}
	a, b := newIngester(t, opts), newIngester(t, opts)
	setup := batch("c", rep(0, time.Minute, ctr{ops: 60, busy: time.Second}, ctr{}), rep(1, time.Minute, ctr{ops: 60, busy: time.Second}, ctr{}))
	mustIngest(t, a, t0, setup)
	mustIngest(t, b, t0, setup)
	svc := NewService(a, &store{fail: errors.New("store down")}, &sink{})
	late := batch("c", rep(2, time.Minute, ctr{ops: 6, busy: time.Second}, ctr{}))
	var se *StoreError
	if _, err := svc.Accept(context.Background(), t0.Add(20*time.Minute), late); !errors.As(err, &se) {
		t.Fatalf("got %v; want a *StoreError", err)
	}
	if a.Keys() != 2 || len(a.devices) != 2 || len(a.servers) != 2 {
		t.Fatalf("after rollback: %d keys, %d devices, %d servers; want 2, 2, 2", a.Keys(), len(a.devices), len(a.servers))
	}
	next := batch("c", rep(0, 3*time.Minute, ctr{ops: 240, busy: 2 * time.Second}, ctr{}), rep(1, 3*time.Minute, ctr{ops: 90, busy: time.Second}, ctr{}))
	ra := mustIngest(t, a, t0.Add(2*time.Minute), next)
	rb := mustIngest(t, b, t0.Add(2*time.Minute), next)
	if !reflect.DeepEqual(ra, rb) {
		t.Errorf("after a rolled-back sweep:\n got %+v\nwant %+v", ra, rb)
	}
}

func TestHandlerCapacity(t *testing.T) {
	r := newRigWith(t, Options{MaxKeys: 1}, HandlerOptions{})
	code, resp := r.post(t, readExample(t))
	if code != http.StatusServiceUnavailable || resp.Field != "reports[1]" || !strings.Contains(resp.Error, "limit of 1 keys") {
		t.Errorf("got %d %+v; want 503 on reports[1] naming the limit", code, resp)
	}
	if r.in.Keys() != 0 || r.st.calls != 0 {
		t.Errorf("refused batch left %d keys and %d store calls; want 0, 0", r.in.Keys(), r.st.calls)
	}
}
