package runstream

import (
	"strconv"
	"strings"
)

// streamID is a parsed Redis stream id <ms>-<seq>; ids compare numerically,
// never as strings ("10-0" > "9-0").
type streamID struct{ ms, seq uint64 }

// parseID accepts only the full form <digits>-<digits>, which is what XADD
// returns and what clients echo in Last-Event-ID.
func parseID(s string) (streamID, bool) {
	a, b, ok := strings.Cut(s, "-")
	if !ok || a == "" || b == "" {
		return streamID{}, false
	}
	ms, err := strconv.ParseUint(a, 10, 64)
	if err != nil {
		return streamID{}, false
	}
	seq, err := strconv.ParseUint(b, 10, 64)
	if err != nil {
		return streamID{}, false
	}
	return streamID{ms, seq}, true
}

func (a streamID) less(b streamID) bool {
	return a.ms < b.ms || (a.ms == b.ms && a.seq < b.seq)
}

func (a streamID) String() string {
	return strconv.FormatUint(a.ms, 10) + "-" + strconv.FormatUint(a.seq, 10)
}

// after returns the smallest stream id greater than a: the id of an event the
// server makes up (the synthetic end), so that a client dropping every event
// whose id is not above its last one still takes it.
func (a streamID) after() streamID { return streamID{a.ms, a.seq + 1} }

// NormalizeCursor returns s if it is a stream id (<ms>-<seq>, surrounding
// space ignored) and "0-0" — the start of the stream — otherwise, as the
// original contract does for after_seq and Last-Event-ID.
func NormalizeCursor(s string) string {
	id, ok := parseID(strings.TrimSpace(s))
	if !ok {
		return "0-0"
	}
	return id.String()
}
