package hostabi

import (
	"context"
	"encoding/binary"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"
	"k8s.io/klog/v2"

	"github.com/wasmsched/wasmsched/guest-sdk/abi"
	"github.com/wasmsched/wasmsched/guest-sdk/abi/fields"
	"github.com/wasmsched/wasmsched/guest-sdk/model"
)

// Funcs implements abi.HostFunctions, which gives their signatures: the
// functions here, the node table's (table.go) and the gates' and patches'
// (gates.go), put together once; nothing adds to it later. Every host
// function validates its pointers and lengths against guest memory and
// answers abi.BadArgs instead of trapping; none of them can make the host
// read or write outside the calling instance's memory. The runtime adds
// them to each wazero runtime (wrapped to count toward deadline checks).
var Funcs = mergeFuncs(callFuncs, podFuncs, nodeFuncs, clusterFuncs, tableFuncs, gateFuncs, counterFuncs, permitFuncs, objectFuncs)

// mergeFuncs puts tables of host functions together; a name in two of
// them is a bug, caught at start.
func mergeFuncs(tables ...map[string]api.GoModuleFunc) map[string]api.GoModuleFunc {
	out := map[string]api.GoModuleFunc{}
	for _, t := range tables {
		for name, fn := range t {
			if _, dup := out[name]; dup {
				panic("host function " + name + " is implemented twice")
			}
			out[name] = fn
		}
	}
	return out
}

// callFuncs are the host functions of the call itself: its status, config, log,
// cycle state, and the batch and score functions.
var callFuncs = map[string]api.GoModuleFunc{
	abi.FnSetStatus: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		code := int32(s[0])
		ptr, n := uint32(s[1]), uint32(s[2])
		if n > abi.MaxReasonLength {
			n = abi.MaxReasonLength
		}
		reason, ok := m.Memory().Read(ptr, n)
		if !ok {
			reason = []byte("(reason pointer out of range)")
		}
		in.SetStatus(code, reason)
	},
	abi.FnPreFilterNodes: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Kind != abi.PreFilter || in.Cycle == nil {
			s[0] = retNotAvailable
			return
		}
		b, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		if !ok {
			s[0] = retBadArgs
			return
		}
		r := abi.NewListReader(b)
		names := make([]string, 0, min(r.Len(), len(b)/4)) // each name takes 4 bytes at least: a count cannot size the slice
		for r.Len() > 0 {
			n, ok := r.Next()
			if !ok {
				s[0] = retBadArgs
				return
			}
			names = append(names, string(n))
		}
		if r.Err() {
			s[0] = retBadArgs
			return
		}
		in.Cycle.NodeNames, in.Cycle.NodeNamesSet = names, true
		s[0] = 0
	},
	abi.FnConfig: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		s[0] = writeOut(m, s[0], s[1], in.Policy.Config())
	},
	abi.FnLog: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		level := klog.Level(int32(s[0]))
		if level < 0 {
			level = 0
		}
		if !klog.V(level).Enabled() || uint32(s[2]) > MaxLogSize || in.Policy.LogPass(1) == 0 {
			return
		}
		b, ok := m.Memory().Read(uint32(s[1]), uint32(s[2]))
		if !ok {
			return
		}
		// The whole line, as klog writes it, within MaxLogSize.
		room := MaxLogSize
		safe := func(b []byte) string {
			s, n, _ := LogSafe(b, room)
			room -= n
			return s
		}
		r := abi.NewListReader(b)
		msg, _ := r.Next()
		m0 := safe(msg)
		kv := []any{"policy", in.Policy.Name()}
		for {
			k, ok := r.Next()
			if !ok {
				break
			}
			v, _ := r.Next()
			kv = append(kv, safe(k), safe(v))
		}
		klog.V(level).InfoS(m0, kv...)
	},
	abi.FnCycleStateSet: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Cycle == nil || uint32(s[1]) > MaxCycleStateSize {
			return
		}
		b, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
		if !ok {
			return
		}
		in.Cycle.State = append([]byte(nil), b...)
		if k := in.Kind; k == abi.Filter || k == abi.Score || k == abi.FilterNodes || k == abi.ScoreNodes {
			// A node's verdict that writes the cycle state passes
			// something to the next node's: each is its own (abi.md §3.4).
			in.Unkeyable = true
		}
	},
	abi.FnCycleStateGet: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Cycle == nil || in.Cycle.State == nil {
			s[0] = retNotFound
			return
		}
		s[0] = writeOut(m, s[0], s[1], in.Cycle.State)
	},
	abi.FnSelectNode: func(ctx context.Context, m api.Module, s []uint64) {
		if CallOf(ctx).selectNode(int32(s[0])) {
			s[0] = 0
		} else {
			s[0] = retBadArgs
		}
	},
	abi.FnScoresGet: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Scores == nil {
			s[0] = retNotAvailable
			return
		}
		n := uint32(s[1])
		if n > uint32(len(in.Scores)) {
			n = uint32(len(in.Scores))
		}
		buf, ok := m.Memory().Read(uint32(s[0]), n*8)
		if !ok {
			s[0] = retBadArgs
			return
		}
		for i := uint32(0); i < n; i++ {
			binary.LittleEndian.PutUint64(buf[i*8:], uint64(in.Scores[i]))
		}
		s[0] = uint64(uint32(len(in.Scores)))
	},
	abi.FnScoresSet: func(ctx context.Context, m api.Module, s []uint64) {
		in := CallOf(ctx)
		if in.Scores == nil {
			s[0] = retNotAvailable
			return
		}
		n := uint32(s[1])
		if n != uint32(len(in.Scores)) {
			s[0] = retBadArgs
			return
		}
		buf, ok := m.Memory().Read(uint32(s[0]), n*8)
		if !ok {
			s[0] = retBadArgs
			return
		}
		for i := uint32(0); i < n; i++ {
			in.Scores[i] = int64(binary.LittleEndian.Uint64(buf[i*8:]))
		}
		in.ScoresSet = true
		s[0] = uint64(n)
	},
}

