package twin

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/ballast-io/ballast/collector"
	"github.com/ballast-io/ballast/models"
)

// family is what the encoder needs of a metric family's descriptor: its
// help, type and label names, and the label order sorted by name.
type family struct {
	desc  models.MetricDesc
	order []int // indexes of desc.Labels sorted by label name
}

var (
	familiesOnce sync.Once
	families     map[string]*family
)

func lookupFamily(name string) *family {
	familiesOnce.Do(func() {
		families = make(map[string]*family, len(models.Metrics))
		for _, d := range models.Metrics {
			f := &family{desc: d, order: make([]int, len(d.Labels))}
			for i := range f.order {
				f.order[i] = i
			}
			sort.Slice(f.order, func(a, b int) bool { return d.Labels[f.order[a]] < d.Labels[f.order[b]] })
			families[d.Name] = f
		}
	})
	return families[name]
}

// writeExposition writes samples as Prometheus text exposition, byte for
// byte what collector.WriteText writes (families sorted by name, HELP and
// TYPE lines, labels in name order, series sorted by label values, floats
// formatted as expfmt does; TestExpositionMatchesCollector holds the two
// together). It is hand-written because WriteText builds a registry and
// protobuf families on every call, which made rendering the twin's nodes
// cost more than simulating them; this encoder does the same work with a
// sort and one buffer.
func writeExposition(w io.Writer, samples []collector.Sample) error {
	idx := make([]int, len(samples))
	for i := range idx {
		idx[i] = i
	}
	fams := make([]*family, len(samples))
	for i, s := range samples {
		f := lookupFamily(s.Name)
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

func sameLabels(a, b *collector.Sample) bool {
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
