package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math"
)

// decodeMsgpack decodes the msgpack subset TMIO writes (nil, bool, ints,
// floats, strings, arrays, maps) into Go values: []any, map[any]any,
// string, int64, uint64, float64, bool, nil. It is hand-written, test-only,
// because no msgpack module is among ballast's dependencies and the trace
// needs only this small part of the format.
func decodeMsgpack(b []byte) ([]any, error) {
	var out []any
	for i := 0; i < len(b); {
		v, n, err := mpValue(b, i)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		i = n
	}
	return out, nil
}

func mpNeed(b []byte, i, n int) error {
	if i+n > len(b) {
		return fmt.Errorf("cannot decode msgpack at byte %d: need %d bytes, %d left", i, n, len(b)-i)
	}
	return nil
}

func mpValue(b []byte, i int) (any, int, error) {
	if err := mpNeed(b, i, 1); err != nil {
		return nil, 0, err
	}
	t := b[i]
	i++
	fixed := func(n int) ([]byte, int, error) {
		if err := mpNeed(b, i, n); err != nil {
			return nil, 0, err
		}
		return b[i : i+n], i + n, nil
	}
	switch {
	case t <= 0x7f:
		return int64(t), i, nil
	case t >= 0xe0:
		return int64(int8(t)), i, nil
	case t&0xf0 == 0x80:
		return mpMap(b, i, int(t&0x0f))
	case t&0xf0 == 0x90:
		return mpArray(b, i, int(t&0x0f))
	case t&0xe0 == 0xa0:
		s, n, err := fixed(int(t & 0x1f))
		return string(s), n, err
	}
	switch t {
	case 0xc0:
		return nil, i, nil
	case 0xc2, 0xc3:
		return t == 0xc3, i, nil
	case 0xca:
		s, n, err := fixed(4)
		if err != nil {
			return nil, 0, err
		}
		return float64(math.Float32frombits(binary.BigEndian.Uint32(s))), n, nil
	case 0xcb:
		s, n, err := fixed(8)
		if err != nil {
			return nil, 0, err
		}
		return math.Float64frombits(binary.BigEndian.Uint64(s)), n, nil
	case 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3:
		size := 1 << ((t - 0xcc) % 4)
		s, n, err := fixed(size)
		if err != nil {
			return nil, 0, err
		}
		var u uint64
		for _, c := range s {
			u = u<<8 | uint64(c)
		}
		if t >= 0xd0 { // signed: sign-extend
			shift := 64 - 8*size
			return int64(u<<shift) >> shift, n, nil
		}
		return u, n, nil
	case 0xd9, 0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xdf:
		size := map[byte]int{0xd9: 1, 0xda: 2, 0xdb: 4, 0xdc: 2, 0xdd: 4, 0xde: 2, 0xdf: 4}[t]
		s, n, err := fixed(size)
		if err != nil {
			return nil, 0, err
		}
		l := 0
		for _, c := range s {
			l = l<<8 | int(c)
		}
		i = n
		switch t {
		case 0xdc, 0xdd:
			return mpArray(b, i, l)
		case 0xde, 0xdf:
			return mpMap(b, i, l)
		}
		str, n, err := fixed(l)
		return string(str), n, err
	}
	return nil, 0, fmt.Errorf("cannot decode msgpack at byte %d: unsupported type 0x%02x", i-1, t)
}

func mpArray(b []byte, i, n int) (any, int, error) {
	out := make([]any, 0, n)
	for range n {
		v, j, err := mpValue(b, i)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, v)
		i = j
	}
	return out, i, nil
}

func mpMap(b []byte, i, n int) (any, int, error) {
	out := make(map[any]any, n)
	for range n {
		k, j, err := mpValue(b, i)
		if err != nil {
			return nil, 0, err
		}
		v, j, err := mpValue(b, j)
		if err != nil {
			return nil, 0, err
		}
		out[k] = v
		i = j
	}
	return out, i, nil
}

// num converts a decoded msgpack number to float64.
func num(v any) (float64, error) {
	switch x := v.(type) {
	case int64:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case float64:
		return x, nil
	}
	return 0, fmt.Errorf("not a number: %T %v", v, v)
}
