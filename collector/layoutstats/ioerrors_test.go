package layoutstats

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ballast-io/ballast/models"
)

func readErrorsExample(t testing.TB) []byte {
	t.Helper()
	return readTestdata(t, "batch-errors.json")
}

// errBatch is a batch of client c with one error entry and no reports.
func errBatch(status, op string, count uint64) *models.LayoutStatsBatch {
	return &models.LayoutStatsBatch{ClientID: "c", Errors: []models.FFIOErr4{{Length: 1, Stateid: models.Stateid4{Other: strings.Repeat("ab", 12)},
		Errors: []models.DeviceError4{{DeviceID: strings.Repeat("0f", 16), Status: status, Opnum: op}}, Count: count}}}
}

// errorSamples returns the error counter samples by "deviceid op status".
func errorSamples(ss []models.Sample) map[string]models.Sample {
	out := map[string]models.Sample{}
	for _, s := range ss {
		if s.Name == models.MetricLayoutStatsIOErrors {
			out[s.Label("deviceid")+" "+s.Label("op")+" "+s.Label("status")] = s
		}
	}
	return out
}

func TestErrorsAreCounted(t *testing.T) {
	r := newRig(t, HandlerOptions{})
	code, resp := r.post(t, readErrorsExample(t))
	if code != http.StatusOK || resp.Errors != 14 || resp.Deltas != 2 {
		t.Fatalf("got %d %+v; want 200 with 14 errors and the 2 deltas", code, resp)
	}
	got := errorSamples(r.st.samples)
	nxio := got["a1b2c3d4000000000000000000000009 write NFS4ERR_NXIO"]
	lastTime := time.Date(2026, 3, 1, 12, 0, 50, 0, time.UTC)
	if nxio.Value != 12 || nxio.Timestamp != lastTime.UnixMilli() || nxio.Label("client") != "gpu-node-017" {
		t.Errorf("NXIO counter %+v; want 12 at last_time %s from gpu-node-017", nxio, lastTime)
	}
	// OP_COMMIT is a write; the upper-case device id is lower-cased; an
	// entry without a window is stamped with the batch's report_time.
	reportTime := time.Date(2026, 3, 1, 12, 1, 0, 0, time.UTC)
	if s := got["a1b2c3d4000000000000000000000009 write NFS4ERR_NOSPC"]; s.Value != 1 || s.Timestamp != reportTime.UnixMilli() {
		t.Errorf("NOSPC counter %+v; want 1 at report_time", s)
	}
	if s := got["a1b2c3d4000000000000000000000007 read NFS4ERR_IO"]; s.Value != 1 {
		t.Errorf("read IO counter %+v; want 1", s)
	}
	if len(got) != 3 {
		t.Errorf("%d error series; want 3", len(got))
	}
	// Errors are events: the next batch adds to the counters.
	r.now = r.now.Add(time.Minute)
	b := mutateBody(t, readErrorsExample(t), "report_time", `"2026-03-01T12:02:00Z"`, "errors[0].count", `3`,
		"errors[0].first_time", `"2026-03-01T12:01:10Z"`, "errors[0].last_time", `"2026-03-01T12:01:20Z"`)
	r.st.samples = nil
	if code, resp := r.post(t, b); code != http.StatusOK {
		t.Fatalf("second batch: got %d %+v; want 200", code, resp)
	}
	if s := errorSamples(r.st.samples)["a1b2c3d4000000000000000000000009 write NFS4ERR_NXIO"]; s.Value != 15 {
		t.Errorf("NXIO counter after the second batch %+v; want 15", s)
	}
}

func TestErrorsOnlyBatch(t *testing.T) {
	in := newIngester(t, Options{})
	b := errBatch("NFS4ERR_NOSPC", "OP_WRITE", 2)
	res := mustIngest(t, in, t0, b)
	if res.Errors != 2 || len(errorSamples(res.Samples)) != 1 || len(res.Deltas) != 0 {
		t.Errorf("got %+v; want 2 errors in one series and no deltas", res)
	}
	b.Errors = nil
	if _, err := in.Ingest(t0, b); err == nil || !strings.Contains(err.Error(), "no reports and no errors") {
		t.Errorf("empty batch: got %v; want refused", err)
	}
}

