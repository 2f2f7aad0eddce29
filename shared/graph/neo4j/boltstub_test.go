package neo4j_test

// A scripted Bolt server: the protocol a Neo4j server speaks, written from
// the Bolt and PackStream specifications (no Neo4j can run here). It
// negotiates a version from the client's proposals, answers HELLO/LOGON,
// BEGIN/RUN/PULL/COMMIT/ROLLBACK/RESET/GOODBYE, and serves each RUN from a
// script: the statement must contain the step's fragments and carry exactly
// its parameters; the step's records are the answer.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Bolt message tags.
const (
	tagHello    = 0x01
	tagGoodbye  = 0x02
	tagReset    = 0x0f
	tagRun      = 0x10
	tagBegin    = 0x11
	tagCommit   = 0x12
	tagRollback = 0x13
	tagDiscard  = 0x2f
	tagPull     = 0x3f
	tagLogon    = 0x6a
	tagLogoff   = 0x6b
	tagSuccess  = 0x70
	tagRecord   = 0x71
	tagIgnored  = 0x7e
	tagFailure  = 0x7f
)

// structure is a PackStream structure (a Bolt message is one).
type structure struct {
	tag    byte
	fields []any
}

// ---- PackStream ----

func pack(w *[]byte, v any) {
	b := *w
	defer func() { *w = b }()
	switch x := v.(type) {
	case nil:
		b = append(b, 0xc0)
	case bool:
		if x {
			b = append(b, 0xc3)
		} else {
			b = append(b, 0xc2)
		}
	case int:
		*w = b
		pack(w, int64(x))
		b = *w
	case int64:
		switch {
		case x >= -16 && x <= 127:
			b = append(b, byte(int8(x)))
		case x >= math.MinInt8 && x <= math.MaxInt8:
			b = append(b, 0xc8, byte(int8(x)))
		case x >= math.MinInt16 && x <= math.MaxInt16:
			b = append(b, 0xc9)
			b = binary.BigEndian.AppendUint16(b, uint16(int16(x)))
		case x >= math.MinInt32 && x <= math.MaxInt32:
			b = append(b, 0xca)
			b = binary.BigEndian.AppendUint32(b, uint32(int32(x)))
		default:
			b = append(b, 0xcb)
			b = binary.BigEndian.AppendUint64(b, uint64(x))
		}
	case float64:
		b = append(b, 0xc1)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(x))
	case string:
		b = header(b, len(x), 0x80, 0xd0)
		b = append(b, x...)
	case []string:
		b = header(b, len(x), 0x90, 0xd4)
		for _, s := range x {
			*w = b
			pack(w, s)
			b = *w
		}
	case []any:
		b = header(b, len(x), 0x90, 0xd4)
		for _, e := range x {
			*w = b
			pack(w, e)
			b = *w
		}
	case []map[string]any:
		b = header(b, len(x), 0x90, 0xd4)
		for _, e := range x {
			*w = b
			pack(w, e)
			b = *w
		}
	case map[string]any:
		b = header(b, len(x), 0xa0, 0xd8)
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			*w = b
			pack(w, k)
			pack(w, x[k])
			b = *w
		}
	case structure:
		b = append(b, 0xb0|byte(len(x.fields)), x.tag)
		for _, f := range x.fields {
			*w = b
			pack(w, f)
			b = *w
		}
	default:
		panic(fmt.Sprintf("packstream: cannot pack %T", v))
	}
}

// header writes a size marker: tiny (high nibble) below 16, else 8/16/32-bit.
func header(b []byte, n int, tiny, sized byte) []byte {
	switch {
	case n < 16:
		return append(b, tiny|byte(n))
	case n <= math.MaxUint8:
		return append(b, sized, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, sized+1), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, sized+2), uint32(n))
	}
}

type unpacker struct {
	b   []byte
	err error
}

func (u *unpacker) take(n int) []byte {
	if u.err != nil || len(u.b) < n {
		u.err = io.ErrUnexpectedEOF
		return make([]byte, n)
	}
	out := u.b[:n]
	u.b = u.b[n:]
	return out
}

func (u *unpacker) size(m byte, base byte) int {
	switch m - base {
	case 0:
		return int(u.take(1)[0])
	case 1:
		return int(binary.BigEndian.Uint16(u.take(2)))
	default:
		return int(binary.BigEndian.Uint32(u.take(4)))
	}
}

