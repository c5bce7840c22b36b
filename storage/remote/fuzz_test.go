package remote

import (
	"slices"
	"strings"
	"testing"

	"github.com/ballast-io/ballast/models"
)

// FuzzParseQueryResponse: whatever a remote store answers to a query,
// parsing does not panic and the series it returns have their labels
// sorted by name and one value per timestamp. Seeded with vector, matrix, scalar and error answers as
// Prometheus and VictoriaMetrics write them.
func FuzzParseQueryResponse(f *testing.F) {
	for _, s := range []string{
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"up","job":"a"},"value":[1700000000.123,"1"]}]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"b":"2","a":"1"},"values":[[1700000000,"1.5"],[1700000015,"NaN"],[1700000030,"+Inf"]]}]}}`,
		`{"status":"success","data":{"resultType":"scalar","result":[1700000000,"42"]}}`,
		`{"status":"error","errorType":"bad_data","error":"parse error"}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1e300,"-1e400"]}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ss, err := parseQueryResponse(body)
		if err != nil {
			return
		}
		for _, s := range ss {
			if !slices.IsSortedFunc(s.Labels, func(a, b models.Label) int { return strings.Compare(a.Name, b.Name) }) {
				t.Fatalf("labels not sorted: %v", s.Labels)
			}
			if len(s.Timestamps) != len(s.Values) {
				t.Fatalf("%d timestamps, %d values", len(s.Timestamps), len(s.Values))
			}
		}
	})
}
