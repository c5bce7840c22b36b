package layoutstats

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/ballast-io/ballast/models"
)

// checkKeys walks the JSON in data and refuses a key that appears twice in
// one object or that holds an upper-case letter, naming its path.
// encoding/json accepts both (the last duplicate wins; "CLIENT_ID" fills
// client_id), so a sender's typo or a tampered batch would be read as
// something it did not say. Every LAYOUTSTATS field name is lower case
// (RFC 8435's XDR names). Written by hand because encoding/json/v2, which
// refuses both, is still an experiment in Go 1.26. Syntax errors are left
// to the decoder, which reports them with their offset.
func checkKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if fe, ok := walkKeys(dec, "").(*models.FieldError); ok {
		return fe
	}
	return nil
}

func walkKeys(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k, _ := kt.(string)
			p := join(path, k)
			if seen[k] {
				return &models.FieldError{Path: p, Reason: "appears twice in one object"}
			}
			for i := 0; i < len(k); i++ {
				if c := k[i]; c >= 'A' && c <= 'Z' {
					return &models.FieldError{Path: p, Reason: "field names are lower case (RFC 8435's XDR names, see docs/layoutstats.md)"}
				}
			}
			seen[k] = true
			if err := walkKeys(dec, p); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := walkKeys(dec, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}
