package setup_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Shutdown must stop every exporter goroutine Start created.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
