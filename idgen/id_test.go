package idgen_test

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"testing"

	"github.com/bwmarrin/snowflake"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/idgen"
)

func TestID_String_Parse(t *testing.T) {
	for _, v := range []int64{0, 1, 9, 10, 1234567890123, math.MaxInt64, -1, math.MinInt64} {
		id := idgen.ID(v)
		require.Equal(t, strconv.FormatInt(v, 10), id.String())
		got, err := idgen.Parse(id.String())
		require.NoError(t, err)
		require.Equal(t, id, got)
	}
	for _, bad := range []string{"", "-", "+1", "01", "-0", "1a", " 1", "1 ", "9223372036854775808",
		"-9223372036854775809", "1.0", "1e3", "0x10", "1_000", "１"} {
		_, err := idgen.Parse(bad)
		require.ErrorIs(t, err, idgen.ErrSyntax, "%q", bad)
	}
}

func TestID_JSON(t *testing.T) {
	b, err := json.Marshal(struct{ ID idgen.ID }{ID: math.MaxInt64})
	require.NoError(t, err)
	require.JSONEq(t, `{"ID":"9223372036854775807"}`, string(b))

	for in, want := range map[string]idgen.ID{
		`"42"`: 42, `42`: 42, `"9223372036854775807"`: math.MaxInt64, `"\u0034\u0032"`: 42, `-7`: -7,
	} {
		var id idgen.ID
		require.NoError(t, json.Unmarshal([]byte(in), &id), in)
		require.Equal(t, want, id, in)
	}
	var id idgen.ID = 5
	require.NoError(t, json.Unmarshal([]byte(`null`), &id))
	require.Equal(t, idgen.ID(5), id)
	for _, bad := range []string{`""`, `"a"`, `1.5`, `1e3`, `"01"`, `true`, `"1`, `[1]`, `"\u00"`} {
		require.Error(t, id.UnmarshalJSON([]byte(bad)), bad)
	}
}

func TestID_Text_SQL(t *testing.T) {
	var id idgen.ID
	require.NoError(t, id.UnmarshalText([]byte("123")))
	b, err := id.MarshalText()
	require.NoError(t, err)
	require.Equal(t, "123", string(b))
	require.Error(t, id.UnmarshalText([]byte("x")))

	v, err := idgen.ID(77).Value()
	require.NoError(t, err)
	require.Equal(t, int64(77), v)
	for src, want := range map[any]idgen.ID{int64(5): 5, "6": 6, uint64(7): 7} {
		require.NoError(t, id.Scan(src))
		require.Equal(t, want, id)
	}
	require.NoError(t, id.Scan([]byte("8")))
	require.Equal(t, idgen.ID(8), id)
	for _, bad := range []any{nil, 1.5, "x", []byte("-"), uint64(math.MaxUint64)} {
		require.Error(t, id.Scan(bad), "%v", bad)
	}
}

func TestID_Base32_orderAndParse(t *testing.T) {
	vals := []int64{0, 1, 31, 32, 1000, 1 << 40, 1<<62 + 5, math.MaxInt64}
	var strs []string
	for _, v := range vals {
		s := idgen.ID(v).Base32()
		require.Len(t, s, idgen.Base32Len)
		got, err := idgen.ParseBase32(s)
		require.NoError(t, err)
		require.Equal(t, idgen.ID(v), got)
		strs = append(strs, s)
	}
	require.True(t, sort.StringsAreSorted(strs), strs)
	require.Equal(t, "0000000000000", idgen.ID(0).Base32())
	require.Equal(t, "7ZZZZZZZZZZZZ", idgen.ID(math.MaxInt64).Base32())

	got, err := idgen.ParseBase32("00000000000oi")
	require.NoError(t, err)
	require.Equal(t, idgen.ID(1), got)
	for _, bad := range []string{"", "000000000000", "00000000000000", "G000000000000", "000000000000U", "00000000000-0"} {
		_, err := idgen.ParseBase32(bad)
		require.ErrorIs(t, err, idgen.ErrSyntax, bad)
	}
}

func TestID_Snowflake_compatible(t *testing.T) {
	node, err := snowflake.NewNode(513)
	require.NoError(t, err)
	sid := node.Generate()
	id := idgen.FromSnowflake(sid)
	require.Equal(t, sid.Int64(), id.Int64())
	require.Equal(t, sid, id.Snowflake())
	require.Equal(t, sid.Node(), id.SnowflakeNode())
	require.Equal(t, sid.Step(), id.SnowflakeStep())
	require.Equal(t, sid.Time(), id.SnowflakeTime().UnixMilli())
	require.Equal(t, snowflake.Epoch, idgen.Epoch)
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "1", "-1", "9223372036854775807", "-9223372036854775808", "01", "+1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := idgen.Parse(s)
		if err != nil {
			return
		}
		// Only the canonical form parses, so the round trip is exact both ways.
		require.Equal(t, s, id.String())
		want, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
		require.Equal(t, want, id.Int64())
	})
}

func FuzzParseBase32(f *testing.F) {
	for _, s := range []string{"0000000000000", "7ZZZZZZZZZZZZ", "FZZZZZZZZZZZZ", "G000000000000", "0000000000oil", "abc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := idgen.ParseBase32(s)
		if err != nil {
			return
		}
		again, err := idgen.ParseBase32(id.Base32())
		require.NoError(t, err)
		require.Equal(t, id, again)
	})
}

func FuzzJSON(f *testing.F) {
	for _, s := range []string{`"1"`, `1`, `null`, `"-5"`, `"\u0031"`, `1.0`, `""`, `"9223372036854775807"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var id idgen.ID
		if err := json.Unmarshal(b, &id); err != nil {
			return
		}
		out, err := json.Marshal(id)
		require.NoError(t, err)
		var again idgen.ID
		require.NoError(t, json.Unmarshal(out, &again))
		require.Equal(t, id, again)
	})
}
