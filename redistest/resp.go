package redistest

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"sync"
)

// The proxy reads the RESP traffic it forwards so that its faults act on
// the replies of the user's commands only: it matches each reply to the
// command it answers (Redis answers the commands of a connection in order)
// and lets through the replies that say nothing about what a command did
// (a connection's handshake, MULTI and QUEUED) or that say it did not run.

// cmdKind is what a command's reply tells about it.
type cmdKind uint8

const (
	// cmdUser is a command of the user's: its reply says what it did.
	cmdUser cmdKind = iota
	// cmdExec is EXEC: its reply says what the transaction did; a null
	// reply (a watched key changed) says that nothing ran.
	cmdExec
	// cmdConn is a command the client library sends on its own (the
	// handshake of a new connection, topology queries).
	cmdConn
	// cmdQueued is MULTI, DISCARD or a command queued in a transaction:
	// it has not run when its reply comes.
	cmdQueued
)

// replyKind is how the faults treat a reply.
type replyKind uint8

const (
	// replyRan answers a command of the user's that ran: DropReplies and
	// HoldReplies act on it.
	replyRan replyKind = iota
	// replyOther answers a command the client library sent on its own, or
	// says that a command did not run: it passes (after SetLatency).
	replyOther
	// replyUnknown cannot be matched to a command (pub/sub messages, pushes,
	// a connection in a mode the proxy does not follow): the faults act on
	// it, and LostReply does not count it.
	replyUnknown
)

// notRun holds the error codes with which Redis refuses a command before it
// runs (or, in a script, before its first write).
var notRun = map[string]bool{
	"NOSCRIPT": true, "MOVED": true, "ASK": true, "TRYAGAIN": true, "CROSSSLOT": true,
	"CLUSTERDOWN": true, "BUSY": true, "LOADING": true, "MASTERDOWN": true, "READONLY": true,
	"NOREPLICAS": true, "NOAUTH": true, "OOM": true, "MISCONF": true, "EXECABORT": true,
}

// errIncomplete means the buffer ends inside a RESP value.
var errIncomplete = errors.New("incomplete RESP value")

// errProtocol means the bytes are not RESP.
var errProtocol = errors.New("not RESP")

// line returns the bytes of b from i up to the next CRLF and the index
// after it.
func line(b []byte, i int) ([]byte, int, error) {
	j := bytes.Index(b[i:], []byte("\r\n"))
	if j < 0 {
		return nil, 0, errIncomplete
	}
	return b[i : i+j], i + j + 2, nil
}

func length(s []byte) (int, error) {
	n, err := strconv.Atoi(string(s))
	if err != nil {
		return 0, errProtocol
	}
	return n, nil
}

// respValue returns the index just past the RESP2 or RESP3 value that
// starts at b[i]. An attribute (|) is returned on its own.
func respValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errIncomplete
	}
	t := b[i]
	if !bytes.ContainsRune([]byte("+-:_,#($!=*~>%|"), rune(t)) {
		return 0, errProtocol // at once: bytes of another protocol pass undelayed
	}
	l, next, err := line(b, i+1)
	if err != nil {
		return 0, err
	}
	switch t {
	case '+', '-', ':', '_', ',', '#', '(':
		return next, nil
	case '$', '!', '=':
		n, err := length(l)
		if err != nil {
			return 0, err
		}
		if n < 0 {
			return next, nil // RESP2 null bulk string
		}
		if next+n+2 > len(b) {
			return 0, errIncomplete
		}
		if b[next+n] != '\r' || b[next+n+1] != '\n' {
			return 0, errProtocol
		}
		return next + n + 2, nil
	case '*', '~', '>', '%', '|':
		n, err := length(l)
		if err != nil {
			return 0, err
		}
		if t == '%' || t == '|' {
			n *= 2
		}
		for range n { // n < 0: RESP2 null array
			if next, err = respValue(b, next); err != nil {
				return 0, err
			}
		}
		return next, nil
	}
	return 0, errProtocol
}

// notRunReply reports whether the reply v is an error that says the command
// did not run.
func notRunReply(v []byte) bool {
	var text []byte
	switch v[0] {
	case '-':
		text = v[1:]
	case '!':
		if _, next, err := line(v, 1); err == nil {
			text = v[next:]
		}
	default:
		return false
	}
	code, _, _ := bytes.Cut(text, []byte(" "))
	code, _, _ = bytes.Cut(code, []byte("\r"))
	return notRun[string(code)]
}

// nullReply reports whether v is a null (RESP2 *-1 or $-1, RESP3 _).
func nullReply(v []byte) bool {
	s := string(v)
	return s == "*-1\r\n" || s == "$-1\r\n" || s == "_\r\n"
}

// request returns the first words of the command that starts at b[i]
// (upper-cased name, subcommand and its first argument) and the index after
// it, or ok false for an empty line, which Redis ignores.
func request(b []byte, i int) (words [3]string, next int, ok bool, err error) {
	if i >= len(b) {
		return words, 0, false, errIncomplete
	}
	if b[i] != '*' {
		// An inline command: one line of words (LF alone ends it too).
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return words, 0, false, errIncomplete
		}
		f := strings.Fields(string(b[i : i+j]))
		for k := 0; k < len(f) && k < len(words); k++ {
			words[k] = strings.ToUpper(f[k])
		}
		return words, i + j + 1, len(f) > 0, nil
	}
	l, next, err := line(b, i+1)
	if err != nil {
		return words, 0, false, err
	}
	n, err := length(l)
	if err != nil {
		return words, 0, false, err
	}
	for k := 0; k < n; k++ {
		if next >= len(b) {
			return words, 0, false, errIncomplete
		}
		if b[next] != '$' {
			return words, 0, false, errProtocol
		}
		start := next
		if next, err = respValue(b, next); err != nil {
			return words, 0, false, err
		}
		if k < len(words) {
			_, body, _ := line(b, start+1)
			words[k] = strings.ToUpper(string(b[body : next-2]))
		}
	}
	return words, next, n > 0, nil
}

