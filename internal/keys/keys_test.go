package keys_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/internal/keys"
	"github.com/redkit-go/redkit/internal/valid"
	"github.com/redkit-go/redkit/redistest"
)

func TestGroup(t *testing.T) {
	require.Equal(t, "shop-7", keys.Group("shop-7/sku-1"))
	require.Equal(t, "sku-1", keys.Group("sku-1"))
	require.Equal(t, "merchant-42", keys.Group("merchant-42/payouts"))
}

func TestSpace_Key(t *testing.T) {
	s := keys.Space{Prefix: "redkit", Module: "stock", Version: 1}
	require.Equal(t, "redkit:stock:v1:{shop-7}:sku:shop-7/sku-1", s.Key("shop-7", "sku", "shop-7/sku-1"))
	require.Equal(t, "redkit:stock:v1:{sku-1}:journal", s.Key("sku-1", "journal"))
	fence := keys.Space{Prefix: "app", Module: "fence", Version: 1}
	require.Equal(t, "app:fence:v1:{acct}:payout:m-42", fence.Key("acct", "payout:m-42"))
	require.Equal(t, "p:m:v12:{g}:k:a:b", keys.Space{Prefix: "p", Module: "m", Version: 12}.Key("g", "k", "a", "b"))
}

var sampleIDs = []string{
	"sku-1", "shop-7/sku-1", "shop-7/sku-2", "shop-7/a:b.c_d-e", "merchant-42/payouts",
	"merchant-42/fees", "a", "Z.9", "x:y:z", strings.Repeat("g", 64) + "/" + strings.Repeat("n", 63),
}

// Every key built from valid names carries exactly one hash tag, the group.
func TestSpace_Key_oneHashTag(t *testing.T) {
	s := keys.Space{Prefix: keys.DefaultPrefix, Module: "wallet", Version: 3}
	for _, id := range sampleIDs {
		require.NoError(t, valid.Name("id", id))
		g := keys.Group(id)
		for _, k := range []string{s.Key(g, "acct", id), s.Key(g, "journal"), s.Key(g, "op", id, "x")} {
			require.Equal(t, 1, strings.Count(k, "{"), k)
			require.Equal(t, 1, strings.Count(k, "}"), k)
			require.Equal(t, g, redistest.HashTag(k), k)
		}
	}
}

func FuzzKey_oneHashTag(f *testing.F) {
	f.Add("shop-7/sku-1", "sku")
	f.Add("a", "b")
	f.Fuzz(func(t *testing.T, id, kind string) {
		if valid.Name("id", id) != nil || valid.Name("kind", kind) != nil {
			t.Skip()
		}
		s := keys.Space{Prefix: keys.DefaultPrefix, Module: "m", Version: 1}
		g := keys.Group(id)
		k := s.Key(g, kind, id)
		if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || redistest.HashTag(k) != g {
			t.Fatalf("key %q does not carry exactly the hash tag {%s}", k, g)
		}
		if redistest.KeySlot(k) != redistest.KeySlot(s.Key(g, "journal")) {
			t.Fatalf("key %q left its group's slot", k)
		}
	})
}

// All keys of one group hash to one slot; checked against a real server's
// CLUSTER KEYSLOT so the local CRC16 cannot be wrong in the same way.
func TestSpace_Key_groupSharesSlot(t *testing.T) {
	rdb := redistest.New(t, redistest.Options{Config: []string{"cluster-enabled yes"}}).Client()
	s := keys.Space{Prefix: "app", Module: "stock", Version: 1}
	slots := map[int]bool{}
	for _, id := range sampleIDs {
		g := keys.Group(id)
		want := redistest.KeySlot(s.Key(g, "journal"))
		for _, k := range []string{s.Key(g, "sku", id), s.Key(g, "limit", id, "buyer-1"), s.Key(g, "op", fmt.Sprint(len(id)))} {
			require.Equal(t, want, redistest.KeySlot(k), k)
			got, err := rdb.ClusterKeySlot(t.Context(), k).Result()
			require.NoError(t, err)
			require.EqualValues(t, want, got, k)
		}
		slots[want] = true
	}
	// shop-7/sku-1 and shop-7/sku-2 share a slot; the distinct groups do not collapse into one.
	require.Equal(t, redistest.KeySlot(s.Key("shop-7", "sku", "shop-7/sku-1")), redistest.KeySlot(s.Key(keys.Group("shop-7/sku-2"), "sku", "shop-7/sku-2")))
	require.Greater(t, len(slots), 3)
}
