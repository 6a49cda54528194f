package setup_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redkit-go/redkit/otelx/setup"
)

// With no OTEL_* variables set, Start exports nothing and Shutdown is
// instant; set OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER=console)
// to see traces.
func ExampleStart() {
	tel, err := setup.Start(context.Background(), "checkout")
	if err != nil {
		log.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	fmt.Println("exporting:", tel.Enabled())
	// Output: exporting: false
}
