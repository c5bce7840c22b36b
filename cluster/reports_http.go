package cluster

import (
	"net/http"
	"path/filepath"
	"strings"
)

// PathCapacityReport serves the capacity forecasts report the mds writes
// (report.html, report.md, report.json).
const PathCapacityReport = "/api/v1/reports/capacity/"

// reportFiles are the files a report folder holds; nothing else in it is
// served.
var reportFiles = map[string]string{
	"report.html": "text/html; charset=utf-8",
	"report.md":   "text/markdown; charset=utf-8",
	"report.json": "application/json",
}

// CapacityReportHandler serves the report files in dir under
// PathCapacityReport; the bare path serves report.html.
func CapacityReportHandler(dir string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, PathCapacityReport)
		if name == "" {
			name = "report.html"
		}
		ct, ok := reportFiles[name]
		if !ok {
			http.Error(w, "no such report file; want report.html, report.md or report.json", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFile(w, r, filepath.Join(dir, name))
	})
}
