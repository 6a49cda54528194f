package redistest_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redkit-go/redkit/redistest"
)

// clientKind is a go-redis client through a proxy: fresh (no connection
// open yet, so its first command follows a handshake) or warm, on
// go-redis's defaults (it re-sends after a read timeout) or sending once.
type clientKind struct {
	name            string
	warm, sendsOnce bool
	// adjust changes the options (a handshake with more in it).
	adjust func(*redis.Options)
}

var clientKinds = []clientKind{
	{name: "fresh/default options"},
	{name: "fresh/MaxRetries -1", sendsOnce: true},
	{name: "warm/default options", warm: true},
	{name: "warm/MaxRetries -1", warm: true, sendsOnce: true},
	{name: "fresh/RESP2, SELECT, SETNAME, AUTH", sendsOnce: true, adjust: func(o *redis.Options) {
		o.Protocol, o.DB, o.ClientName, o.Username, o.Password = 2, 2, "handshake", "alice", "pw"
	}},
}

// db2 is the database the handshake kind selects.
const db2 = 2

// handshakeServer is a server that knows the user of the handshake kind.
func handshakeServer(t *testing.T) *redistest.Server {
	return redistest.New(t, redistest.Options{Config: []string{"user alice on >pw ~* &* +@all"}})
}

func (k clientKind) client(t *testing.T, px *redistest.Proxy) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: px.Addr(), ReadTimeout: 500 * time.Millisecond}
	if k.sendsOnce {
		o.MaxRetries = -1
	}
	if k.adjust != nil {
		k.adjust(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	if k.warm {
		require.NoError(t, c.Ping(t.Context()).Err())
	}
	return c
}

// count reads the counter key in the database the kind's client uses.
func (k clientKind) count(t *testing.T, s *redistest.Server, key string) int64 {
	t.Helper()
	db := 0
	if k.adjust != nil {
		db = db2
	}
	n, err := s.Client(func(o *redis.Options) { o.DB = db }).Get(context.Background(), key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	require.NoError(t, err)
	return n
}

func requireTimeout(t *testing.T, err error) {
	t.Helper()
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "want a read timeout, got %v", err)
}

// TestProxy_DropReplies_everyDroppedReplyRan: a client that connects while
// replies are dropped gets through its handshake and sends its command,
// which runs; each reply dropped is one of a command that ran.
func TestProxy_DropReplies_everyDroppedReplyRan(t *testing.T) {
	s := handshakeServer(t)
	for _, k := range clientKinds {
		t.Run(k.name, func(t *testing.T) {
			px := redistest.NewProxy(t, s.Addr())
			c := k.client(t, px)
			px.DropReplies(true)
			err := c.Incr(t.Context(), t.Name()).Err()
			px.DropReplies(false)
			requireTimeout(t, err)
			ran := k.count(t, s, t.Name())
			require.Positive(t, ran, "the INCR ran")
			if k.sendsOnce {
				require.EqualValues(t, 1, ran)
			}
			require.Equal(t, ran, px.Dropped(), "each reply dropped is that of an INCR that ran")
		})
	}
}

// TestProxy_HoldReplies_freshClientRuns: replies to the handshake are not
// held, so a client that connects while replies are held sends its
// command, which runs although the client times out.
func TestProxy_HoldReplies_freshClientRuns(t *testing.T) {
	s := handshakeServer(t)
	for _, k := range clientKinds {
		t.Run(k.name, func(t *testing.T) {
			px := redistest.NewProxy(t, s.Addr())
			c := k.client(t, px)
			px.HoldReplies(time.Minute)
			err := c.Incr(t.Context(), t.Name()).Err()
			requireTimeout(t, err)
			require.Eventually(t, func() bool { return k.count(t, s, t.Name()) > 0 }, 10*time.Second, 10*time.Millisecond,
				"the INCR ran")
			if k.sendsOnce {
				require.EqualValues(t, 1, k.count(t, s, t.Name()))
			}
			px.HoldReplies(0)
		})
	}
}

// TestLostReply_commandRan: the reply LostReply reports lost is that of
// the call's command, which ran, whether the client had a connection or
// not and whether it re-sends or not.
func TestLostReply_commandRan(t *testing.T) {
	s := handshakeServer(t)
	for _, k := range clientKinds {
		t.Run(k.name, func(t *testing.T) {
			px := redistest.NewProxy(t, s.Addr())
			c := k.client(t, px)
			ran := int64(-1)
			err := redistest.LostReply(t, px, func() error { return c.Incr(t.Context(), t.Name()).Err() }, func() {
				ran = k.count(t, s, t.Name())
			})
			require.EqualValues(t, 1, ran, "when the reply is lost, the INCR has run once")
			if k.sendsOnce {
				requireTimeout(t, err)
				require.EqualValues(t, 1, k.count(t, s, t.Name()))
			}
		})
	}
}

// TestLostReply_scriptNotLoaded: the NOSCRIPT of an EVALSHA says nothing
// ran, so it passes; go-redis sends EVAL, which runs, and its reply is the
// one lost.
func TestLostReply_scriptNotLoaded(t *testing.T) {
	s := handshakeServer(t)
	for _, k := range clientKinds {
		t.Run(k.name, func(t *testing.T) {
			px := redistest.NewProxy(t, s.Addr())
			c := k.client(t, px)
			// A script of its own, so that no other subtest loaded it.
			script := redis.NewScript("return redis.call('INCR', KEYS[1]) -- " + t.Name())
			ran := int64(-1)
			err := redistest.LostReply(t, px, func() error {
				return script.Run(t.Context(), c, []string{t.Name()}).Err()
			}, func() { ran = k.count(t, s, t.Name()) })
			require.EqualValues(t, 1, ran, "when the reply is lost, the script has run once")
			if k.sendsOnce {
				requireTimeout(t, err)
			}
		})
	}
}

// TestProxy_DropRepliesAfter_countsCommandsThatRan: the handshake's replies,
// MULTI's and QUEUED do not count; EXEC's reply is the one lost.
func TestProxy_DropRepliesAfter_countsCommandsThatRan(t *testing.T) {
	s := redistest.New(t, redistest.Options{})
	px := redistest.NewProxy(t, s.Addr())
	ctx := t.Context()
	c := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 500 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	px.DropRepliesAfter(1)
	require.NoError(t, c.Set(ctx, "a", "1", 0).Err(), "a fresh client's first command is the first reply")
	requireTimeout(t, c.Set(ctx, "b", "2", 0).Err())
	require.EqualValues(t, 1, px.Dropped())
	require.Equal(t, "2", s.Client().Get(ctx, "b").Val())

	px.DropRepliesAfter(0)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "t1")
		p.Incr(ctx, "t2")
		return nil
	})
	px.DropReplies(false)
	requireTimeout(t, err)
	require.EqualValues(t, 2, px.Dropped(), "only EXEC's reply was dropped")
	require.Equal(t, "1", s.Client().Get(ctx, "t2").Val(), "the transaction ran")
}
