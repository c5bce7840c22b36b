package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
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

// afterRefreshInterval waits one refresh interval: a query then must find
// every row acknowledged before the wait, whatever refreshes ran before.
// It is the documented bound (a row acknowledged RefreshInterval before a
// query is searchable), not a guess at how long a refresh takes.
func afterRefreshInterval() { time.Sleep(testStore.opts.RefreshInterval) }

// TestRefreshMakesAcknowledgedRowsSearchable: a new series and a new
// sample of an existing one are found by the first query one refresh
// interval after their acknowledgement, without a Flush call — also when a
// query for the series before it existed had cached an empty answer in
// lib/storage's tag-filters cache.
func TestRefreshMakesAcknowledgedRowsSearchable(t *testing.T) {
	if testStore.opts.RefreshInterval <= 0 {
		t.Fatalf("refresh is off (RefreshInterval %s); the default must be on", testStore.opts.RefreshInterval)
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
		afterRefreshInterval()
		if vs := instantValues(t, sel); len(vs) != 1 || vs[0] != "1" {
			t.Fatalf("new series %s one refresh interval after its acknowledgement: got %v, want [1]", sel, vs)
		}

		// The same series again, a new value.
		if code, body := postText(t, fmt.Sprintf("%s 2 %d\n", sel, now+1)); code != http.StatusNoContent {
			t.Fatalf("import: %d %s", code, body)
		}
		afterRefreshInterval()
		if vs := instantValues(t, sel); len(vs) != 1 || vs[0] != "2" {
			t.Fatalf("existing series %s one refresh interval after its acknowledgement: got %v, want [2]", sel, vs)
		}
	}
}

// TestRefreshRunsOnRead: rows that nobody queries cause no refresh; the
// first query after them runs one, in-process queries as well as the HTTP
// API, and a query with nothing new written runs none.
func TestRefreshRunsOnRead(t *testing.T) {
	sel := fmt.Sprintf(`fresh_read{run="%d"}`, time.Now().UnixNano())
	instantValues(t, sel) // whatever other tests left unrefreshed
	before := testStore.refreshes.Get()
	for i := range 3 {
		if code, body := postText(t, fmt.Sprintf("%s %d %d\n", sel, i, time.Now().UnixMilli())); code != http.StatusNoContent {
			t.Fatalf("import: %d %s", code, body)
		}
		afterRefreshInterval()
	}
	afterRefreshInterval()
	if got := testStore.refreshes.Get(); got != before {
		t.Fatalf("%d refreshes while rows were written and nothing queried; want 0", got-before)
	}
	rs, err := testStore.Query(context.Background(), sel, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Values[0] != 2 {
		t.Fatalf("in-process query of %s after three writes: %+v; want one series at 2", sel, rs)
	}
	if got := testStore.refreshes.Get(); got != before+1 {
		t.Fatalf("the first query after the writes ran %d refreshes; want 1", got-before)
	}
	afterRefreshInterval()
	if vs := instantValues(t, sel); len(vs) != 1 || vs[0] != "2" {
		t.Fatalf("HTTP query of %s: %v; want [2]", sel, vs)
	}
	if got := testStore.refreshes.Get(); got != before+1 {
		t.Fatalf("a query with nothing written since the last refresh ran %d more; want 0", got-before-1)
	}
}

// TestRefreshDeferredWhileOverloaded: while the function given to
// DeferRefreshWhile reports an overload, a query runs no refresh (and
// counts the deferred one); once it does not, the next query refreshes
// and finds the row.
func TestRefreshDeferredWhileOverloaded(t *testing.T) {
	var overloaded atomic.Bool
	testStore.DeferRefreshWhile(overloaded.Load)
	defer testStore.DeferRefreshWhile(nil)
	sel := fmt.Sprintf(`fresh_deferred{run="%d"}`, time.Now().UnixNano())
	instantValues(t, sel) // whatever other tests left unrefreshed
	refreshes, deferred := testStore.refreshes.Get(), testStore.refreshSkips.Get()
	overloaded.Store(true)
	if code, body := postText(t, fmt.Sprintf("%s 1 %d\n", sel, time.Now().UnixMilli())); code != http.StatusNoContent {
		t.Fatalf("import: %d %s", code, body)
	}
	afterRefreshInterval()
	instantValues(t, sel)
	if got := testStore.refreshes.Get() - refreshes; got != 0 {
		t.Errorf("query during an overload ran %d refreshes; want 0", got)
	}
	if got := testStore.refreshSkips.Get() - deferred; got != 1 {
		t.Errorf("ballast_storage_refreshes_deferred_total grew by %d; want 1", got)
	}
	overloaded.Store(false)
	if vs := instantValues(t, sel); len(vs) != 1 || vs[0] != "1" {
		t.Fatalf("%s after the overload: got %v, want [1]", sel, vs)
	}
	if got := testStore.refreshes.Get() - refreshes; got != 1 {
		t.Errorf("the first query after the overload ran %d refreshes; want 1", got)
	}
}