func TestErrorsRejectMalformed(t *testing.T) {
	e0 := "errors[0]."
	cases := []struct {
		name, path, raw string
		field, msg      string
	}{
		{"unknown status", e0 + "ffie_errors[0].de_status", `"NFS4ERR_OOPS"`, e0 + "ffie_errors[0].de_status", "not an nfsstat4 name"},
		{"unknown op", e0 + "ffie_errors[0].de_opnum", `"OP_GETATTR"`, e0 + "ffie_errors[0].de_opnum", "not OP_READ, OP_WRITE or OP_COMMIT"},
		{"numeric op", e0 + "ffie_errors[0].de_opnum", `38`, e0 + "ffie_errors[0].de_opnum", "cannot use JSON number"},
		{"bad device id", "errors[1].ffie_errors[1].de_deviceid", `"a1b2"`, "errors[1].ffie_errors[1].de_deviceid", "want exactly 16"},
		{"unknown device error field", "errors[1].ffie_errors[1].de_ds", `"x"`, "errors[1].ffie_errors[1].de_ds", "unknown field"},
		{"unknown error field", e0 + "ffie_count", `1`, e0 + "ffie_count", "unknown field"},
		{"zero count", e0 + "count", `0`, e0 + "count", "at least 1"},
		{"missing count", "errors[1].count", ``, "errors[1].count", "at least 1"},
		{"no device errors", e0 + "ffie_errors", `[]`, e0 + "ffie_errors", "at least one"},
		{"zero length", e0 + "ffie_length", `0`, e0 + "ffie_length", "must not be zero"},
		{"short stateid", e0 + "ffie_stateid.other", `"00"`, e0 + "ffie_stateid.other", "want exactly 12"},
		{"window half given", e0 + "first_time", ``, e0 + "first_time", "must be given with last_time"},
		{"window backwards", e0 + "first_time", `"2026-03-01T12:00:55Z"`, e0 + "last_time", "before first_time"},
		{"window ahead of now", e0 + "last_time", `"2027-01-01T00:00:00Z"`, e0 + "last_time", "ahead of now"},
		{"bad time", e0 + "last_time", `"soon"`, e0 + "last_time", "RFC 3339"},
		{"duplicate key", "", "", e0 + "count", "appears twice"},
		{"upper-case key", "", "", e0 + "Count", "lower case"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body []byte
			switch c.name {
			case "duplicate key":
				body = []byte(strings.Replace(string(readErrorsExample(t)), `"count": 12,`, `"count": 12, "count": 13,`, 1))
			case "upper-case key":
				body = []byte(strings.Replace(string(readErrorsExample(t)), `"count": 12,`, `"Count": 12,`, 1))
			default:
				body = mutateBody(t, readErrorsExample(t), c.path, c.raw)
			}
			r := newRig(t, HandlerOptions{})
			code, resp := r.post(t, body)
			if code != http.StatusBadRequest || resp.Field != c.field || !strings.Contains(resp.Error, c.msg) {
				t.Errorf("got %d field %q error %q; want 400 field %q error containing %q", code, resp.Field, resp.Error, c.field, c.msg)
			}
			// The batch is all or nothing: its valid reports are not
			// half-applied, so the sender can fix and resend it whole.
			if r.st.calls != 0 || len(r.sk.deltas) != 0 || r.in.Keys() != 0 || len(r.in.errs) != 0 {
				t.Errorf("a rejected batch reached storage (%d calls), the sink (%d deltas) or the state (%d keys, %d error counters)",
					r.st.calls, len(r.sk.deltas), r.in.Keys(), len(r.in.errs))
			}
			// The corrected batch is then taken whole.
			if code, resp := r.post(t, readErrorsExample(t)); code != http.StatusOK || resp.Deltas != 2 || resp.Errors != 14 {
				t.Errorf("resent valid batch: got %d %+v; want 200 with 2 deltas and 14 errors", code, resp)
			}
		})
	}
}

func TestErrorsRollBackWithTheBatch(t *testing.T) {
	r := newRig(t, HandlerOptions{})
	r.st.fail = errors.New("disk full")
	if code, _ := r.post(t, readErrorsExample(t)); code != http.StatusServiceUnavailable {
		t.Fatalf("got %d; want 503", code)
	}
	if len(r.in.errs) != 0 {
		t.Fatalf("%d error counters after a store failure; want 0", len(r.in.errs))
	}
	r.st.fail = nil
	if code, _ := r.post(t, readErrorsExample(t)); code != http.StatusOK {
		t.Fatalf("retry: got %d; want 200", code)
	}
	if s := errorSamples(r.st.samples)["a1b2c3d4000000000000000000000009 write NFS4ERR_NXIO"]; s.Value != 12 {
		t.Errorf("NXIO counter after the retry %+v; want 12, counted once", s)
	}
}

func TestIdleErrorCountersAreForgotten(t *testing.T) {
	in := newIngester(t, Options{})
	b := errBatch("NFS4ERR_IO", "OP_READ", 1)
	mustIngest(t, in, t0, b)
	in.Tick(t0.Add(DefaultIdleTimeout + time.Minute)).Commit()
	if len(in.errs) != 0 {
		t.Errorf("%d error counters after the idle timeout; want 0", len(in.errs))
	}
}
