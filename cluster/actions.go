package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/actuator/files"
	"github.com/ballast-io/ballast/cluster/ha"
	"github.com/ballast-io/ballast/cluster/node"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// PathActions serves the actions: GET lists them (filters state, kind,
// subject, parent, plans, since), GET PathActions/{id} shows one, and POST
// PathActions/{id}/approve|reject|cancel decides on a plan
// (docs/actions.md).
const PathActions = "/api/v1/actions"

// newMover returns the driver the config names. The twin driver comes from
// the runtime: only the demo and eval have a twin to give.
func newMover(c *actuator.Config, rt *Runtime, log *slog.Logger) (actuator.Mover, error) {
	switch c.Driver {
	case actuator.DriverNone:
		return nil, nil
	case actuator.DriverTwin:
		if rt.Mover != nil {
			return rt.Mover, nil
		}
	case actuator.DriverFiles:
		// commits run under the fence beside the layout store, which both
		// mds of an HA pair reach (docs/ha.md)
		return files.New(files.Options{Config: c.Files, Fence: ha.FenceFile{Path: filepath.Join(c.Files.LayoutDir, "fence")}, Logger: log})
	case actuator.DriverExec:
		return actuator.NewExecDriver(actuator.ExecOptions{Config: c.Exec, Logger: log})
	}
	return nil, driverUnavailable(c.Driver)
}

// driverUnavailable says why a real mds cannot run driver: the twin's mover
// exists only in ballast demo and eval.
func driverUnavailable(driver string) error {
	if driver == actuator.DriverTwin {
		return errors.New(`actuators.driver: "twin" moves data on the cluster twin, which only ballast demo and ballast eval run; use files or exec on a real cluster`)
	}
	return fmt.Errorf("actuators.driver: %q is not available in this build (docs/actions.md)", driver)
}

// measureFunc evaluates an expression that yields one number. A top-level
// sum, avg, min or max without grouping is taken here, over the inner
// expression's series in the order of their labels: the store adds series
// in the order its workers happen to finish them, so one expression on
// the same samples gave sums that differed in their last bits from run to
// run, and actions journaled different effects (eval's byte-identical
// runs, issue 15).
func measureFunc(q storage.Querier) actuator.MeasureFunc {
	return func(ctx context.Context, expr string, at time.Time) (float64, bool, error) {
		if op, inner, ok := plainAggregate(expr); ok {
			ss, err := q.Query(ctx, inner, at)
			if err != nil {
				return 0, false, err
			}
			v, ok := aggregateInOrder(op, ss)
			return v, ok, nil
		}
		ss, err := q.Query(ctx, expr, at)
		if err != nil {
			return 0, false, err
		}
		for i := range ss {
			if n := len(ss[i].Values); n > 0 && !math.IsNaN(ss[i].Values[n-1]) {
				return ss[i].Values[n-1], true, nil
			}
		}
		return 0, false, nil
	}
}

// plainAggregate splits op(inner) for op sum, avg, min or max with one
// argument, no by/without and no limit.
func plainAggregate(expr string) (op, inner string, ok bool) {
	e, err := metricsql.Parse(expr)
	if err != nil {
		return "", "", false
	}
	ae, isAggr := e.(*metricsql.AggrFuncExpr)
	if !isAggr || len(ae.Args) != 1 || ae.Modifier.Op != "" || ae.Limit != 0 {
		return "", "", false
	}
	switch op = strings.ToLower(ae.Name); op {
	case "sum", "avg", "min", "max":
		return op, string(ae.Args[0].AppendString(nil)), true
	}
	return "", "", false
}

// aggregateInOrder applies op to the last value of every series, in the
// order of the series' names and labels; NaNs are skipped, as the store's
// aggregates skip them. No value: ok is false.
func aggregateInOrder(op string, ss []storage.Series) (float64, bool) {
	type kv struct {
		key string
		v   float64
	}
	vs := make([]kv, 0, len(ss))
	for i := range ss {
		n := len(ss[i].Values)
		if n == 0 || math.IsNaN(ss[i].Values[n-1]) {
			continue
		}
		ls := append([]models.Label(nil), ss[i].Labels...)
		sort.Slice(ls, func(a, b int) bool { return ls[a].Name < ls[b].Name })
		var k strings.Builder
		k.WriteString(ss[i].Name)
		for _, l := range ls {
			k.WriteString("\x00" + l.Name + "\x00" + l.Value)
		}
		vs = append(vs, kv{k.String(), ss[i].Values[n-1]})
	}
	if len(vs) == 0 {
		return 0, false
	}
	sort.Slice(vs, func(a, b int) bool { return vs[a].key < vs[b].key })
	r := vs[0].v
	for _, x := range vs[1:] {
		switch op {
		case "sum", "avg":
			r += x.v
		case "min":
			r = math.Min(r, x.v)
		case "max":
			r = math.Max(r, x.v)
		}
	}
	if op == "avg" {
		r /= float64(len(vs))
	}
	return r, true
}

