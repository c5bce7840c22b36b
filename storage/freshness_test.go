package storage

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// instantValues asks /api/v1/query at "now" (no time parameter, as a
// dashboard's first look would) and returns the values found.
func instantValues(t *testing.T, expr string) []string {
	t.Helper()
	resp, err := http.Get(testURL + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct {
		Status string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || ans.Status != "success" {
		t.Fatalf("query %s: %d %v %+v", expr, resp.StatusCode, err, ans)
	}
	var vs []string
	for _, r := range ans.Data.Result {
		vs = append(vs, fmt.Sprint(r.Value[1]))
	}
	return vs
}

// waitRefreshed waits until a refresh that started after rows counted up
// to n has finished. It waits for the refresher's own progress, not for a
// time; the deadline only turns a stopped refresher into a failure.
func waitRefreshed(t *testing.T, n uint64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for testStore.refreshed.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("no refresh covered row %d within a minute (refreshed up to %d, refresh interval %s)",
				n, testStore.refreshed.Load(), testStore.opts.RefreshInterval)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRefreshMakesAcknowledgedRowsSearchable: a new series and a new
// sample of an existing one are found by the first query after the next
// refresh, without a Flush call — also when a query for the series before
// it existed had cached an empty answer in lib/storage's tag-filters cache.
func TestRefreshMakesAcknowledgedRowsSearchable(t *testing.T) {
	if testStore.opts.RefreshInterval <= 0 {
		t.Fatalf("refresher is off (RefreshInterval %s); the default must be on", testStore.opts.RefreshInterval)
	}
	for i := 0; i < 3; i++ {
		sel := fmt.Sprintf(`fresh_probe{run="%d",probe="%d"}`, time.Now().UnixNano(), i)
		if vs := instantValues(t, sel); len(vs) != 0 {
			t.Fatalf("%s before it was written: %v", sel, vs)
		}
		now := time.Now().UnixMilli()
		if code, body := postText(t, fmt.Sprintf("%s 1 %d\n", sel, now)); code != http.StatusNoContent {
			t.Fatalf("import: %d %s", code, body)
		}
		waitRefreshed(t, testStore.RowsAdded())
		if vs := instantValues(t, sel); len(vs) != 1 || vs[0] != "1" {
			t.Fatalf("new series %s after the refresh: got %v, want [1]", sel, vs)
		}

		// The same series again, a new value.
		if code, body := postText(t, fmt.Sprintf("%s 2 %d\n", sel, now+1)); code != http.StatusNoContent {
			t.Fatalf("import: %d %s", code, body)
		}
		waitRefreshed(t, testStore.RowsAdded())
		if vs := instantValues(t, sel); len(vs) != 1 || vs[0] != "2" {
			t.Fatalf("existing series %s after the refresh: got %v, want [2]", sel, vs)
		}
	}
}
