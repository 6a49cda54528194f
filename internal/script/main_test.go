package script_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction(redistest.DialProber)) }
