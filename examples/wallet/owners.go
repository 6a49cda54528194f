package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/examples/kit/httpx"
	"github.com/redkit-go/redkit/wallet"
)

// owners records who may act on each account: its owner, the principal it
// was opened for, and the principals an admin granted access to. The wallet
// module knows nothing of principals; this is the service's own record, a
// hash per account in the account's slot group, kept as long as the
// account:
//
//	wallet:owners:{<group>}:<account>   owner=<principal>   grant:<principal>=1
//
// An account without a record (opened by another program on the same
// Redis) is nobody's: only admins act on it.
//
// An account's owner never changes, so the owners seen are remembered (at
// most maxKnownOwners accounts): the owner's own payments then cost no
// extra round trip, and go to Redis as one command, the payment, which a
// lost reply leaves with an unknown outcome rather than a failed check.
// Grants can be taken back, so they are read every time.
type owners struct {
	rdb redis.UniversalClient

	mu    sync.Mutex
	known map[string]string // account -> owner
}

// maxKnownOwners bounds owners.known.
const maxKnownOwners = 1 << 14

func (o *owners) remember(account, owner string) {
	if owner == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.known == nil {
		o.known = make(map[string]string)
	}
	if _, ok := o.known[account]; !ok && len(o.known) >= maxKnownOwners {
		for a := range o.known { // one out, whichever
			delete(o.known, a)
			break
		}
	}
	o.known[account] = owner
}

func (o *owners) knownOwner(account string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.known[account]
}

func ownersKey(account string) string {
	group, _, _ := strings.Cut(account, "/")
	return "wallet:owners:{" + group + "}:" + account
}

// errNotYours refuses a principal an account it neither owns nor was
// granted. It is told as the 404 of an account that does not exist, so
// that nobody learns which accounts of others exist.
var errNotYours = fmt.Errorf("not yours: %w", wallet.ErrAccountNotFound)

// claim makes principal the owner of account unless the account has another
// owner already, which it returns.
func (o *owners) claim(ctx context.Context, account, principal string) (owner string, err error) {
	key := ownersKey(account)
	set, err := o.rdb.HSetNX(ctx, key, "owner", principal).Result()
	switch {
	case err != nil:
		return "", written(err)
	case !set:
		if owner, err = o.rdb.HGet(ctx, key, "owner").Result(); err != nil {
			return "", err
		}
	default:
		owner = principal
	}
	o.remember(account, owner)
	return owner, nil
}

// owner returns the owner of account and the principals granted access to
// it; "" when it has none.
func (o *owners) owner(ctx context.Context, account string) (owner string, grants []string, err error) {
	m, err := o.rdb.HGetAll(ctx, ownersKey(account)).Result()
	if err != nil {
		return "", nil, err
	}
	for f := range m {
		if p, ok := strings.CutPrefix(f, "grant:"); ok {
			grants = append(grants, p)
		}
	}
	slices.Sort(grants)
	o.remember(account, m["owner"])
	return m["owner"], grants, nil
}

// check returns errNotYours unless principal owns account or was granted
// access to it, and the account's owner otherwise. account is checked
// first (a 400 for a name redkit refuses), since it becomes part of a key.
func (o *owners) check(ctx context.Context, account, principal string) (owner string, err error) {
	if err := httpx.CheckName("account", account); err != nil {
		return "", err
	}
	if o.knownOwner(account) == principal {
		return principal, nil
	}
	owner, grants, err := o.owner(ctx, account)
	if err != nil {
		return "", err
	}
	if owner != principal && !slices.Contains(grants, principal) {
		return "", errNotYours
	}
	return owner, nil
}

// grant gives principal access to account (on) or takes it away.
func (o *owners) grant(ctx context.Context, account, principal string, on bool) error {
	if on {
		return written(o.rdb.HSet(ctx, ownersKey(account), "grant:"+principal, 1).Err())
	}
	return written(o.rdb.HDel(ctx, ownersKey(account), "grant:"+principal).Err())
}

// written is the error of a write to an account's record: when Redis gave
// no reply (the request's deadline came first, the connection broke), the
// write may have been applied all the same, so the client is told that
// the outcome is unknown (503 unknown_outcome: send the same request
// again), as for the ledger's own writes, not that nothing was done. An
// error reply from Redis is a write that did not happen.
func written(err error) error {
	var reply redis.Error
	if err == nil || errors.As(err, &reply) {
		return err
	}
	return httpx.UnknownOutcome(err)
}

// mayAct returns nil when the caller may act on account: an admin may on
// every account (and needs no round trip to Redis to learn so), anyone else
// on those it owns or was granted (owners.check).
func (s *server) mayAct(r *http.Request, account string) error {
	_, err := s.access(r, account, false)
	return err
}

// access is mayAct that also returns the account's owner when needed, or
// when it had to read it anyway.
func (s *server) access(r *http.Request, account string, needOwner bool) (owner string, err error) {
	p := httpx.Principal(r)
	if !p.Has(scopeAdmin) {
		return s.owners.check(r.Context(), account, p.ID)
	}
	if err := httpx.CheckName("account", account); err != nil || !needOwner {
		return "", err
	}
	owner, _, err = s.owners.owner(r.Context(), account)
	return owner, err
}

// errOwnerConflict is the 409 of an open that names another owner than
// the account has.
var errOwnerConflict = errors.New("the account is open already, for another owner")
