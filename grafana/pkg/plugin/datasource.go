// Package plugin is the backend of ballast's Grafana data source: one
// Datasource per data source configured in Grafana, answering queries
// (QueryData), health checks (CheckHealth) and resource calls
// (CallResource: editor options, approve and reject) by reading a ballast
// mds over HTTP.
package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/backend/httpclient"
	"github.com/grafana/grafana-plugin-sdk-go/backend/instancemgmt"
	"github.com/grafana/grafana-plugin-sdk-go/backend/log"
	"github.com/grafana/grafana-plugin-sdk-go/backend/resource/httpadapter"
)

// ID is the plugin id (src/plugin.json).
const ID = "ballast-ballast-datasource"

var (
	_ backend.QueryDataHandler      = (*Datasource)(nil)
	_ backend.CheckHealthHandler    = (*Datasource)(nil)
	_ backend.CallResourceHandler   = (*Datasource)(nil)
	_ instancemgmt.InstanceDisposer = (*Datasource)(nil)
)

// Settings are a data source's options: the mds URL (Grafana's URL field)
// and, in secureJsonData, a bearer token for an mds that requires one (the
// query scope to read; the act scope too to approve and reject actions).
type Settings struct {
	URL   string
	Token string
	// TimeoutSeconds bounds one request to the mds (jsonData.timeoutSeconds);
	// default 30.
	TimeoutSeconds int `json:"timeoutSeconds"`
}

// ParseSettings reads s, naming the field that is wrong.
func ParseSettings(s backend.DataSourceInstanceSettings) (Settings, error) {
	var out Settings
	if len(s.JSONData) > 0 {
		if err := json.Unmarshal(s.JSONData, &out); err != nil {
			return out, fmt.Errorf("cannot read the data source's jsonData: %w", err)
		}
	}
	if out.TimeoutSeconds < 0 {
		return out, fmt.Errorf("jsonData.timeoutSeconds: %d is negative", out.TimeoutSeconds)
	}
	if out.TimeoutSeconds == 0 {
		out.TimeoutSeconds = 30
	}
	out.URL = s.URL
	out.Token = s.DecryptedSecureJSONData["token"]
	return out, nil
}

// Datasource is one configured ballast data source.
type Datasource struct {
	settings Settings
	mds      *client
	err      error // a settings error, reported by every call
	hc       *http.Client
	resource backend.CallResourceHandler
}

// NewDatasource builds the instance for one data source's settings. A bad
// setting does not fail the instance: every query and the health check
// report it, so the user sees what to fix.
func NewDatasource(ctx context.Context, s backend.DataSourceInstanceSettings) (instancemgmt.Instance, error) {
	d := &Datasource{}
	d.settings, d.err = ParseSettings(s)
	opts, err := s.HTTPClientOptions(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot read the data source's HTTP options: %w", err)
	}
	opts.Timeouts.Timeout = time.Duration(max(d.settings.TimeoutSeconds, 1)) * time.Second
	// Grafana's client middlewares: TLS, custom headers, tracing.
	if d.hc, err = httpclient.New(opts); err != nil {
		return nil, fmt.Errorf("cannot build the HTTP client: %w", err)
	}
	if d.err == nil {
		d.mds, d.err = newClient(d.settings.URL, d.settings.Token, d.hc)
	}
	d.resource = httpadapter.New(d.routes())
	return d, nil
}

// Dispose implements instancemgmt.InstanceDisposer: Grafana replaced the
// settings, so this instance's connections go.
func (d *Datasource) Dispose() { d.hc.CloseIdleConnections() }

// QueryData answers each query by its queryType; one failing query does
// not fail the others.
func (d *Datasource) QueryData(ctx context.Context, req *backend.QueryDataRequest) (*backend.QueryDataResponse, error) {
	resp := backend.NewQueryDataResponse()
	for _, q := range req.Queries {
		resp.Responses[q.RefID] = d.query(ctx, q)
	}
	return resp, nil
}

