package layoutstats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ballast-io/ballast/models"
)

// Path is where the mds serves the ingest.
const Path = "/api/v1/layoutstats"

// Appender stores derived samples; the mds wires its time-series storage
// here. An error means nothing of the call was kept for certain, and the
// batch is rolled back so that the sender can retry it.
type Appender interface {
	Append(ctx context.Context, samples []models.Sample) error
}

// StripeSink receives the per-stripe deltas of every accepted batch, in
// order; the mds wires the stripe-level analyzers here. It is called with
// the ingest serialised, so it should hand the deltas on quickly and must
// not keep the slice beyond the call unless it copies it.
type StripeSink interface {
	ObserveStripes(deltas []models.StripeDelta)
}

// Service accepts batches in order: it applies one to the Ingester, stores
// its samples and only then commits it and tells the stripe sink. It is
// safe for concurrent use. The cluster twin calls Accept in process; the
// HTTP handler calls it for every POST.
type Service struct {
	mu   sync.Mutex
	in   *Ingester
	app  Appender
	sink StripeSink
}

// NewService returns a Service over in that stores samples in app and
// hands stripe deltas to sink.
func NewService(in *Ingester, app Appender, sink StripeSink) *Service {
	if in == nil || app == nil || sink == nil {
		panic("layoutstats: NewService needs an Ingester, an Appender and a StripeSink")
	}
	return &Service{in: in, app: app, sink: sink}
}

// StoreError is an Appender failure; the batch was rolled back and may be
// sent again.
type StoreError struct{ Err error }

// Error describes the failure.
func (e *StoreError) Error() string { return "cannot store layoutstats samples: " + e.Err.Error() }

// Unwrap returns the Appender's error.
func (e *StoreError) Unwrap() error { return e.Err }

// Accept ingests one batch at time now: validate and difference it
// (*models.FieldError, *ConflictError), append its samples (*StoreError,
// after which the batch is rolled back), commit, then pass its deltas to
// the stripe sink. A batch is all or nothing.
func (s *Service) Accept(ctx context.Context, now time.Time, b *models.LayoutStatsBatch) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.in.Begin(now, b)
	if err != nil {
		return Result{}, err
	}
	if len(tx.Result.Samples) > 0 {
		if err := s.app.Append(ctx, tx.Result.Samples); err != nil {
			tx.Rollback()
			return Result{}, &StoreError{Err: err}
		}
	}
	tx.Commit()
	if len(tx.Result.Deltas) > 0 {
		s.sink.ObserveStripes(tx.Result.Deltas)
	}
	return tx.Result, nil
}

// Tick runs the ingester's periodic work at now and stores the samples it
// renders (see Ingester.Tick). On a store error nothing changes, and the
// same samples are due again at the next tick. Call it every few seconds.
func (s *Service) Tick(ctx context.Context, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := s.in.Tick(now)
	if len(tx.Result.Samples) > 0 {
		if err := s.app.Append(ctx, tx.Result.Samples); err != nil {
			tx.Rollback()
			return &StoreError{Err: err}
		}
	}
	tx.Commit()
	return nil
}

// HandlerOptions tunes the HTTP handler; zero fields take defaults.
type HandlerOptions struct {
	// MaxBodyBytes is the largest request body accepted; larger bodies get
	// 413. Default 8 MiB (about 6000 reports).
	MaxBodyBytes int64
	// Now is the clock for a batch without report_time and for eviction.
	// Default time.Now; the handler is the edge where wall time enters.
	Now func() time.Time
}

// DefaultMaxBodyBytes is the default HandlerOptions.MaxBodyBytes.
const DefaultMaxBodyBytes = 8 << 20

// NewHandler returns the http.Handler of POST /api/v1/layoutstats.
func NewHandler(s *Service, opts HandlerOptions) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &handler{s: s, opts: opts}
}

type handler struct {
	s    *Service
	opts HandlerOptions
}

