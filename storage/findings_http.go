package storage

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// PathFindings serves the findings journal.
const PathFindings = "/api/v1/findings"

// FindingsHandler serves GET /api/v1/findings?kind=&subject=&active=&since=
// as {"status":"success","data":[finding…]}.
func FindingsHandler(j *Journal) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			writeAPIError(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s is not allowed; use GET", r.Method))
			return
		}
		f, err := ParseFindingFilter(r.URL.Query().Get)
		if err != nil {
			writeAPIError(w, http.StatusBadRequest, err)
			return
		}
		fs, err := j.Findings(f)
		if err != nil {
			writeAPIError(w, http.StatusInternalServerError, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": nonNil(fs)})
	})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
