package drivehealth

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"
)

// FuzzParseBackblaze: whatever a Backblaze drive-stats CSV holds (`ballast
// drives train`), parsing does not panic. Seeded with the header and
// first rows of the 2013 extract in testdata.
func FuzzParseBackblaze(f *testing.F) {
	fh, err := os.Open("testdata/backblaze-2013/drives.csv")
	if err != nil {
		f.Fatal(err)
	}
	defer fh.Close()
	var head strings.Builder
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<20)
	for i := 0; i < 20 && sc.Scan(); i++ {
		head.WriteString(sc.Text() + "\n")
		if i == 1 || i == 19 {
			f.Add([]byte(head.String()))
		}
	}
	f.Add([]byte("date,serial_number,model,capacity_bytes,failure,smart_5_raw\n2013-04-10,S1,m,100,0,\n2013-04-10,S1,m,100,1,3\n"))
	f.Fuzz(func(t *testing.T, b []byte) { ParseBackblaze(bytes.NewReader(b)) })
}

// FuzzParseModel: whatever a model file holds (`drives score --model`),
// decoding and validation do not panic. Seeded with the shipped model.
func FuzzParseModel(f *testing.F) {
	f.Add(EmbeddedModelJSON())
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) { ParseModel(bytes.NewReader(b)) })
}
