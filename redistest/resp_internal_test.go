package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestRespValue(t *testing.T) {
	for _, v := range []string{
		"+OK\r\n", "-ERR x\r\n", ":12\r\n", "$3\r\nfoo\r\n", "$-1\r\n", "$0\r\n\r\n", "*-1\r\n",
		"*2\r\n$1\r\na\r\n:1\r\n", "_\r\n", ",1.5\r\n", "#t\r\n", "(123\r\n", "!5\r\nERR x\r\n",
		"=8\r\ntxt:abcd\r\n", "%1\r\n+k\r\n*1\r\n:1\r\n", "~2\r\n+a\r\n+b\r\n", ">2\r\n+x\r\n+y\r\n",
		"$4\r\na\r\nb\r\n", // CRLF inside a bulk string
	} {
		n, err := respValue([]byte(v+"+next\r\n"), 0)
		require.NoError(t, err, "%q", v)
		require.Equal(t, len(v), n, "%q", v)
		for cut := range len(v) {
			_, err := respValue([]byte(v[:cut]), 0)
			require.ErrorIs(t, err, errIncomplete, "%q cut at %d", v, cut)
		}
	}
	for _, v := range []string{"?x\r\n", "$x\r\n", "$1\r\nab\r\n", "N", "R\x00\x00"} {
		_, err := respValue([]byte(v), 0)
		require.ErrorIs(t, err, errProtocol, "%q", v)
	}
}

func TestRequest(t *testing.T) {
	for in, want := range map[string][3]string{
		"*3\r\n$6\r\nclient\r\n$7\r\nsetinfo\r\n$8\r\nlib-name\r\n": {"CLIENT", "SETINFO", "LIB-NAME"},
		"*1\r\n$4\r\nPING\r\n": {"PING"},
		"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\na\n\r\n$2\r\nPX\r\n": {"SET", "K", "A\n"},
		"set k v\r\n": {"SET", "K", "V"},
		"ping\n":      {"PING"},
	} {
		w, n, ok, err := request([]byte(in+"PING\r\n"), 0)
		require.NoError(t, err, "%q", in)
		require.True(t, ok)
		require.Equal(t, len(in), n, "%q", in)
		require.Equal(t, want, w, "%q", in)
		for cut := range len(in) {
			_, _, _, err := request([]byte(in[:cut]), 0)
			require.ErrorIs(t, err, errIncomplete, "%q cut at %d", in, cut)
		}
	}
	for _, in := range []string{"\r\n", "*0\r\n", "  \n"} {
		_, n, ok, err := request([]byte(in), 0)
		require.NoError(t, err)
		require.False(t, ok, "%q is no command", in)
		require.Equal(t, len(in), n)
	}
}

// kinds feeds the tracker requests and then replies, one byte at a time
// when split, and returns the kind of each reply.
func kinds(t *testing.T, requests, replies string, split bool) []replyKind {
	t.Helper()
	tr := &tracker{}
	step := len(requests) + len(replies)
	if split {
		step = 1
	}
	for i := 0; i < len(requests); i += step {
		tr.sent([]byte(requests[i:min(i+step, len(requests))]))
	}
	var out []replyKind
	var joined strings.Builder
	for i := 0; i < len(replies); i += step {
		for _, p := range tr.received([]byte(replies[i:min(i+step, len(replies))])) {
			out = append(out, p.kind)
			joined.Write(p.data)
		}
	}
	require.Equal(t, replies, joined.String(), "every byte is passed on once, in order")
	return out
}