func (u *unpacker) value() any {
	m := u.take(1)[0]
	if u.err != nil {
		return nil
	}
	switch {
	case m <= 0x7f || m >= 0xf0:
		return int64(int8(m))
	case m>>4 == 0x8:
		return string(u.take(int(m & 0xf)))
	case m>>4 == 0x9:
		return u.list(int(m & 0xf))
	case m>>4 == 0xa:
		return u.dict(int(m & 0xf))
	case m>>4 == 0xb:
		return u.structure(int(m & 0xf))
	}
	switch m {
	case 0xc0:
		return nil
	case 0xc1:
		return math.Float64frombits(binary.BigEndian.Uint64(u.take(8)))
	case 0xc2:
		return false
	case 0xc3:
		return true
	case 0xc8:
		return int64(int8(u.take(1)[0]))
	case 0xc9:
		return int64(int16(binary.BigEndian.Uint16(u.take(2))))
	case 0xca:
		return int64(int32(binary.BigEndian.Uint32(u.take(4))))
	case 0xcb:
		return int64(binary.BigEndian.Uint64(u.take(8)))
	case 0xcc, 0xcd, 0xce:
		return append([]byte(nil), u.take(u.size(m, 0xcc))...)
	case 0xd0, 0xd1, 0xd2:
		return string(u.take(u.size(m, 0xd0)))
	case 0xd4, 0xd5, 0xd6:
		return u.list(u.size(m, 0xd4))
	case 0xd8, 0xd9, 0xda:
		return u.dict(u.size(m, 0xd8))
	}
	u.err = fmt.Errorf("packstream: unknown marker %#x", m)
	return nil
}

func (u *unpacker) list(n int) []any {
	out := make([]any, 0, n)
	for i := 0; i < n && u.err == nil; i++ {
		out = append(out, u.value())
	}
	return out
}

func (u *unpacker) dict(n int) map[string]any {
	out := make(map[string]any, n)
	for i := 0; i < n && u.err == nil; i++ {
		k, _ := u.value().(string)
		out[k] = u.value()
	}
	return out
}

func (u *unpacker) structure(n int) structure {
	s := structure{tag: u.take(1)[0]}
	s.fields = u.list(n)
	return s
}

// canonical is v as it comes back over the wire (typed slices become []any,
// ints int64): expected parameters are compared in this form.
func canonical(v any) any {
	var b []byte
	pack(&b, v)
	u := &unpacker{b: b}
	return u.value()
}

// ---- chunked transport ----

// readMessage reads one chunked message (NOOP chunks between messages are
// skipped).
func readMessage(r *bufio.Reader) ([]byte, error) {
	var msg []byte
	for {
		var hdr [2]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, err
		}
		n := int(binary.BigEndian.Uint16(hdr[:]))
		if n == 0 {
			if msg == nil {
				continue // NOOP
			}
			return msg, nil
		}
		chunk := make([]byte, n)
		if _, err := io.ReadFull(r, chunk); err != nil {
			return nil, err
		}
		msg = append(msg, chunk...)
	}
}

// writeMessage writes a message in chunks of at most max bytes.
func writeMessage(w io.Writer, msg []byte, max int) error {
	var out []byte
	for len(msg) > 0 {
		n := min(len(msg), max)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	out = append(out, 0, 0)
	_, err := w.Write(out)
	return err
}

// ---- the scripted server ----

// step is one expected RUN and its answer.
type step struct {
	contains []string       // fragments the statement must contain
	params   map[string]any // exactly the parameters sent
	fields   []string       // the answer's columns
	records  [][]any        // the answer's rows
	fail     string         // answer FAILURE with this code instead
	check    func(q string) error
}

// version is a Bolt protocol version.
type version struct{ major, minor byte }

type boltStub struct {
	t        *testing.T
	addr     string
	versions []version // what the server speaks, preferred first
	maxChunk int

	mu        sync.Mutex
	script    []step
	next      int
	log       []string // message names received, in order, across connections
	auth      []map[string]any
	agreed    []version
	mismatchs []string
}

// newBoltStub listens on a loopback port and serves the script.
func newBoltStub(t *testing.T, versions []version, script []step) *boltStub {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &boltStub{t: t, addr: ln.Addr().String(), versions: versions, maxChunk: 16, script: script}
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.serve(c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, m := range s.mismatchs {
			t.Error(m)
		}
		if s.next != len(s.script) && !t.Failed() {
			t.Errorf("bolt stub: %d of %d scripted statements were run; next expected: %v", s.next, len(s.script), s.script[s.next].contains)
		}
	})
	return s
}

func (s *boltStub) uri() string { return "bolt://" + s.addr }

// negotiate picks the first server version inside one of the client's
// proposals (major, minor, and a range of minors below it).
func (s *boltStub) negotiate(proposals [4][4]byte) (version, bool) {
	for _, v := range s.versions {
		for _, p := range proposals {
			major, minor, back := p[3], p[2], p[1]
			if major == v.major && v.minor <= minor && v.minor+back >= minor {
				return v, true
			}
		}
	}
	return version{}, false
}

func (s *boltStub) record(name string) {
	s.mu.Lock()
	s.log = append(s.log, name)
	s.mu.Unlock()
}

func (s *boltStub) received(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.log {
		if l == name {
			n++
		}
	}
	return n
}

