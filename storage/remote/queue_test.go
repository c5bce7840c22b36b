package remote

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ballast-io/ballast/storage"
)

func TestQueueOrderBoundAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := openQueue(path, 1000)
	if err != nil {
		t.Fatal(err)
	}
	body := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 300) }
	var dropped, droppedBlocks int64
	for i := range 5 {
		d, b, err := q.push(10+i, body(i))
		if err != nil {
			t.Fatal(err)
		}
		dropped += d
		droppedBlocks += b
	}
	// 5 × 300 bytes into 1000: the two oldest blocks (10 and 11 samples) go.
	if dropped != 21 || droppedBlocks != 2 {
		t.Fatalf("dropped %d samples in %d blocks; want 21 in 2", dropped, droppedBlocks)
	}
	if b, n, blocks := q.stats(); b != 900 || n != 12+13+14 || blocks != 3 {
		t.Fatalf("stats = %d bytes, %d samples, %d blocks; want 900, 39, 3", b, n, blocks)
	}
	blk, ok, err := q.peek()
	if err != nil || !ok || blk.samples != 12 || !bytes.Equal(blk.body, body(2)) {
		t.Fatalf("peek = %d samples, ok %v, err %v; want the block of 12", blk.samples, ok, err)
	}
	if err := q.remove(blk.seq); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.push(1, make([]byte, 2000)); err == nil || !strings.Contains(err.Error(), "larger than the whole queue") {
		t.Fatalf("push of an oversized block: err %v; want larger than the whole queue", err)
	}
	q.close()

	q, err = openQueue(path, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer q.close()
	if b, n, blocks := q.stats(); b != 600 || n != 27 || blocks != 2 {
		t.Fatalf("after reopen: %d bytes, %d samples, %d blocks; want 600, 27, 2", b, n, blocks)
	}
	blk, _, _ = q.peek()
	if blk.samples != 13 {
		t.Fatalf("after reopen the head holds %d samples; want 13", blk.samples)
	}
	if _, _, err := q.push(5, body(9)); err != nil {
		t.Fatal(err)
	}
	if _, n, _ := q.stats(); n != 32 {
		t.Fatalf("after a push past the old tail: %d samples; want 32", n)
	}
}

func TestParseQueryResponse(t *testing.T) {
	for _, tc := range []struct {
		name, body, want, err string
	}{
		{name: "vector", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"m","b":"2","a":"1"},"value":[1700000000.123,"42.5"]}]}}`,
			want: `m [{a 1} {b 2}] [1700000000123] [42.5]`},
		{name: "matrix", body: `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"x":"y"},"values":[[10,"1"],[20,"NaN"],[30,"+Inf"]]}]}}`,
			want: ` [{x y}] [10000 20000 30000] [1 NaN +Inf]`},
		{name: "scalar", body: `{"status":"success","data":{"resultType":"scalar","result":[5,"3"]}}`, want: ` [] [5000] [3]`},
		{name: "error", body: `{"status":"error","errorType":"bad_data","error":"parse error at char 3"}`, err: "bad_data: parse error at char 3"},
		{name: "not json", body: `<html>bad gateway</html>`, err: "not JSON"},
		{name: "bad point", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}`, err: "value is not a number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseQueryResponse([]byte(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got err %v; want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("got %d series; want 1", len(got))
			}
			if s := render(got[0]); s != tc.want {
				t.Fatalf("got %s; want %s", s, tc.want)
			}
		})
	}
}

func render(s storage.Series) string {
	return fmt.Sprintf("%s %v %v %v", s.Name, s.Labels, s.Timestamps, s.Values)
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{DataDir: "d", WriteURL: "http://a/api/v1/write", QueryURL: "http://b"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	for _, tc := range []struct {
		mod  func(*Options)
		want string
	}{
		{func(o *Options) { o.WriteURL = "" }, "storage.remote.write_url: must not be empty"},
		{func(o *Options) { o.QueryURL = "ftp://x" }, `storage.remote.query_url: "ftp://x" is not an http:// or https:// URL`},
		{func(o *Options) { o.WriteURL = "http://u:secret@a/w" }, "carries credentials"},
		{func(o *Options) { o.Tenant = "a:b" }, `storage.remote.tenant: "a:b"`},
		{func(o *Options) { o.Auth.BasicUser = "u" }, "username and password_file go together"},
		{func(o *Options) { o.QueueMaxBytes = 10 }, "storage.remote.queue_max_bytes: 10 is below"},
		{func(o *Options) { o.FlushURLs = []string{"x"} }, "storage.remote.flush_urls[0]"},
	} {
		o := ok
		tc.mod(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v; want an error containing %q", err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q leaks a password", err)
		}
	}
}