func TestTracker(t *testing.T) {
	o, r, u := replyOther, replyRan, replyUnknown
	for _, tc := range []struct {
		name, requests, replies string
		want                    []replyKind
	}{
		{"handshake then command",
			"HELLO 3\r\nCLIENT SETINFO LIB-NAME x\r\nCLIENT SETINFO LIB-VER 1\r\nSET k v\r\nGET k\r\n",
			"%1\r\n+server\r\n+redis\r\n+OK\r\n+OK\r\n+OK\r\n$1\r\nv\r\n", []replyKind{o, o, o, r, r}},
		{"SELECT after the first command is the user's",
			"PING\r\nSELECT 1\r\n", "+PONG\r\n+OK\r\n", []replyKind{r, r}},
		{"refusals that say nothing ran",
			"EVALSHA abc 0\r\nSET k v\r\nGET k\r\nINCR k\r\nEVAL x 0\r\n",
			"-NOSCRIPT No matching script\r\n-MOVED 1 127.0.0.1:1\r\n-BUSY busy\r\n-ERR not an integer\r\n!8\r\nLOADING \r\n",
			[]replyKind{o, o, o, r, o}},
		{"transaction",
			"MULTI\r\nINCR a\r\nINCR b\r\nEXEC\r\nMULTI\r\nINCR a\r\nEXEC\r\nMULTI\r\nDISCARD\r\nGET a\r\n",
			"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n:1\r\n+OK\r\n+QUEUED\r\n*-1\r\n+OK\r\n+OK\r\n$1\r\n1\r\n",
			[]replyKind{o, o, o, r, o, o, o, o, o, r}},
		{"library queries", "GET k\r\nCLUSTER SLOTS\r\nCOMMAND\r\n", "$-1\r\n*0\r\n*0\r\n", []replyKind{r, o, o}},
		{"pushes answer no command", "GET k\r\n", ">2\r\n+invalidate\r\n*0\r\n$-1\r\n", []replyKind{u, r}},
		{"attribute", "GET k\r\n", "|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n", []replyKind{r}},
		{"pub/sub is not followed", "GET k\r\nSUBSCRIBE ch\r\n", "$-1\r\n*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
			[]replyKind{u}},
		{"a reply to no command", "", "+OK\r\n", []replyKind{u}},
		{"not RESP", "GET k\r\n", "?what\r\n", []replyKind{u}},
		{"another protocol", "\x00\x00\x00\x08\x04\xd2\x16\x2f", "N", []replyKind{u}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, kinds(t, tc.requests, tc.replies, false))
			if tc.want[len(tc.want)-1] != u { // a lost track loses the rest in one piece
				require.Equal(t, tc.want, kinds(t, tc.requests, tc.replies, true))
			}
		})
	}
}

// fatalRecorder records Fatalf and ends the goroutine, as testing.T does.
type fatalRecorder struct {
	mu  sync.Mutex
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// lostReply runs LostReply on a goroutine of its own, as a test would,
// and returns what it failed the test with and whether then ran.
func lostReply(px *Proxy, call func() error) (msg string, thenRan bool) {
	f := &fatalRecorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = LostReply(f, px, call, func() { thenRan = true })
	}()
	<-done
	return f.msg, thenRan
}

// TestLostReply_failsWhenNoCommandRan: LostReply fails the test when no
// reply of a command that ran was dropped: the call sent nothing, its
// command was refused, or the replies dropped could not be matched to
// commands (here a subscriber's message).
func TestLostReply_failsWhenNoCommandRan(t *testing.T) {
	s, err := Start(t.Context(), Options{})
	require.NoError(t, err)
	defer s.Close()
	px, err := StartProxy(s.Addr())
	require.NoError(t, err)
	defer px.Close()
	ctx := t.Context()
	c := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 2 * time.Second, MaxRetries: -1})
	defer c.Close()

	msg, thenRan := lostReply(px, func() error { return nil })
	require.False(t, thenRan)
	require.Contains(t, msg, "before the reply of a command that ran was dropped")

	msg, thenRan = lostReply(px, func() error { return c.EvalSha(ctx, "0000000000000000000000000000000000000000", nil).Err() })
	require.False(t, thenRan)
	require.Contains(t, msg, "NOSCRIPT")

	sub, err := net.Dial("tcp", px.Addr())
	require.NoError(t, err)
	defer sub.Close()
	_, err = sub.Write([]byte("SUBSCRIBE ch\r\n"))
	require.NoError(t, err)
	r := bufio.NewReader(sub)
	for range 6 { // the confirmation: *3, subscribe, ch, :1
		_, err := r.ReadString('\n')
		require.NoError(t, err)
	}
	direct := s.Client()
	msg, thenRan = lostReply(px, func() error {
		for px.droppedUnmatched() == 0 {
			if err := direct.Publish(context.Background(), "ch", "m").Err(); err != nil {
				return err
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	})
	require.False(t, thenRan)
	require.Contains(t, msg, "could not match to commands")
	require.Zero(t, px.Dropped())
}