func (s *boltStub) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	var hs [20]byte
	if _, err := io.ReadFull(r, hs[:]); err != nil {
		return
	}
	if binary.BigEndian.Uint32(hs[:4]) != 0x6060b017 {
		s.fail("bolt stub: bad magic % x", hs[:4])
		return
	}
	var props [4][4]byte
	for i := range props {
		copy(props[i][:], hs[4+4*i:8+4*i])
	}
	v, ok := s.negotiate(props)
	if !ok {
		_, _ = c.Write([]byte{0, 0, 0, 0})
		return
	}
	if _, err := c.Write([]byte{0, 0, v.minor, v.major}); err != nil {
		return
	}
	s.mu.Lock()
	s.agreed = append(s.agreed, v)
	s.mu.Unlock()

	send := func(tag byte, fields ...any) bool {
		var b []byte
		pack(&b, structure{tag: tag, fields: fields})
		return writeMessage(c, b, s.maxChunk) == nil
	}
	failed := false   // after a FAILURE, everything but RESET is IGNORED
	var pending *step // the RUN whose records the next PULL streams
	for {
		raw, err := readMessage(r)
		if err != nil {
			return
		}
		u := &unpacker{b: raw}
		m, ok := u.value().(structure)
		if !ok || u.err != nil {
			s.fail("bolt stub: undecodable message % x", raw)
			return
		}
		name := map[byte]string{tagHello: "HELLO", tagGoodbye: "GOODBYE", tagReset: "RESET", tagRun: "RUN", tagBegin: "BEGIN",
			tagCommit: "COMMIT", tagRollback: "ROLLBACK", tagDiscard: "DISCARD", tagPull: "PULL", tagLogon: "LOGON", tagLogoff: "LOGOFF"}[m.tag]
		if name == "" {
			name = fmt.Sprintf("%#x", m.tag)
		}
		s.record(name)
		switch {
		case m.tag == tagGoodbye:
			return
		case m.tag == tagReset:
			failed, pending = false, nil
			send(tagSuccess, map[string]any{})
			continue
		case failed:
			send(tagIgnored)
			continue
		}
		switch m.tag {
		case tagHello:
			meta, _ := m.fields[0].(map[string]any)
			if v.major < 5 || v.minor == 0 { // auth travels in HELLO before 5.1
				s.mu.Lock()
				s.auth = append(s.auth, meta)
				s.mu.Unlock()
			}
			send(tagSuccess, map[string]any{"server": "Neo4j/5.26.0", "connection_id": "bolt-stub"})
		case tagLogon:
			meta, _ := m.fields[0].(map[string]any)
			s.mu.Lock()
			s.auth = append(s.auth, meta)
			s.mu.Unlock()
			send(tagSuccess, map[string]any{})
		case tagBegin, tagRollback, tagLogoff:
			send(tagSuccess, map[string]any{})
		case tagCommit:
			send(tagSuccess, map[string]any{"bookmark": "stub:bm"})
		case tagRun:
			q, _ := m.fields[0].(string)
			params, _ := m.fields[1].(map[string]any)
			st, err := s.match(q, params)
			if err != nil {
				s.fail("%v", err)
				send(tagFailure, map[string]any{"code": "Neo.ClientError.Statement.SyntaxError", "message": err.Error()})
				failed = true
				continue
			}
			if st.fail != "" {
				send(tagFailure, map[string]any{"code": st.fail, "message": "scripted failure"})
				failed = true
				continue
			}
			pending = &st
			fields := make([]any, len(st.fields))
			for i, f := range st.fields {
				fields[i] = f
			}
			send(tagSuccess, map[string]any{"fields": fields, "t_first": int64(1)})
		case tagPull, tagDiscard:
			if pending != nil && m.tag == tagPull {
				for _, rec := range pending.records {
					send(tagRecord, canonical(rec))
				}
			}
			pending = nil
			send(tagSuccess, map[string]any{"has_more": false, "type": "rw", "t_last": int64(1)})
		default:
			send(tagFailure, map[string]any{"code": "Neo.ClientError.Request.Invalid", "message": "unexpected message " + name})
			failed = true
		}
	}
}

func (s *boltStub) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mismatchs = append(s.mismatchs, fmt.Sprintf(format, args...))
}

// match takes the next scripted step for statement q with params.
func (s *boltStub) match(q string, params map[string]any) (step, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= len(s.script) {
		return step{}, fmt.Errorf("bolt stub: unscripted statement %q %v", q, params)
	}
	st := s.script[s.next]
	for _, frag := range st.contains {
		if !strings.Contains(q, frag) {
			return step{}, fmt.Errorf("bolt stub: statement %d does not contain %q:\n%s", s.next, frag, q)
		}
	}
	if st.check != nil {
		if err := st.check(q); err != nil {
			return step{}, fmt.Errorf("bolt stub: statement %d: %v", s.next, err)
		}
	}
	want := st.params
	if want == nil {
		want = map[string]any{}
	}
	if want := canonical(want); !reflect.DeepEqual(canonical(params), want) {
		return step{}, fmt.Errorf("bolt stub: statement %d (%v) parameters\n got: %#v\nwant: %#v", s.next, st.contains, params, want)
	}
	s.next++
	return st, nil
}
