package drivehealth

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ballast-io/ballast/models"
)

// Drive is one drive's daily history from a Backblaze-format CSV.
type Drive struct {
	// Serial and Model identify the drive.
	Serial, Model string
	// Days holds one ATA observation per day, sorted by time.
	Days []Observation
	// Failed is true when a row has failure=1; FailDate is that row's date
	// (the drive's last day).
	Failed   bool
	FailDate time.Time
}

// backblazeColumn is the prefix and suffix of the SMART raw-value columns;
// smart_5_raw is ATA attribute 5's raw value. Every such column goes
// through the same ATA attribute mapping as the agents' series (Readings),
// so only the attributes that mapping knows are used.
const backblazeColumnPrefix, backblazeColumnSuffix = "smart_", "_raw"

// ParseBackblaze reads a Backblaze "Hard Drive Data and Stats" CSV (one row
// per drive per day: date, serial_number, model, capacity_bytes, failure,
// smart_N_normalized, smart_N_raw…) into drives sorted by serial. Empty
// SMART cells are unknown. Rows after a drive's failure row, two rows for
// one drive and day, and unparsable cells are errors naming the line.
func ParseBackblaze(r io.Reader) ([]Drive, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	rec, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("cannot read backblaze csv header: %w", err)
	}
	header := append([]string(nil), rec...) // ReuseRecord reuses rec

	idx := map[string]int{}
	for i, h := range header {
		idx[h] = i
	}
	for _, c := range []string{"date", "serial_number", "model", "failure"} {
		if _, ok := idx[c]; !ok {
			return nil, fmt.Errorf("cannot parse backblaze csv: header has no %q column", c)
		}
	}
	type col struct {
		i      int
		labels []models.Label
	}
	var cols []col
	for i, h := range header {
		id, isSmart := strings.CutPrefix(h, backblazeColumnPrefix)
		id, isRaw := strings.CutSuffix(id, backblazeColumnSuffix)
		if !isSmart || !isRaw {
			continue
		}
		if _, err := strconv.Atoi(id); err == nil {
			cols = append(cols, col{i, []models.Label{{Name: "attribute_id", Value: id}}})
		}
	}

	byserial := map[string]*Drive{}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read backblaze csv line %d: %w", line, err)
		}
		serial := rec[idx["serial_number"]]
		if serial == "" {
			return nil, fmt.Errorf("cannot parse backblaze csv line %d: empty serial_number", line)
		}
		day, err := time.Parse(time.DateOnly, rec[idx["date"]])
		if err != nil {
			return nil, fmt.Errorf("cannot parse backblaze csv line %d date %q: %w", line, rec[idx["date"]], err)
		}
		snap := newSnapshot(day, ProtocolATA)
		for _, c := range cols {
			s := rec[c.i]
			if s == "" {
				continue
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("cannot parse backblaze csv line %d column %s value %q", line, header[c.i], s)
			}
			snap.add(models.MetricATAAttributeRaw, c.labels, v)
		}
		o := snap.observation()
		d := byserial[serial]
		if d == nil {
			d = &Drive{Serial: serial, Model: rec[idx["model"]]}
			byserial[serial] = d
		}
		switch f := rec[idx["failure"]]; f {
		case "0":
		case "1":
			if d.Failed {
				return nil, fmt.Errorf("cannot parse backblaze csv line %d: drive %q fails twice", line, serial)
			}
			d.Failed, d.FailDate = true, day
		default:
			return nil, fmt.Errorf("cannot parse backblaze csv line %d failure %q: want 0 or 1", line, f)
		}
		d.Days = append(d.Days, o)
	}
	out := make([]Drive, 0, len(byserial))
	for _, d := range byserial {
		sort.SliceStable(d.Days, func(a, b int) bool { return d.Days[a].Time.Before(d.Days[b].Time) })
		for i := 1; i < len(d.Days); i++ {
			if d.Days[i].Time.Equal(d.Days[i-1].Time) {
				return nil, fmt.Errorf("cannot parse backblaze csv: drive %q has two rows for %s", d.Serial, d.Days[i].Time.Format(time.DateOnly))
			}
		}
		if d.Failed && d.Days[len(d.Days)-1].Time.After(d.FailDate) {
			return nil, fmt.Errorf("cannot parse backblaze csv: drive %q has rows after its failure on %s", d.Serial, d.FailDate.Format(time.DateOnly))
		}
		out = append(out, *d)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Serial < out[b].Serial })
	return out, nil
}
