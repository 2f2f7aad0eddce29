// Package pgtext tells whether input can be stored by PostgreSQL as it is:
// text refuses NUL and invalid UTF-8; jsonb also refuses the \u0000 escape
// and an escaped surrogate that is not part of a pair (encoding/json lets
// both through a json.RawMessage). Checking at the edge turns what would be
// a 500 (HTTP) or an endless retry (events) into a refusal.
//
// Imported by: functions/intake, shared/faas. May import: stdlib only.
package pgtext

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Check reports why s cannot be stored as text.
func Check(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return errors.New("contains a NUL character")
	}
	return nil
}

// CheckJSON reports why the JSON document data (already known to be valid
// JSON) cannot be stored as jsonb or have its strings stored as text.
func CheckJSON(data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("not valid UTF-8")
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		i++ // valid JSON: an escape always has its next byte
		if i >= len(data) || data[i] != 'u' {
			continue
		}
		r, ok := hex4(data, i+1)
		if !ok {
			continue
		}
		switch {
		case r == 0:
			return errors.New(`contains a NUL character (\u0000)`)
		case r >= 0xD800 && r <= 0xDBFF: // high surrogate: a low one must follow
			lo, ok := uint16(0), false
			if i+6 < len(data) && data[i+5] == '\\' && data[i+6] == 'u' {
				lo, ok = hex4(data, i+7)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Errorf(`contains an unpaired surrogate (\u%04x)`, r)
			}
			i += 10
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Errorf(`contains an unpaired surrogate (\u%04x)`, r)
		default:
			i += 4
		}
	}
	return nil
}

func hex4(b []byte, at int) (uint16, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var v uint16
	for _, c := range b[at : at+4] {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= uint16(c - '0')
		case c >= 'a' && c <= 'f':
			v |= uint16(c-'a') + 10
		case c >= 'A' && c <= 'F':
			v |= uint16(c-'A') + 10
		default:
			return 0, false
		}
	}
	return v, true
}
