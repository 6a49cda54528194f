package redisconn_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/redkit-go/redkit/examples/kit/exampletest"
)

func TestMain(m *testing.M) {
	exampletest.SilenceRedisLog() // unreachable servers make go-redis log every failed dial
	goleak.VerifyTestMain(m)
}
