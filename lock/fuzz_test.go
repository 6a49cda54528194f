package lock_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redkit-go/redkit/lock"
	"github.com/redkit-go/redkit/redistest"
)

// fuzzState is what one fuzz input left on the shared server: the keys under
// its own prefix, and the database size.
type fuzzState struct {
	rdb    *redis.Client
	prefix string
	size   int64
}

func fuzzBefore(t *testing.T, rdb *redis.Client, prefix string) fuzzState {
	size, err := rdb.DBSize(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return fuzzState{rdb: rdb, prefix: prefix, size: size}
}

func (s fuzzState) keys(t *testing.T) []string {
	ks, err := s.rdb.Keys(t.Context(), s.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// requireUntouched fails when the input wrote anything.
func (s fuzzState) requireUntouched(t *testing.T, what string) {
	t.Helper()
	if ks := s.keys(t); len(ks) != 0 {
		t.Fatalf("%s was refused but wrote %q", what, ks)
	}
	if size := s.rdb.DBSize(t.Context()).Val(); size > s.size {
		t.Fatalf("%s was refused but the database grew from %d to %d keys", what, s.size, size)
	}
}

// requireTagged fails unless every key the input wrote carries exactly the
// hash tag of tag, then deletes them so the database stays small.
func (s fuzzState) requireTagged(t *testing.T, tag string) {
	t.Helper()
	ks := s.keys(t)
	for _, k := range ks {
		// The fence counter is shared by the names of a slot: its own tag,
		// in the same slot.
		if err := redistest.CheckKeyTag(k, tag); err != nil && !strings.HasSuffix(k, ":tokens") {
			t.Fatal(err)
		}
		if redistest.KeySlot(k) != redistest.KeySlot("{"+tag+"}") {
			t.Fatalf("key %q left the slot of {%s}", k, tag)
		}
	}
	if len(ks) > 0 {
		s.rdb.Del(t.Context(), ks...)
	}
}

// FuzzMutex feeds lock names and TTLs to a Mutex and a Semaphore: invalid
// input is ErrInvalid and writes nothing; valid input acquires, reports its
// own name in the fence, keeps every key in the name's slot group, and
// releases.
func FuzzMutex(f *testing.F) {
	f.Add("payout:merchant-42", int64(10*time.Second), 3)
	f.Add("shop-7/sku-1", int64(time.Second), 1)
	f.Add("{tag}", int64(time.Second), 1)
	f.Add("a", int64(9*time.Millisecond), 0)
	rdb := sharedClient(f)
	var n int
	f.Fuzz(func(t *testing.T, name string, ttl int64, permits int) {
		n++
		prefix := fmt.Sprintf("fz%d-%d", n, time.Now().UnixNano())
		d := time.Duration(ttl)
		locks := mustNew(t, rdb, lock.WithKeyPrefix(prefix), lock.WithPolling(time.Millisecond, 10*time.Millisecond))
		defer locks.Close()
		ctx := t.Context()
		want := redistest.ValidName(name) && d >= 10*time.Millisecond && d <= 24*time.Hour
		st := fuzzBefore(t, rdb, prefix)

		m := locks.Mutex(name, lock.WithTTL(d), lock.WithWatchdog(false))
		l, err := m.TryAcquire(ctx)
		if !want {
			if !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("Mutex(%q, ttl %v).TryAcquire = %v, want ErrInvalid", name, d, err)
			}
			st.requireUntouched(t, "mutex acquire")
		} else {
			if err != nil {
				t.Fatalf("Mutex(%q, ttl %v).TryAcquire: %v", name, d, err)
			}
			if fe := l.Fence(); fe.Name != name || fe.Token != 1 || m.Name() != name {
				t.Fatalf("fence %+v / name %q for lock %q", fe, m.Name(), name)
			}
			if err := l.Release(ctx); err != nil && !errors.Is(err, lock.ErrLeaseExpired) {
				t.Fatalf("release %q: %v", name, err)
			}
			st.requireTagged(t, redistest.Tag(name))
		}

		want = want && permits >= 1 && permits <= lock.MaxPermits
		st = fuzzBefore(t, rdb, prefix)
		l, err = locks.Semaphore(name, permits, lock.WithTTL(d), lock.WithWatchdog(false)).TryAcquire(ctx)
		if !want {
			if !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("Semaphore(%q, %d, ttl %v).TryAcquire = %v, want ErrInvalid", name, permits, d, err)
			}
			st.requireUntouched(t, "semaphore acquire")
			return
		}
		if err != nil {
			t.Fatalf("Semaphore(%q, %d, ttl %v).TryAcquire: %v", name, permits, d, err)
		}
		if err := l.Release(ctx); err != nil && !errors.Is(err, lock.ErrLeaseExpired) {
			t.Fatalf("release semaphore %q: %v", name, err)
		}
		st.requireTagged(t, redistest.Tag(name))
	})
}

// FuzzCheckFence feeds tokens to the fence check: 0 and tokens above 2^53-1
// are ErrInvalid and write nothing; a valid token is accepted once recorded
// and a lower one is stale.
func FuzzCheckFence(f *testing.F) {
	f.Add(uint64(1))
	f.Add(uint64(0))
	f.Add(uint64(1<<53 - 1))
	f.Add(uint64(1 << 53))
	rdb := sharedClient(f)
	var n int
	f.Fuzz(func(t *testing.T, token uint64) {
		n++
		prefix := fmt.Sprintf("fzf%d-%d", n, time.Now().UnixNano())
		key := lock.FenceKey(prefix, "acct-1", "payout")
		st := fuzzBefore(t, rdb, prefix)
		err := lock.CheckFence(t.Context(), rdb, key, lock.Fence{Name: "payout", Token: token})
		if token == 0 || token > 1<<53-1 {
			if !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("CheckFence(token %d) = %v, want ErrInvalid", token, err)
			}
			st.requireUntouched(t, "fence check")
			return
		}
		if err != nil {
			t.Fatalf("CheckFence(token %d): %v", token, err)
		}
		if got, _ := rdb.Get(t.Context(), key).Uint64(); got != token {
			t.Fatalf("fence recorded %d, want %d", got, token)
		}
		if token > 1 {
			err = lock.CheckFence(t.Context(), rdb, key, lock.Fence{Name: "payout", Token: token - 1})
			if !errors.Is(err, lock.ErrStaleFence) {
				t.Fatalf("CheckFence(token %d after %d) = %v, want ErrStaleFence", token-1, token, err)
			}
		}
		st.requireTagged(t, "acct-1")
	})
}
