package keys_test

import (
	"fmt"

	"github.com/redkit-go/redkit/internal/keys"
)

func ExampleSpace_Key() {
	s := keys.Space{Prefix: keys.DefaultPrefix, Module: "stock", Version: 1}
	id := "shop-7/sku-1"
	fmt.Println(s.Key(keys.Group(id), "sku", id))
	fmt.Println(s.Key(keys.Group("sku-2"), "journal"))
	// Output:
	// redkit:stock:v1:{shop-7}:sku:shop-7/sku-1
	// redkit:stock:v1:{sku-2}:journal
}
