package wallet

import (
	"strconv"
	"strings"
)

// A posting's or same-group transfer's marker (post.lua, transfer.lua) is
// one string: the call's canonical description, then its outcome, lines
// separated by "\n":
//
//	<canonical>\n<status>\n<nonce>\n<time_ms>[\n<entry>\n<posted>\n<held>[\n<entry2>\n<posted2>\n<held2>]]
//
// The canonical description is built here, once per call, and the script
// stores it as it is: judging a replay or a conflict is a comparison done
// here, so the script does no parsing and builds no table on any path.

// markerFields are the canonical fields in order, with the name a conflict
// on each reports (the account of a transfer is its source, "from").
var markerFields = [...]string{"kind", "account", "to", "amount", "currency", "memo"}

// canonical describes a call: each field as <length>:<bytes>, so any memo
// (which may hold any byte of UTF-8, "\n" and ":" included) reads back
// unambiguously.
func canonical(fields ...string) string {
	var b strings.Builder
	for _, f := range fields {
		b.WriteString(strconv.Itoa(len(f)))
		b.WriteByte(':')
		b.WriteString(f)
	}
	return b.String()
}

// splitCanonical reads the fields of a canonical description at the start
// of s and returns them with the rest of s; ok is false when s does not
// start with len(markerFields) well-formed fields.
func splitCanonical(s string) (fields []string, rest string, ok bool) {
	for range markerFields {
		n, tail, found := strings.Cut(s, ":")
		size, err := strconv.Atoi(n)
		if !found || err != nil || size < 0 || size > len(tail) {
			return nil, "", false
		}
		fields = append(fields, tail[:size])
		s = tail[size:]
	}
	return fields, s, true
}

// judgeMarker turns a script's {"marker", value, currency, overdraft
// [, currency2, overdraft2]} reply into the reply post.lua and
// transfer.lua give for a marker kept as a hash: a conflict naming the
// first field in which the stored call differs from this one (canon),
// or the stored outcome, replayed unless it carries this call's nonce.
func judgeMarker(r []string, canon, nonce string, transfer bool) []string {
	if len(r) < 4 {
		return r
	}
	stored, rest, ok := splitCanonical(r[1])
	mine, _, _ := splitCanonical(canon)
	if !ok || len(mine) != len(stored) || !strings.HasPrefix(rest, "\n") {
		return []string{"unreadable marker", "0", "", r[1]}
	}
	for i := range stored {
		if stored[i] != mine[i] {
			f := markerFields[i]
			if i == 1 && transfer {
				f = "from"
			}
			return []string{"conflict", "0", f}
		}
	}
	out := strings.Split(rest[1:], "\n") // status, nonce, time, [entry, posted, held [, entry2, posted2, held2]]
	if len(out) < 3 {
		return []string{"unreadable marker", "0", "", r[1]}
	}
	replayed := "0"
	if out[1] != nonce {
		replayed = "1"
	}
	if out[0] != "ok" {
		return []string{out[0], replayed}
	}
	if len(out) < 6 {
		return []string{"unreadable marker", "0", "", r[1]}
	}
	// {status, replayed, field, time, entry, cur, od, posted, held, closed
	//  [, entry2, cur2, od2, posted2, held2, closed2]}: an accepted posting
	// found its accounts open, so closed is "0".
	reply := []string{"ok", replayed, "", out[2], out[3], r[2], r[3], out[4], out[5], "0"}
	if len(out) >= 9 && len(r) >= 6 {
		reply = append(reply, out[6], r[4], r[5], out[7], out[8], "0")
	}
	return reply
}
