package valid_test

import (
	"errors"
	"fmt"

	"github.com/redkit-go/redkit/internal/valid"
)

func ExampleName() {
	fmt.Println(valid.Name("SKU", "shop-7/sku-1"))
	err := valid.Name("SKU", "sku {1}")
	fmt.Println(errors.Is(err, valid.ErrInvalid))
	fmt.Println(err)
	// Output:
	// <nil>
	// true
	// redkit: invalid argument: SKU "sku {1}" has byte " " at offset 3 (allowed: A-Z a-z 0-9 . _ - : and one '/')
}
