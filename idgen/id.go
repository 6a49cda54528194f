package idgen

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/bwmarrin/snowflake"
)

// Generator is what every generator in this package implements.
type Generator interface {
	// Next returns a new ID. ctx bounds any wait for Redis or for the clock.
	Next(ctx context.Context) (ID, error)
}

// ID is a 64-bit identifier. Every generator in this package returns
// non-negative IDs.
//
// Its text forms are the decimal string (String, MarshalText, JSON) and a
// fixed-width base32 string (Base32) whose lexical order equals numeric order.
// JSON encodes an ID as a string because JavaScript numbers lose precision
// above 2^53; decoding accepts both a quoted and an unquoted number.
type ID int64

// ErrSyntax is wrapped by every error returned when parsing an ID.
var ErrSyntax = errors.New("idgen: invalid ID syntax")

// Int64 returns the ID as an int64.
func (id ID) Int64() int64 { return int64(id) }

// String returns the decimal form of the ID.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// Parse parses the decimal form produced by String. It accepts only the
// canonical form: an optional '-', then digits without leading zeros
// ("0" itself is allowed, "-0" is not), within the int64 range.
func Parse(s string) (ID, error) {
	v, err := parseDecimal(s)
	if err != nil {
		return 0, err
	}
	return ID(v), nil
}

// parseDecimal is Parse for byte slices and strings without allocating.
func parseDecimal[T string | []byte](s T) (int64, error) {
	n := len(s)
	i := 0
	neg := false
	if n > 0 && s[0] == '-' {
		neg = true
		i = 1
	}
	if i == n || n-i > 19 {
		return 0, syntaxError(s)
	}
	if s[i] == '0' && (n-i > 1 || neg) {
		return 0, syntaxError(s)
	}
	var u uint64
	for ; i < n; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, syntaxError(s)
		}
		u = u*10 + uint64(c-'0') // 19 digits cannot overflow a uint64
	}
	if neg {
		if u > 1<<63 {
			return 0, syntaxError(s)
		}
		return -int64(u), nil
	}
	if u > 1<<63-1 {
		return 0, syntaxError(s)
	}
	return int64(u), nil
}

func syntaxError[T string | []byte](s T) error {
	const max = 40
	if len(s) > max {
		return fmt.Errorf("%w: %q and %d more bytes", ErrSyntax, string(s[:max]), len(s)-max)
	}
	return fmt.Errorf("%w: %q", ErrSyntax, string(s))
}

// MarshalText implements encoding.TextMarshaler with the decimal form.
func (id ID) MarshalText() ([]byte, error) {
	return strconv.AppendInt(nil, int64(id), 10), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it accepts what Parse accepts.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := parseDecimal(b)
	if err != nil {
		return err
	}
	*id = ID(v)
	return nil
}

// MarshalJSON encodes the ID as a JSON string holding its decimal form.
func (id ID) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 22)
	b = append(b, '"')
	b = strconv.AppendInt(b, int64(id), 10)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts a JSON string holding a decimal ID ("123") or a JSON
// integer (123). JSON null leaves the ID unchanged, as encoding/json does for
// other types. Anything else (fractions, exponents, empty strings) is an
// error wrapping ErrSyntax.
func (id *ID) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		inner := b[1 : len(b)-1]
		for _, c := range inner {
			if c == '\\' {
				// Escaped digits are rare but valid JSON: decode the string properly.
				var s string
				if err := json.Unmarshal(b, &s); err != nil {
					return fmt.Errorf("%w: %v", ErrSyntax, err)
				}
				return id.UnmarshalText([]byte(s))
			}
		}
		return id.UnmarshalText(inner)
	}
	return id.UnmarshalText(b)
}

// Value implements driver.Valuer: an ID is stored as a BIGINT.
func (id ID) Value() (driver.Value, error) { return int64(id), nil }

// Scan implements sql.Scanner. It accepts int64, a decimal string or []byte,
// and uint64 within the int64 range; NULL and other types are errors (use
// sql.Null[ID] for a nullable column).
func (id *ID) Scan(src any) error {
	switch v := src.(type) {
	case int64:
		*id = ID(v)
		return nil
	case uint64:
		if v > 1<<63-1 {
			return fmt.Errorf("idgen: scan ID: %d out of range", v)
		}
		*id = ID(v)
		return nil
	case []byte:
		return id.UnmarshalText(v)
	case string:
		return id.UnmarshalText([]byte(v))
	case nil:
		return errors.New("idgen: scan ID: NULL")
	default:
		return fmt.Errorf("idgen: scan ID: unsupported type %T", src)
	}
}

// base32Alphabet is Crockford's: digits then letters without I, L, O and U,
// in ASCII order, so lexical order of fixed-width strings is numeric order.
const base32Alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// Base32Len is the length of every Base32 string.
const Base32Len = 13

var base32Decode = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xFF
	}
	for i := 0; i < len(base32Alphabet); i++ {
		c := base32Alphabet[i]
		t[c] = byte(i)
		if c >= 'A' {
			t[c+'a'-'A'] = byte(i)
		}
	}
	// Crockford's decoding aliases for characters people misread.
	for _, p := range [][2]byte{{'O', 0}, {'o', 0}, {'I', 1}, {'i', 1}, {'L', 1}, {'l', 1}} {
		t[p[0]] = p[1]
	}
	return t
}()

// Base32 returns the ID as 13 characters of Crockford's base32 alphabet
// (0-9, A-Z without I, L, O, U), zero padded. For non-negative IDs the
// lexical order of these strings equals the numeric order; a negative ID is
// encoded as its two's-complement bits and sorts after every non-negative one.
func (id ID) Base32() string {
	var b [Base32Len]byte
	u := uint64(id)
	for i := Base32Len - 1; i >= 0; i-- {
		b[i] = base32Alphabet[u&31]
		u >>= 5
	}
	return string(b[:])
}

// ParseBase32 parses the form produced by Base32. Decoding is
// case-insensitive and, as in Crockford's specification, reads O as 0 and
// I and L as 1. The input must be exactly 13 characters and fit in 64 bits
// (the first character is at most F).
func ParseBase32(s string) (ID, error) {
	if len(s) != Base32Len {
		return 0, syntaxError(s)
	}
	var u uint64
	for i := 0; i < len(s); i++ {
		d := base32Decode[s[i]]
		if d == 0xFF || (i == 0 && d > 15) {
			return 0, syntaxError(s)
		}
		u = u<<5 | uint64(d)
	}
	return ID(u), nil
}

// Snowflake converts the ID to a github.com/bwmarrin/snowflake ID, whose
// encodings (Base58, Base64, ...) then apply. The bits are unchanged.
func (id ID) Snowflake() snowflake.ID { return snowflake.ID(id) }

// FromSnowflake converts a github.com/bwmarrin/snowflake ID. The bits are unchanged.
func FromSnowflake(s snowflake.ID) ID { return ID(s) }

// SnowflakeTime returns the timestamp of an ID in the Snowflake layout
// (millisecond precision). It is meaningless for Sequence and Segment IDs.
func (id ID) SnowflakeTime() time.Time {
	return time.UnixMilli(int64(id)>>timeShift + Epoch)
}

// SnowflakeNode returns the node bits of an ID in the Snowflake layout.
func (id ID) SnowflakeNode() int64 { return int64(id) >> nodeShift & MaxNode }

// SnowflakeStep returns the sequence bits of an ID in the Snowflake layout.
func (id ID) SnowflakeStep() int64 { return int64(id) & maxStep }