// Encoded sentinel results (negative values do not convert to uint64 as constants).
var (
	retBadArgs      = api.EncodeI32(abi.BadArgs)
	retNotFound     = api.EncodeI32(abi.NotFound)
	retNotAvailable = api.EncodeI32(abi.NotAvailable)
	retNotDeclared  = api.EncodeI32(abi.NotDeclared)
	retMissing      = api.EncodeI64(abi.MissingQuantity)
)

// lookup implements the (key_ptr, key_len, buf, cap) -> len functions.
func lookup(m api.Module, s []uint64, kv map[string]string) uint64 {
	key, ok := m.Memory().Read(uint32(s[0]), uint32(s[1]))
	if !ok {
		return retBadArgs
	}
	v, found := kv[string(key)] // no allocation: the compiler keys the map with the bytes
	if !found {
		return retNotFound
	}
	return writeOutString(m, s[2], s[3], v)
}

// writeOut copies data to guest memory at buf if it fits in capacity and
// returns its length either way, so a guest with a small buffer can retry.
func writeOut(m api.Module, buf, capacity uint64, data []byte) uint64 {
	if uint64(len(data)) > uint64(uint32(capacity)) {
		return uint64(uint32(len(data)))
	}
	if len(data) > 0 && !m.Memory().Write(uint32(buf), data) {
		return retBadArgs
	}
	return uint64(uint32(len(data)))
}

func writeOutString(m api.Module, buf, capacity uint64, data string) uint64 {
	if uint64(len(data)) > uint64(uint32(capacity)) {
		return uint64(uint32(len(data)))
	}
	if len(data) > 0 && !m.Memory().WriteString(uint32(buf), data) {
		return retBadArgs
	}
	return uint64(uint32(len(data)))
}

// LogSafe converts guest bytes for a log line, so that what klog writes
// of them takes at most limit bytes: klog quotes a string value, escaping
// quotes and backslashes (two bytes each) and control characters (four to
// six: 16 KiB of NUL bytes became 64 KiB). A character klog would escape
// beyond a pair (a control character, a non-printable rune, invalid
// UTF-8) becomes U+FFFD, and the text is cut where the next character
// would pass limit. It returns the text, the bytes it takes written, and
// whether b was cut.
func LogSafe(b []byte, limit int) (s string, written int, cut bool) {
	var out strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		w := size
		switch {
		case r == '"' || r == '\\':
			w = 2
		case r == utf8.RuneError || !unicode.IsPrint(r):
			r, w = utf8.RuneError, utf8.RuneLen(utf8.RuneError)
		}
		if written+w > limit {
			return out.String(), written, true
		}
		out.WriteRune(r)
		written += w
		b = b[size:]
	}
	return out.String(), written, false
}

// SafeString converts guest bytes for events and statuses, replacing
// invalid UTF-8.
func SafeString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string([]rune(string(b)))
}

// nodeListScopes is the declaration each node_list kind needs, from the
// fields table.
var nodeListScopes = func() (out [model.NumNodeLists]fields.Scope) {
	for k := range out {
		out[k] = fields.ScopeOf(abi.FnNodeList, int32(k))
	}
	return out
}()