// response is the JSON body of every answer.
type response struct {
	Error      string `json:"error,omitempty"`
	Field      string `json:"field,omitempty"`
	Accepted   int    `json:"accepted"`
	Deltas     int    `json:"deltas"`
	Duplicates int    `json:"duplicates"`
	Baselines  int    `json:"baselines"`
	Resets     int    `json:"resets"`
	// BusyClamped counts busy times clamped to their interval (rounding).
	BusyClamped int `json:"busy_clamped,omitempty"`
	// Errors counts the device errors the batch reported (Result.Errors).
	Errors int `json:"errors,omitempty"`
}

func reply(w http.ResponseWriter, code int, r response) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(r)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		reply(w, http.StatusMethodNotAllowed, response{Error: "method " + r.Method + " not allowed; use POST"})
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			reply(w, http.StatusUnsupportedMediaType, response{Error: fmt.Sprintf("content type %q is not application/json", ct)})
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			reply(w, http.StatusRequestEntityTooLarge, response{Error: fmt.Sprintf("body is larger than the limit of %d bytes; send smaller batches", tooBig.Limit)})
			return
		}
		reply(w, http.StatusBadRequest, response{Error: "cannot read body: " + err.Error()})
		return
	}
	b, err := DecodeBatch(body)
	if err == nil {
		var res Result
		res, err = h.s.Accept(r.Context(), h.opts.Now(), b)
		if err == nil {
			reply(w, http.StatusOK, response{Accepted: res.Accepted, Deltas: len(res.Deltas),
				Duplicates: res.Duplicates, Baselines: res.Baselines, Resets: res.Resets, BusyClamped: res.BusyClamped, Errors: res.Errors})
			return
		}
	}
	var (
		fe *models.FieldError
		ce *ConflictError
		se *StoreError
		ke *CapacityError
	)
	switch {
	case errors.As(err, &fe):
		reply(w, http.StatusBadRequest, response{Error: fe.Error(), Field: fe.Path})
	case errors.As(err, &ce):
		reply(w, http.StatusConflict, response{Error: ce.Error(), Field: ce.Path})
	case errors.As(err, &se) && isBadInput(se.Err):
		// The store refused the derived samples for what they say (a
		// report_time older than the retention): sending it again cannot
		// help, so this is not a 503.
		reply(w, http.StatusBadRequest, response{Error: se.Error(), Field: "report_time"})
	case errors.As(err, &se):
		w.Header().Set("Retry-After", "5")
		reply(w, http.StatusServiceUnavailable, response{Error: se.Error()})
	case errors.As(err, &ke):
		w.Header().Set("Retry-After", "60")
		reply(w, http.StatusServiceUnavailable, response{Error: ke.Error(), Field: ke.Path})
	default:
		reply(w, http.StatusInternalServerError, response{Error: err.Error()})
	}
}

// DecodeBatch parses a JSON batch strictly: unknown fields, numbers out of
// range for their field and trailing data are refused. Errors are
// *models.FieldError naming the JSON path of the bad field. It does not
// validate the values; Ingest does.
func DecodeBatch(body []byte) (*models.LayoutStatsBatch, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, &models.FieldError{Path: "body", Reason: "is empty; want a JSON batch"}
	}
	var b models.LayoutStatsBatch
	if err := decodeStrict(body, &b); err != nil {
		// The fast path failed; decode again piece by piece to name the
		// report the error is in (encoding/json paths carry no indices).
		return nil, locate(body, err)
	}
	if err := checkKeys(body); err != nil {
		return nil, err
	}
	return &b, nil
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errTrailing
	}
	return nil
}

var errTrailing = errors.New("trailing data after the JSON value")

