// Package valid checks caller data before it reaches Redis: names and IDs,
// amounts, durations and key prefixes. Every error wraps ErrInvalid and names
// the offending field and the reason.
package valid

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid is wrapped by every error this package returns.
var ErrInvalid = errors.New("redkit: invalid argument")

// MaxAmount is the largest magnitude of an amount, quantity, level or
// balance: 2^53-1, the largest integer a Lua number (a double) holds exactly.
const MaxAmount = 1<<53 - 1

// Bounds of the durations redkit accepts (ARCHITECTURE.md §5).
const (
	LockTTLMin     = 10 * time.Millisecond
	LockTTLMax     = 24 * time.Hour
	HoldTTLMin     = time.Second
	HoldTTLMax     = 7 * 24 * time.Hour
	IdemWindowMin  = time.Minute
	IdemWindowMax  = 30 * 24 * time.Hour
	LeaseMin       = time.Second
	LeaseMax       = time.Hour
	maxNameLen     = 128
	maxPrefixLen   = 64
	groupSeparator = '/'
)

func invalid(field, format string, a ...any) error {
	return fmt.Errorf("%w: %s %s", ErrInvalid, field, fmt.Sprintf(format, a...))
}

// plain reports whether b is one of A-Z a-z 0-9 . _ -
func plain(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		b == '.' || b == '_' || b == '-'
}

// Name checks a name or ID: 1–128 bytes of A-Z a-z 0-9 . _ - : and at most
// one '/', which is neither the first nor the last byte (the part before it
// is the slot group, see keys.Group). Anything else — braces, spaces, glob
// characters, non-ASCII — is rejected, so a name can never change a key's
// hash tag or match a pattern.
func Name(field, s string) error {
	switch {
	case s == "":
		return invalid(field, "is empty")
	case len(s) > maxNameLen:
		return invalid(field, "is %d bytes long, more than %d", len(s), maxNameLen)
	}
	slashes := 0
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case plain(b) || b == ':':
		case b == groupSeparator:
			slashes++
			if slashes > 1 {
				return invalid(field, "%q has more than one '/'", s)
			}
			if i == 0 || i == len(s)-1 {
				return invalid(field, "%q starts or ends with '/'", s)
			}
		default:
			return invalid(field, "%q has byte %q at offset %d (allowed: A-Z a-z 0-9 . _ - : and one '/')", s, s[i:i+1], i)
		}
	}
	return nil
}

// Amount checks a positive amount or quantity: 1..MaxAmount.
func Amount(field string, v int64) error {
	if v < 1 || v > MaxAmount {
		return invalid(field, "is %d, outside 1..%d", v, int64(MaxAmount))
	}
	return nil
}

// Signed checks a signed amount, level or balance: -MaxAmount..MaxAmount.
func Signed(field string, v int64) error {
	if v < -MaxAmount || v > MaxAmount {
		return invalid(field, "is %d, outside ±%d", v, int64(MaxAmount))
	}
	return nil
}

// Duration checks lo <= d <= hi.
func Duration(field string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return invalid(field, "is %v, outside %v..%v", d, lo, hi)
	}
	return nil
}

// Prefix checks a key prefix: 1–64 bytes of A-Z a-z 0-9 . _ -
// (no ':', which separates the parts of a key).
func Prefix(p string) error {
	const field = "key prefix"
	switch {
	case p == "":
		return invalid(field, "is empty")
	case len(p) > maxPrefixLen:
		return invalid(field, "is %d bytes long, more than %d", len(p), maxPrefixLen)
	}
	for i := 0; i < len(p); i++ {
		if !plain(p[i]) {
			return invalid(field, "%q has byte %q at offset %d (allowed: A-Z a-z 0-9 . _ -)", p, p[i:i+1], i)
		}
	}
	return nil
}

// MaxPage is the largest page of journal entries a module returns.
const MaxPage = 1000

// Page checks a request for a page of a journal: cursor is "" (from the
// oldest entry) or a stream entry ID ("<ms>-<seq>", the last ID of the
// previous page), limit is 1..MaxPage. It returns the XRANGE start: "-" or
// the exclusive "(<cursor>".
func Page(cursor string, limit int) (start string, err error) {
	if cursor != "" && !isEntryID(cursor) {
		return "", fmt.Errorf("%w: cursor %q is not a journal entry ID", ErrInvalid, cursor)
	}
	if limit < 1 || limit > MaxPage {
		return "", fmt.Errorf("%w: limit %d outside 1..%d", ErrInvalid, limit, MaxPage)
	}
	if cursor == "" {
		return "-", nil
	}
	return "(" + cursor, nil
}

// isEntryID reports whether s is "<ms>-<seq>", each 1–20 decimal digits of a
// number that fits 64 unsigned bits, as Redis reads stream IDs, and not the
// largest ID of all, after which no entry can come (Redis refuses it as an
// exclusive start).
func isEntryID(s string) bool {
	ms, seq, ok := strings.Cut(s, "-")
	number := func(p string) bool {
		if p == "" || len(p) > 20 || p[0] < '0' || p[0] > '9' {
			return false
		}
		_, err := strconv.ParseUint(p, 10, 64)
		return err == nil
	}
	return ok && number(ms) && number(seq) && s != "18446744073709551615-18446744073709551615"
}
