package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"time"
)

// routes are the plugin's resources, reached from Grafana at
// /api/datasources/uid/UID/resources/…:
//
//	GET  options                    kinds, capacity subjects, client groups (query editor)
//	POST actions/{id}/{verb}        approve, reject or cancel an action (needs a token)
func (d *Datasource) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /options", d.serveOptions)
	mux.HandleFunc("POST /actions/{id}/{verb}", d.serveDecision)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// Options are the choices the query editor offers.
type Options struct {
	QueryTypes       []string `json:"queryTypes"`
	Kinds            []string `json:"kinds"`
	CapacitySubjects []string `json:"capacitySubjects"`
	Groups           []string `json:"groups"`
}

func (d *Datasource) serveOptions(w http.ResponseWriter, r *http.Request) {
	if d.err != nil {
		writeErr(w, http.StatusBadRequest, d.err.Error())
		return
	}
	ctx := r.Context()
	o := Options{QueryTypes: QueryTypes(), Kinds: []string{}, CapacitySubjects: []string{"cluster"}, Groups: []string{}}
	fs, err := d.mds.findings(ctx, "", "", nil, time.Now().Add(-7*24*time.Hour))
	if err != nil {
		writeErr(w, http.StatusBadGateway, d.explain(err))
		return
	}
	kinds, groups := map[string]bool{}, map[string]bool{}
	for _, f := range fs {
		kinds[f.Kind] = true
		if f.Kind == "checkpoint_forecast" || f.Kind == "checkpoint_burst" {
			groups[f.Subject.ID] = true
		}
	}
	o.Kinds, o.Groups = slices.Sorted(maps.Keys(kinds)), slices.Sorted(maps.Keys(groups))
	if rep, err := d.mds.report(ctx); err == nil {
		for _, p := range rep.Plots {
			o.CapacitySubjects = append(o.CapacitySubjects, p.Subject.String())
		}
		sort.Strings(o.CapacitySubjects[1:])
	}
	writeJSON(w, http.StatusOK, o)
}

// serveDecision forwards an operator's approve, reject or cancel to the
// mds's actions API with this data source's token: the mds decides who may
// act (the act scope), the plugin only refuses to send without a token.
func (d *Datasource) serveDecision(w http.ResponseWriter, r *http.Request) {
	if d.err != nil {
		writeErr(w, http.StatusBadRequest, d.err.Error())
		return
	}
	id, verb := r.PathValue("id"), r.PathValue("verb")
	switch verb {
	case "approve", "reject", "cancel":
	default:
		writeErr(w, http.StatusNotFound, fmt.Sprintf("no such decision %q: want approve, reject or cancel", verb))
		return
	}
	if d.settings.Token == "" {
		writeErr(w, http.StatusForbidden, "this data source has no token: set one with the act scope in its settings to approve or reject actions")
		return
	}
	b, err := d.mds.do(r.Context(), http.MethodPost, "/api/v1/actions/"+url.PathEscape(id)+"/"+verb, nil, nil)
	if err != nil {
		var se *StatusError
		if errors.As(err, &se) {
			writeErr(w, se.Status, se.Error())
			return
		}
		writeErr(w, http.StatusBadGateway, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
