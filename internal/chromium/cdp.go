package chromium

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Session drives one headless Chromium page over the DevTools protocol,
// for tests that must click and read what a page's scripts did. It talks
// over --remote-debugging-pipe (Chromium reads commands on fd 3 and writes
// on fd 4, one JSON message per NUL-terminated frame), so it needs no
// WebSocket client and opens no port.
//
// Written here rather than taken from chromedp: a test helper using four
// protocol methods does not justify a dependency tree in the product's
// module.
type Session struct {
	t       testing.TB
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	mu      sync.Mutex
	nextID  int
	session string
}

// NewSession starts Chromium (bin from Find) with a blank page and
// attaches to it. It is closed when the test ends.
func NewSession(t testing.TB, bin string, w, h int) *Session {
	t.Helper()
	toChrome, chromeIn, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	chromeOut, fromChrome, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args := append(Flags(t.TempDir()), "--remote-debugging-pipe", fmt.Sprintf("--window-size=%d,%d", w, h), "about:blank")
	cmd := exec.Command(bin, args...)
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome} // fd 3, fd 4
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start chromium: %v", err)
	}
	toChrome.Close()
	fromChrome.Close()
	s := &Session{t: t, cmd: cmd, in: chromeIn, out: bufio.NewReader(chromeOut)}
	t.Cleanup(s.close)
	var target struct {
		TargetID string `json:"targetId"`
	}
	s.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct {
		SessionID string `json:"sessionId"`
	}
	s.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	s.session = att.SessionID
	return s
}

func (s *Session) close() {
	s.in.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// call sends one command and waits for its answer, skipping events.
func (s *Session) call(session, method string, params, result any) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	id := s.nextID
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	b, _ := json.Marshal(msg)
	if _, err := s.in.Write(append(b, 0)); err != nil {
		s.t.Fatalf("cannot send %s to chromium: %v", method, err)
	}
	deadline := time.AfterFunc(60*time.Second, func() { s.cmd.Process.Kill() })
	defer deadline.Stop()
	for {
		frame, err := s.out.ReadBytes(0)
		if err != nil {
			s.t.Fatalf("chromium closed the pipe waiting for %s: %v", method, err)
		}
		var resp struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(frame[:len(frame)-1], &resp); err != nil || resp.ID != id {
			continue // an event, or another command's answer
		}
		if resp.Error != nil {
			s.t.Fatalf("chromium %s: %s", method, resp.Error.Message)
		}
		if result != nil {
			if err := json.Unmarshal(resp.Result, result); err != nil {
				s.t.Fatalf("chromium %s: %v", method, err)
			}
		}
		return
	}
}

// Navigate loads url and waits until the document has loaded.
func (s *Session) Navigate(url string) {
	s.t.Helper()
	s.call(s.session, "Page.navigate", map[string]any{"url": url}, nil)
	s.WaitFor(`document.readyState === "complete" && location.href !== "about:blank"`, 30*time.Second)
}

// Eval evaluates a JavaScript expression in the page (promises awaited)
// and stores its value in result (nil to ignore it).
func (s *Session) Eval(expr string, result any) {
	s.t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception *struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	s.call(s.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r)
	if e := r.ExceptionDetails; e != nil {
		msg := e.Text
		if e.Exception != nil {
			msg = e.Exception.Description
		}
		s.t.Fatalf("page threw evaluating %q: %s", expr, msg)
	}
	if result != nil && len(r.Result.Value) > 0 {
		if err := json.Unmarshal(r.Result.Value, result); err != nil {
			s.t.Fatalf("evaluating %q: %v", expr, err)
		}
	}
}

// WaitFor polls a JavaScript condition until it is true or timeout passes.
func (s *Session) WaitFor(cond string, timeout time.Duration) {
	s.t.Helper()
	end := time.Now().Add(timeout)
	for {
		var ok bool
		s.Eval("Boolean("+cond+")", &ok)
		if ok {
			return
		}
		if time.Now().After(end) {
			s.t.Fatalf("page never satisfied %s within %s", cond, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Screenshot writes a PNG of the page from the top of the element that
// from selects ("" for the top of the page), up to maxHeight pixels tall.
func (s *Session) Screenshot(path, from string, maxHeight int) {
	s.t.Helper()
	var box struct{ Y, W, H float64 }
	s.Eval(`(() => {
		const sel = `+jsString(from)+`;
		const e = sel ? document.querySelector(sel) : null;
		const y = e ? e.getBoundingClientRect().top + window.scrollY : 0;
		return {Y: y, W: document.documentElement.clientWidth, H: document.documentElement.scrollHeight - y};
	})()`, &box)
	var shot struct {
		Data []byte `json:"data"` // base64 in JSON, decoded by encoding/json
	}
	s.call(s.session, "Page.captureScreenshot", map[string]any{
		"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": box.Y, "width": box.W, "height": min(box.H, float64(maxHeight)), "scale": 1},
	}, &shot)
	if err := os.WriteFile(path, shot.Data, 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
