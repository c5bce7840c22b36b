package alert

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// sink is a receiver run by a test on loopback: it records what arrives
// and answers as told (2xx by default).
type sink struct {
	srv *httptest.Server

	mu     sync.Mutex
	status int           // answer; 0 means 200
	delay  time.Duration // before answering
	got    []delivery
	tried  int
}

type delivery struct {
	ID      string
	Header  http.Header
	Body    []byte
	Webhook WebhookMessage // for webhook receivers
	Alerts  []Alert        // for Alertmanager receivers
}

func newSink(t *testing.T) *sink {
	t.Helper()
	s := &sink{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	status, delay := s.status, s.delay
	s.tried++
	s.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if status != 0 && status/100 != 2 {
		http.Error(w, http.StatusText(status), status)
		return
	}
	d := delivery{ID: r.Header.Get(HeaderNotificationID), Header: r.Header.Clone(), Body: body}
	if r.URL.Path == "/api/v2/alerts" {
		if err := json.Unmarshal(body, &d.Alerts); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	} else if err := json.Unmarshal(body, &d.Webhook); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.got = append(s.got, d)
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *sink) set(status int, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.delay = status, delay
}

func (s *sink) deliveries() []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery(nil), s.got...)
}

func (s *sink) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tried
}
