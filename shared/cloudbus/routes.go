package cloudbus

import (
	"fmt"
	"strings"
)

// Routes maps event types to destinations (queue URLs, topic names); the
// type "*" lists the destinations of every type not named.
type Routes map[string][]string

// ParseRoutes reads "type=dest[,type=dest…]" (whitespace and newlines also
// separate pairs; a type may be listed several times to fan out).
func ParseRoutes(s string) (Routes, error) {
	r := Routes{}
	for _, pair := range strings.FieldsFunc(s, func(c rune) bool { return c == ',' || c == ' ' || c == '\n' || c == '\t' }) {
		typ, dest, ok := strings.Cut(pair, "=")
		typ, dest = strings.TrimSpace(typ), strings.TrimSpace(dest)
		if !ok || typ == "" || dest == "" {
			return nil, fmt.Errorf("route %q: want type=destination", pair)
		}
		r[typ] = append(r[typ], dest)
	}
	if len(r) == 0 {
		return nil, fmt.Errorf("no routes in %q", s)
	}
	return r, nil
}

// For returns the destinations of an event type.
func (r Routes) For(typ string) []string {
	if d, ok := r[typ]; ok {
		return d
	}
	return r["*"]
}
