// Package units holds the small value types that config files of several
// packages share, so that every section of a config reads them alike.
package units

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration that YAML reads from Go duration strings
// ("15s", "2h30m") and also accepts d (24h) and w (7d) units, as operators
// write retention.
type Duration time.Duration

// UnmarshalYAML parses a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML renders the duration in its shortest Go form.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// String renders the duration, in days when it is a whole number of them.
func (d Duration) String() string {
	if d > 0 && time.Duration(d)%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(time.Duration(d)/(24*time.Hour)), 10) + "d"
	}
	return time.Duration(d).String()
}

// ParseDuration parses Go durations plus a trailing d (days) or w (weeks).
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			f, err := strconv.ParseFloat(n, 64)
			if err != nil {
				return 0, fmt.Errorf("cannot parse duration %q", s)
			}
			return time.Duration(f * float64(unit)), nil
		}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("cannot parse duration %q: want a number with a unit such as 15s, 5m, 2h, 30d", s)
	}
	return v, nil
}