// actionsHandler serves PathActions and everything under it.
type actionsHandler struct {
	journal *storage.Journal
	engine  *actuator.Engine
	// now is the clock decisions are stamped with (the pipeline's last
	// tick on a simulated clock, else the wall clock).
	now func() time.Time
}

func (h *actionsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, PathActions), "/")
	id, verb, _ := strings.Cut(rest, "/")
	switch {
	case r.Method == http.MethodGet && rest == "":
		f, err := storage.ParseActionFilter(r.URL.Query().Get)
		if err != nil {
			storage.WriteAPIError(w, http.StatusBadRequest, err)
			return
		}
		as, err := h.journal.Actions(f)
		if err != nil {
			storage.WriteAPIError(w, http.StatusInternalServerError, err)
			return
		}
		if as == nil {
			as = []models.Action{}
		}
		writeSuccess(w, as)
	case r.Method == http.MethodGet && verb == "":
		a, err := h.journal.Action(id)
		if errors.Is(err, storage.ErrNoAction) {
			storage.WriteAPIError(w, http.StatusNotFound, err)
			return
		}
		if err != nil {
			storage.WriteAPIError(w, http.StatusInternalServerError, err)
			return
		}
		writeSuccess(w, a)
	case r.Method == http.MethodPost && id != "" && (verb == "approve" || verb == "reject" || verb == "cancel"):
		h.decide(w, r, id, verb)
	case r.Method == http.MethodGet || r.Method == http.MethodPost:
		storage.WriteAPIError(w, http.StatusNotFound, fmt.Errorf("no such endpoint %s %s: see docs/actions.md", r.Method, r.URL.Path))
	default:
		w.Header().Set("Allow", "GET, POST")
		storage.WriteAPIError(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s is not allowed; use GET or POST", r.Method))
	}
}

// DecisionRequest is the optional body of an approve, reject or cancel.
type DecisionRequest struct {
	By     string `json:"by"`
	Reason string `json:"reason"`
}

func (h *actionsHandler) decide(w http.ResponseWriter, r *http.Request, id, verb string) {
	// The server lets only callers with the act scope this far
	// (docs/security.md). Only JSON: a browser cannot send it cross-site without a CORS
	// preflight, so a web page cannot approve an action behind the
	// operator's back.
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		storage.WriteAPIError(w, http.StatusUnsupportedMediaType, fmt.Errorf("Content-Type %q: want application/json", r.Header.Get("Content-Type")))
		return
	}
	var req DecisionRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		storage.WriteAPIError(w, http.StatusBadRequest, fmt.Errorf("cannot read the body: %w", err))
		return
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			storage.WriteAPIError(w, http.StatusBadRequest, fmt.Errorf("cannot decode the body: %w (want {\"by\": …, \"reason\": …})", err))
			return
		}
	}
	if h.engine == nil {
		storage.WriteAPIError(w, http.StatusServiceUnavailable, errors.New("the actions engine is not running"))
		return
	}
	// who decided is the authenticated client when there is one; what a
	// caller says about itself is kept beside it
	by := req.By
	if p := node.RequestPrincipal(r); p != "" {
		by = p
		if req.By != "" && req.By != p {
			by = fmt.Sprintf("%s (for %s)", p, req.By)
		}
	}
	a, err := h.engine.Decide(id, verb, by, req.Reason, h.now())
	switch {
	case errors.Is(err, actuator.ErrUnknown):
		storage.WriteAPIError(w, http.StatusNotFound, err)
	case errors.Is(err, actuator.ErrConflict):
		storage.WriteAPIError(w, http.StatusConflict, err)
	case err != nil:
		storage.WriteAPIError(w, http.StatusBadRequest, err)
	default:
		writeSuccess(w, a)
	}
}

func writeSuccess(w http.ResponseWriter, data any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data})
}
