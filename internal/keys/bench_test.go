package keys_test

import (
	"testing"

	"github.com/redkit-go/redkit/internal/keys"
)

func BenchmarkSpace_Key(b *testing.B) {
	s := keys.Space{Prefix: keys.DefaultPrefix, Module: "stock", Version: 1}
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Key("shop-7", "sku", "shop-7/sku-1")
	}
}
