package valid_test

import (
	"testing"

	"github.com/redkit-go/redkit/internal/valid"
)

func BenchmarkName(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = valid.Name("SKU", "shop-7/sku-1")
	}
}