func (d *Datasource) query(ctx context.Context, q backend.DataQuery) (res backend.DataResponse) {
	defer func() {
		// Bytes from the mds must never take Grafana's plugin down.
		if p := recover(); p != nil {
			log.DefaultLogger.Error("query panicked", "refId", q.RefID, "panic", fmt.Sprint(p))
			res = backend.ErrDataResponse(backend.StatusInternal, fmt.Sprintf("internal error answering query %s", q.RefID))
		}
	}()
	if d.err != nil {
		return backend.ErrDataResponseWithSource(backend.StatusBadRequest, backend.ErrorSourceDownstream, d.err.Error())
	}
	var m Query
	if len(q.JSON) > 0 {
		if err := json.Unmarshal(q.JSON, &m); err != nil {
			return backend.ErrDataResponse(backend.StatusBadRequest, fmt.Sprintf("query %s is not a ballast query: %v", q.RefID, err))
		}
	}
	qt := q.QueryType
	if qt == "" {
		qt = m.QueryType
	}
	run, ok := queryTypes[qt]
	if !ok {
		return backend.ErrDataResponse(backend.StatusBadRequest, fmt.Sprintf("query %s: queryType %q is not one of %s", q.RefID, qt, strings.Join(QueryTypes(), ", ")))
	}
	frames, err := run(ctx, d.mds, q, m)
	if err != nil {
		status := backend.StatusBadGateway
		var se *StatusError
		switch {
		case errors.Is(err, errBadQuery):
			status = backend.StatusBadRequest
		case errors.As(err, &se) && (se.Status == http.StatusUnauthorized || se.Status == http.StatusForbidden):
			status = backend.StatusUnauthorized
		case errors.Is(err, context.DeadlineExceeded):
			status = backend.StatusTimeout
		}
		return backend.ErrDataResponseWithSource(status, backend.ErrorSourceDownstream, err.Error())
	}
	return backend.DataResponse{Frames: frames}
}

// CheckHealth asks the mds what its pipeline runs and how many findings are
// active, and says clearly what is wrong when it cannot: no URL, nothing
// listening, a server that is not an mds, a refused token.
func (d *Datasource) CheckHealth(ctx context.Context, _ *backend.CheckHealthRequest) (*backend.CheckHealthResult, error) {
	if d.err != nil {
		return &backend.CheckHealthResult{Status: backend.HealthStatusError, Message: d.err.Error()}, nil
	}
	st, err := d.mds.pipeline(ctx)
	if err != nil {
		return &backend.CheckHealthResult{Status: backend.HealthStatusError, Message: d.explain(err)}, nil
	}
	active := true
	fs, err := d.mds.findings(ctx, "", "", &active, time.Time{})
	if err != nil {
		return &backend.CheckHealthResult{Status: backend.HealthStatusError, Message: d.explain(err)}, nil
	}
	return &backend.CheckHealthResult{Status: backend.HealthStatusOk, Message: fmt.Sprintf(
		"ballast mds at %s: %d sources, %d analysis stages, %d actuators; %d active findings",
		d.mds.base.Redacted(), len(st.Sources), len(st.Stages), len(st.Actuators), len(fs))}, nil
}

// explain turns an mds error into what the user should check.
func (d *Datasource) explain(err error) string {
	var se *StatusError
	if errors.As(err, &se) {
		switch {
		case se.Status == http.StatusUnauthorized || se.Status == http.StatusForbidden:
			if d.settings.Token == "" {
				return fmt.Sprintf("the ballast mds at %s requires a token (HTTP %d on %s: %s); set one with the query scope in this data source's settings",
					d.mds.base.Redacted(), se.Status, se.Path, se.Body)
			}
			return fmt.Sprintf("the ballast mds at %s refused the token (HTTP %d on %s: %s); check the token and that it has the query scope",
				d.mds.base.Redacted(), se.Status, se.Path, se.Body)
		case se.Status == http.StatusNotFound:
			return fmt.Sprintf("%s answers but has no %s: is the URL a ballast mds (not an agent or another server)?", d.mds.base.Redacted(), se.Path)
		}
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) || strings.Contains(err.Error(), "is not ballast's JSON") {
		return fmt.Sprintf("%s answers but not as a ballast mds: %v", d.mds.base.Redacted(), err)
	}
	return err.Error()
}

// CallResource serves the plugin's resources (routes).
func (d *Datasource) CallResource(ctx context.Context, req *backend.CallResourceRequest, sender backend.CallResourceResponseSender) error {
	return d.resource.CallResource(ctx, req, sender)
}