// locate finds which field of body caused err, decoding the envelope and
// then each report on its own.
func locate(body []byte, err error) error {
	var env struct {
		ClientID   json.RawMessage   `json:"client_id"`
		ReportTime json.RawMessage   `json:"report_time"`
		Reports    []json.RawMessage `json:"reports"`
		Errors     []json.RawMessage `json:"errors"`
	}
	if e := decodeStrict(body, &env); e != nil {
		return jsonFieldError("", e)
	}
	var (
		id string
		t  time.Time
	)
	if len(env.ClientID) > 0 {
		if e := decodeStrict(env.ClientID, &id); e != nil {
			return jsonFieldError("client_id", e)
		}
	}
	if len(env.ReportTime) > 0 {
		if e := decodeStrict(env.ReportTime, &t); e != nil {
			return jsonFieldError("report_time", e)
		}
	}
	for i, raw := range env.Reports {
		var r models.FFIOStats4
		if e := decodeStrict(raw, &r); e != nil {
			return jsonFieldError("reports["+strconv.Itoa(i)+"]", e)
		}
	}
	for i, raw := range env.Errors {
		if e := locateError(raw); e != nil {
			return jsonFieldError("errors["+strconv.Itoa(i)+"]"+e.at, e.err)
		}
	}
	return jsonFieldError("", err)
}

// errorAt is a decoding error inside one element of errors[], at a path
// below it.
type errorAt struct {
	at  string
	err error
}

// locateError decodes one errors[] element, and each of its ffie_errors
// on its own to name the index of a bad one.
func locateError(raw json.RawMessage) *errorAt {
	var e models.FFIOErr4
	err := decodeStrict(raw, &e)
	if err == nil {
		return nil
	}
	var env struct {
		Errors    []json.RawMessage `json:"ffie_errors"`
		FirstTime json.RawMessage   `json:"first_time"`
		LastTime  json.RawMessage   `json:"last_time"`
	}
	if json.Unmarshal(raw, &env) == nil {
		for j, r := range env.Errors {
			var de models.DeviceError4
			if e := decodeStrict(r, &de); e != nil {
				return &errorAt{at: ".ffie_errors[" + strconv.Itoa(j) + "]", err: e}
			}
		}
		for _, f := range []struct {
			name string
			raw  json.RawMessage
		}{{"first_time", env.FirstTime}, {"last_time", env.LastTime}} {
			var t time.Time
			if len(f.raw) > 0 {
				if e := decodeStrict(f.raw, &t); e != nil {
					return &errorAt{at: "." + f.name, err: e}
				}
			}
		}
	}
	return &errorAt{err: err}
}

// jsonFieldError turns an encoding/json error met while decoding the value
// at path into a *models.FieldError.
func jsonFieldError(path string, err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		tpe *time.ParseError
	)
	body := path
	if body == "" {
		body = "body"
	}
	switch {
	case errors.As(err, &syn):
		return &models.FieldError{Path: body, Reason: fmt.Sprintf("malformed JSON at byte %d: %s", syn.Offset, syn.Error())}
	case errors.As(err, &typ):
		p := path
		if typ.Field != "" {
			p = join(path, typ.Field)
		}
		if p == "" {
			p = "body"
		}
		return &models.FieldError{Path: p, Reason: fmt.Sprintf("cannot use JSON %s as %s", typ.Value, typ.Type)}
	case errors.As(err, &tpe):
		return &models.FieldError{Path: body, Reason: "is not an RFC 3339 time: " + tpe.Error()}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &models.FieldError{Path: body, Reason: "malformed JSON: unexpected end of input"}
	case errors.Is(err, errTrailing):
		return &models.FieldError{Path: body, Reason: errTrailing.Error()}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if n, e := strconv.Unquote(name); e == nil {
			name = n
		}
		return &models.FieldError{Path: join(path, name), Reason: "unknown field (field names are RFC 8435's XDR names, see docs/layoutstats.md)"}
	}
	return &models.FieldError{Path: body, Reason: err.Error()}
}

// isBadInput reports whether err says the input itself is unacceptable
// (storage validation errors have a BadInput method) rather than the store
// being unavailable.
func isBadInput(err error) bool {
	var bi interface{ BadInput() bool }
	return errors.As(err, &bi) && bi.BadInput()
}
