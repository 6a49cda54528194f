package reliability_test

import (
	"errors"
	"testing"

	"github.com/redkit-go/redkit/idgen"
	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/stock"
	"github.com/redkit-go/redkit/wallet"
)

// The errors a caller must match are exported by every module where they
// can arise, and are the same error in each, so one errors.Is serves a
// service that imports several modules.
func TestErrors_sameAcrossModules(t *testing.T) {
	for name, errs := range map[string][]error{
		"ErrReplicaAck":    {idgen.ErrReplicaAck, lock.ErrReplicaAck, stock.ErrReplicaAck, wallet.ErrReplicaAck},
		"ErrRiskySettings": {idgen.ErrRiskySettings, stock.ErrRiskySettings, wallet.ErrRiskySettings},
		"ErrInvalid":       {idgen.ErrInvalid, lock.ErrInvalid, stock.ErrInvalid, wallet.ErrInvalid},
	} {
		for _, err := range errs[1:] {
			if !errors.Is(err, errs[0]) {
				t.Errorf("%s: %v is not %v", name, err, errs[0])
			}
		}
	}
}
