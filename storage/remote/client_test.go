package remote

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestBearerTokenFromFile: the token is read from its file, replaces any
// Authorization the request carried (a proxied caller's), and a rotated
// file is picked up without a restart.
func TestBearerTokenFromFile(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("first\n"), 0o600)
	c, err := newHTTPClient(ClientAuth{BearerTokenFile: tok}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Authorization", "Bearer the-callers")
	if _, err := c.Do(req); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(tok, []byte("second"), 0o600)
	later := time.Now().Add(time.Second)
	os.Chtimes(tok, later, later)
	req, _ = http.NewRequest(http.MethodGet, srv.URL, nil)
	if _, err := c.Do(req); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "Bearer first" || got[1] != "Bearer second" {
		t.Fatalf("got Authorization %q; want [Bearer first, Bearer second]", got)
	}
	if _, err := newHTTPClient(ClientAuth{BearerTokenFile: filepath.Join(t.TempDir(), "missing")}, time.Second); err == nil {
		t.Fatal("a missing token file was accepted")
	}
}
