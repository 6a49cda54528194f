// Package keys builds Redis keys following redkit's schema
//
//	<prefix>:<module>:v<N>:{<group>}:<kind>[:<part>...]
//
// The group sits in the only pair of braces, so it is the key's hash tag: all
// keys of one group live in one cluster slot and one script may touch them
// all. Callers validate names with package valid first; a valid name contains
// no brace, so no part can add a second hash tag.
package keys

import (
	"strconv"
	"strings"
)

// DefaultPrefix is the key prefix used when a module is given none.
const DefaultPrefix = "redkit"

// Group returns the slot group of an ID: the part before its '/', or the
// whole ID when it has none. "shop-7/sku-1" -> "shop-7"; "sku-1" -> "sku-1".
func Group(id string) string {
	if i := strings.IndexByte(id, '/'); i >= 0 {
		return id[:i]
	}
	return id
}

// Space is the key space of one module at one layout version. Version changes
// whenever a script's view of the data changes, so old and new scripts never
// read each other's keys during a rolling deploy.
type Space struct {
	Prefix  string // e.g. DefaultPrefix
	Module  string // e.g. "stock"
	Version int    // layout version, the N in v<N>
}

// Key returns "<prefix>:<module>:v<N>:{<group>}:<kind>[:<part>...]".
// Space{"redkit", "stock", 1}.Key("shop-7", "sku", "shop-7/sku-1") is
// "redkit:stock:v1:{shop-7}:sku:shop-7/sku-1".
func (s Space) Key(group, kind string, parts ...string) string {
	var b strings.Builder
	n := len(s.Prefix) + len(s.Module) + len(group) + len(kind) + 16
	for _, p := range parts {
		n += len(p) + 1
	}
	b.Grow(n)
	b.WriteString(s.Prefix)
	b.WriteByte(':')
	b.WriteString(s.Module)
	b.WriteString(":v")
	b.WriteString(strconv.Itoa(s.Version))
	b.WriteString(":{")
	b.WriteString(group)
	b.WriteString("}:")
	b.WriteString(kind)
	for _, p := range parts {
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}