// tracker matches the replies on one proxied connection to the commands
// sent on it.
type tracker struct {
	mu sync.Mutex
	// req holds the bytes of a request not fully read yet.
	req []byte
	// pending are the commands sent whose replies have not come, oldest
	// first.
	pending []cmdKind
	// started is set by the first command that is not a handshake's.
	started bool
	multi   bool
	// lost says why replies can no longer be matched; empty while they can.
	lost string
	// rep holds the bytes of a reply not fully read yet.
	rep []byte
}

// sent records the commands in a chunk of request bytes. It runs before
// the chunk is forwarded, so every reply finds its command recorded.
func (t *tracker) sent(b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lost != "" {
		return
	}
	t.req = append(t.req, b...)
	i := 0
	for i < len(t.req) {
		words, next, ok, err := request(t.req, i)
		if errors.Is(err, errIncomplete) {
			break
		}
		if err != nil {
			t.lose("a request that is not RESP")
			return
		}
		i = next
		if ok {
			t.command(words)
		}
		if t.lost != "" {
			return
		}
	}
	t.req = bytes.Clone(t.req[i:])
}

func (t *tracker) lose(why string) {
	t.lost, t.req, t.pending = why, nil, nil
}

// handshake reports whether a command is one go-redis (or another client)
// sends on a new connection before the first command of its user.
func handshake(name, sub string) bool {
	switch name {
	case "HELLO", "AUTH", "SELECT", "READONLY", "READWRITE":
		return true
	case "CLIENT":
		switch sub {
		case "SETNAME", "SETINFO", "TRACKING", "MAINT_NOTIFICATIONS":
			return true
		}
	}
	return false
}

// command records one command sent.
func (t *tracker) command(w [3]string) {
	name, sub := w[0], w[1]
	if !t.started && handshake(name, sub) {
		t.pending = append(t.pending, cmdConn)
		return
	}
	t.started = true
	if t.multi {
		kind := cmdQueued
		switch name {
		case "EXEC":
			kind, t.multi = cmdExec, false
		case "DISCARD", "RESET":
			t.multi = false
		}
		t.pending = append(t.pending, kind)
		return
	}
	switch name {
	case "MULTI":
		t.multi = true
		t.pending = append(t.pending, cmdQueued)
		return
	case "COMMAND":
		t.pending = append(t.pending, cmdConn)
		return
	case "CLUSTER":
		if sub == "SLOTS" || sub == "SHARDS" || sub == "NODES" {
			t.pending = append(t.pending, cmdConn)
			return
		}
	case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE":
		t.lose("pub/sub")
		return
	case "MONITOR", "SYNC", "PSYNC":
		t.lose(strings.ToLower(name))
		return
	}
	if name == "CLIENT" && sub == "REPLY" {
		t.lose("CLIENT REPLY")
		return
	}
	t.pending = append(t.pending, cmdUser)
}

// part is a run of reply bytes and how the faults treat it.
type part struct {
	data []byte
	kind replyKind
}

// received splits a chunk of reply bytes into whole replies, each with its
// kind; bytes of a reply not complete yet wait for the next chunk.
func (t *tracker) received(b []byte) []part {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lost != "" {
		b, t.rep = append(t.rep, b...), nil // a copy: the caller reuses b
		return []part{{data: b, kind: replyUnknown}}
	}
	t.rep = append(t.rep, b...)
	var out []part
	i := 0
	for i < len(t.rep) {
		next, err := respValue(t.rep, i)
		for at := i; err == nil && t.rep[at] == '|'; { // an attribute goes with its value
			at = next
			next, err = respValue(t.rep, at)
		}
		if errors.Is(err, errIncomplete) {
			break
		}
		if err != nil {
			t.lose("a reply that is not RESP")
			out = append(out, part{data: bytes.Clone(t.rep[i:]), kind: replyUnknown})
			t.rep = nil
			return out
		}
		v := t.rep[i:next]
		out = append(out, part{data: bytes.Clone(v), kind: t.reply(v)})
		i = next
		if t.lost != "" {
			if i < len(t.rep) {
				out = append(out, part{data: bytes.Clone(t.rep[i:]), kind: replyUnknown})
			}
			t.rep = nil
			return out
		}
	}
	t.rep = bytes.Clone(t.rep[i:])
	return out
}

// reply matches the whole reply v to its command.
func (t *tracker) reply(v []byte) replyKind {
	for v[0] == '|' { // skip attributes to the value itself
		end, _ := respValue(v, 0)
		v = v[end:]
	}
	if v[0] == '>' {
		return replyUnknown // out of band: a push answers no command
	}
	if len(t.pending) == 0 {
		t.lose("a reply to no command")
		return replyUnknown
	}
	kind := t.pending[0]
	t.pending = t.pending[1:]
	switch {
	case kind == cmdConn || kind == cmdQueued:
		return replyOther
	case notRunReply(v), kind == cmdExec && nullReply(v):
		return replyOther
	}
	return replyRan
}
