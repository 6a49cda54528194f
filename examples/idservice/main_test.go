package main

import (
	"testing"

	"github.com/redkit-go/redkit/examples/kit/exampletest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	exampletest.SilenceRedisLog() // the fault tests make go-redis log every failed read
	goleak.VerifyTestMain(m)
}
