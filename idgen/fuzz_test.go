package idgen_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/redistest"
)

// FuzzID_encodings starts from the value (FuzzParse, FuzzParseBase32 and
// FuzzJSON start from the text): every ID survives each of its encodings
// exactly, and Base32 keeps the numeric order of non-negative IDs.
func FuzzID_encodings(f *testing.F) {
	for _, v := range []int64{0, 1, -1, 1<<53 - 1, 1 << 53, 1<<63 - 1, -1 << 63} {
		f.Add(v, v/2)
	}
	f.Fuzz(func(t *testing.T, v, w int64) {
		id := idgen.ID(v)
		if got, err := idgen.Parse(id.String()); err != nil || got != id {
			t.Fatalf("Parse(%q) = %d, %v; want %d", id.String(), got, err, v)
		}
		if got, err := idgen.ParseBase32(id.Base32()); err != nil || got != id {
			t.Fatalf("ParseBase32(%q) = %d, %v; want %d", id.Base32(), got, err, v)
		}
		if len(id.Base32()) != idgen.Base32Len {
			t.Fatalf("Base32(%d) = %q, want %d characters", v, id.Base32(), idgen.Base32Len)
		}
		b, err := json.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		var back idgen.ID
		if err := json.Unmarshal(b, &back); err != nil || back != id {
			t.Fatalf("JSON %s -> %d, %v; want %d", b, back, err, v)
		}
		txt, _ := id.MarshalText()
		if err := back.UnmarshalText(txt); err != nil || back != id {
			t.Fatalf("text %s -> %d, %v; want %d", txt, back, err, v)
		}
		if id.Snowflake().Int64() != v || idgen.FromSnowflake(id.Snowflake()) != id {
			t.Fatalf("snowflake conversion of %d is not exact", v)
		}
		if v >= 0 && w >= 0 && (v < w) != (idgen.ID(v).Base32() < idgen.ID(w).Base32()) {
			t.Fatalf("Base32 order of %d and %d differs from their numeric order", v, w)
		}
	})
}

// FuzzNewGenerators feeds names and step bounds to the generators that take
// caller data: invalid input is ErrInvalid and writes nothing; valid input
// issues IDs from a counter key in the name's slot group.
func FuzzNewGenerators(f *testing.F) {
	f.Add("shop-7/orders", int64(1000), int64(100000))
	f.Add("{orders}", int64(1), int64(1))
	f.Add("a", int64(0), int64(10))
	f.Add("a", int64(10), int64(1))
	s := redistest.New(f, redistest.Options{})
	rdb := s.Client()
	var n int
	f.Fuzz(func(t *testing.T, name string, minStep, maxStep int64) {
		n++
		prefix := fmt.Sprintf("fz%d-%d", n, time.Now().UnixNano())
		ctx := t.Context()
		before, err := redistest.Snapshot(ctx, rdb, "*")
		if err != nil {
			t.Fatal(err)
		}
		okName := redistest.ValidName(name)
		// The sequence and the segment count on separate keys (a shared key
		// would be exhausted by a maximal segment step after the sequence).
		okSteps := minStep >= 1 && maxStep >= minStep && maxStep <= 1<<53-1
		seq, seqErr := idgen.NewSequence(rdb, name, idgen.WithKeyPrefix(prefix))
		seg, segErr := idgen.NewSegment(rdb, name, idgen.WithKeyPrefix(prefix+"-seg"), idgen.WithMinStep(minStep), idgen.WithMaxStep(maxStep))
		var sf *idgen.Snowflake
		sfErr := errors.New("not started")
		if !okName {
			sf, sfErr = idgen.NewLeasedSnowflake(ctx, rdb, name, idgen.WithKeyPrefix(prefix))
		}
		for what, got := range map[string]struct {
			err  error
			want bool
		}{"sequence": {seqErr, okName}, "segment": {segErr, okName && okSteps}} {
			if got.want != (got.err == nil) || (got.err != nil && !errors.Is(got.err, idgen.ErrInvalid)) {
				t.Fatalf("New %s(%q, steps %d..%d) = %v, want valid=%v", what, name, minStep, maxStep, got.err, got.want)
			}
		}
		if !okName {
			if !errors.Is(sfErr, idgen.ErrInvalid) {
				_ = sf.Close()
				t.Fatalf("NewLeasedSnowflake(%q) = %v, want ErrInvalid", name, sfErr)
			}
			after, err := redistest.Snapshot(ctx, rdb, "*")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("refused name %q changed the database", name)
			}
			return
		}
		a, err := seq.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := seq.Next(ctx)
		if err != nil || b <= a {
			t.Fatalf("sequence %q issued %d then %d, %v", name, a, b, err)
		}
		if seg != nil {
			if _, err := seg.Next(ctx); err != nil {
				t.Fatal(err)
			}
			_ = seg.Close()
		}
		ks, err := rdb.Keys(ctx, prefix+"*").Result()
		if err != nil || len(ks) == 0 {
			t.Fatalf("keys under %s: %q, %v", prefix, ks, err)
		}
		g, _, _ := strings.Cut(name, "/")
		for _, k := range ks {
			if err := redistest.CheckKeyTag(k, g); err != nil {
				t.Fatal(err)
			}
		}
		rdb.Del(ctx, ks...)
	})
}
