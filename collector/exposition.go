package collector

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/ballast-io/ballast/models"
)

// textFamily is what WriteText needs of a metric family's descriptor: its
// help, type and label names, and the label order sorted by name.
type textFamily struct {
	desc  models.MetricDesc
	order []int // indexes of desc.Labels sorted by label name
}

var (
	textFamiliesOnce sync.Once
	textFamilies     map[string]*textFamily
)

func lookupTextFamily(name string) *textFamily {
	textFamiliesOnce.Do(func() {
		textFamilies = make(map[string]*textFamily, len(models.Metrics))
		for _, d := range models.Metrics {
			f := &textFamily{desc: d, order: make([]int, len(d.Labels))}
			for i := range f.order {
				f.order[i] = i
			}
			sort.Slice(f.order, func(a, b int) bool { return d.Labels[f.order[a]] < d.Labels[f.order[b]] })
			textFamilies[d.Name] = f
		}
	})
	return textFamilies[name]
}

// WriteText writes samples in Prometheus text exposition format (0.0.4):
// families sorted by name with HELP and TYPE lines from models.Metrics,
// labels in name order, series sorted by label values, floats and escapes
// as expfmt writes them — byte for byte what the agent's promhttp handler
// serves for the same samples (TestWriteTextMatchesExpfmt holds the two
// together over every fixture). It is ballast's one exposition encoder:
// the cluster twin renders its nodes with it and the golden tests record
// it. It is hand-written, not a prometheus registry plus expfmt, because
// building a registry and protobuf families on every call made rendering
// the twin's nodes cost more than simulating them; this does the same work
// with a sort and one buffer. A sample without a descriptor, with the
// wrong number of label values, or repeating a series is an error.
func WriteText(w io.Writer, samples []Sample) error {
	idx := make([]int, len(samples))
	for i := range idx {
		idx[i] = i
	}
	fams := make([]*textFamily, len(samples))
	for i, s := range samples {
		f := lookupTextFamily(s.Name)
		if f == nil {
			return fmt.Errorf("cannot expose sample %q: no descriptor in models.Metrics", s.Name)
		}
		if len(s.Values) != len(f.desc.Labels) {
			return fmt.Errorf("cannot expose sample %q: %d label values for %d labels", s.Name, len(s.Values), len(f.desc.Labels))
		}
		fams[i] = f
	}
	// series are unique (checked below), so an unstable sort gives one
	// order
	slices.SortFunc(idx, func(a, b int) int {
		sa, sb := &samples[a], &samples[b]
		if c := strings.Compare(sa.Name, sb.Name); c != 0 {
			return c
		}
		for _, k := range fams[a].order {
			if c := strings.Compare(sa.Values[k], sb.Values[k]); c != 0 {
				return c
			}
		}
		return 0
	})
	var b strings.Builder
	b.Grow(len(samples) * 96)
	var num []byte
	for n, i := range idx {
		s := &samples[i]
		f := fams[i]
		if n > 0 && samples[idx[n-1]].Name == s.Name {
			if sameLabels(&samples[idx[n-1]], s) {
				return fmt.Errorf("cannot expose sample %q: duplicate series %v", s.Name, s.Values)
			}
		} else {
			b.WriteString("# HELP ")
			b.WriteString(s.Name)
			b.WriteByte(' ')
			escape(&b, f.desc.Help, false)
			b.WriteString("\n# TYPE ")
			b.WriteString(s.Name)
			b.WriteByte(' ')
			b.WriteString(string(f.desc.Type))
			b.WriteByte('\n')
		}
		b.WriteString(s.Name)
		if len(f.order) > 0 {
			b.WriteByte('{')
			for j, k := range f.order {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString(f.desc.Labels[k])
				b.WriteString(`="`)
				escape(&b, s.Values[k], true)
				b.WriteByte('"')
			}
			b.WriteByte('}')
		}
		b.WriteByte(' ')
		num = appendFloat(num[:0], s.Value)
		b.Write(num)
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func sameLabels(a, b *Sample) bool {
	for i := range a.Values {
		if a.Values[i] != b.Values[i] {
			return false
		}
	}
	return true
}

// appendFloat formats v as expfmt's writeFloat does.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case v == 1:
		return append(b, '1')
	case v == 0:
		return append(b, '0')
	case v == -1:
		return append(b, "-1"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// needsEscape reports whether s holds a backslash, a newline or (for
// label values) a double quote.
func needsEscape(s string, quote bool) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c == '\n' || (quote && c == '"') {
			return true
		}
	}
	return false
}

// escape writes s escaped as the exposition format wants: backslash and
// newline always, the double quote only inside label values (quote).
func escape(b *strings.Builder, s string, quote bool) {
	if !needsEscape(s, quote) {
		b.WriteString(s)
		return
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '"' && quote:
			b.WriteString(`\"`)
		default:
			b.WriteByte(c)
		}
	}
}
