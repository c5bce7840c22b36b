package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/ballast-io/ballast/actuator"
	"github.com/ballast-io/ballast/cluster/agent/readahead"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage"
)

// PathReadAheadSync is where GPU nodes' agents POST their read-ahead report
// and get the desired state back (act scope; docs/readahead.md).
const PathReadAheadSync = readahead.SyncPath

// readAheadHandler serves PathReadAheadSync.
type readAheadHandler struct{ m *MDS }

func (h readAheadHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		storage.WriteAPIError(w, http.StatusUnsupportedMediaType, fmt.Errorf("Content-Type %q: want application/json", r.Header.Get("Content-Type")))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil {
		storage.WriteAPIError(w, http.StatusBadRequest, fmt.Errorf("cannot read the body: %w", err))
		return
	}
	if len(body) > 1<<20 {
		storage.WriteAPIError(w, http.StatusRequestEntityTooLarge, errors.New("read-ahead report is larger than 1 MiB"))
		return
	}
	var rep models.ReadAheadReport
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		storage.WriteAPIError(w, http.StatusBadRequest, fmt.Errorf("cannot decode the read-ahead report: %w", err))
		return
	}
	e := h.m.engine
	if e == nil {
		storage.WriteAPIError(w, http.StatusServiceUnavailable, errors.New("the actions engine is not running"))
		return
	}
	want, err := e.SyncReadAhead(rep, h.m.Now())
	switch {
	case actuator.IsNotLeader(err):
		storage.WriteAPIError(w, http.StatusServiceUnavailable, err)
	case err != nil:
		storage.WriteAPIError(w, http.StatusBadRequest, fmt.Errorf("bad read-ahead report: %w", err))
	default:
		writeSuccess(w, want)
	}
}
