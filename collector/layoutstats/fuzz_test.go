package layoutstats

import (
	"os"
	"testing"
)

// FuzzDecodeBatch: whatever the body of POST /api/v1/layoutstats, the
// strict decoder does not panic, and a batch it accepts decodes the same
// way again from its own bytes (no state carried between calls). Seeded
// with the fixture batches (one with I/O errors) and the strictness cases
// of issue 10 (duplicate and case-variant keys).
func FuzzDecodeBatch(f *testing.F) {
	b, err := os.ReadFile("testdata/batch.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	if b, err = os.ReadFile("testdata/batch-errors.json"); err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"client_id":"a","client_id":"b","reports":[]}`))
	f.Add([]byte(`{"Client_ID":"a","reports":[]}`))
	f.Add([]byte(`{"client_id":"a","reports":[{"ffis_offset":18446744073709551615}]} trailing`))
	f.Fuzz(func(t *testing.T, body []byte) {
		b1, err1 := DecodeBatch(body)
		b2, err2 := DecodeBatch(body)
		if (err1 == nil) != (err2 == nil) || (b1 == nil) != (b2 == nil) {
			t.Fatalf("two decodes of the same body differ: %v / %v", err1, err2)
		}
	})
}
