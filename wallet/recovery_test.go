package wallet_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redkit-go/redkit/wallet"
	"github.com/stretchr/testify/require"
)

// childEnv names the role this test binary plays when it runs as a second
// process that a test kills with SIGKILL (runChild).
const childEnv = "WALLET_TEST_CHILD"

// runChild plays the role named by childEnv: it starts a write, says
// "ready" on stdout once the write has reached Redis, and then waits to be
// killed, as a process that crashes at that point would.
func runChild() int {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("WALLET_TEST_ADDR")})
	led, err := wallet.New(rdb, wallet.WithKeyPrefix(os.Getenv("WALLET_TEST_PREFIX")), wallet.WithRecovery(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch role := os.Getenv(childEnv); role {
	case "transfer": // a transfer across groups begun, its amount held
		_, err = led.TransferSteps(ctx, wallet.Transfer{ID: "x1", From: "a/src", To: "b/dst", Amount: 30}, 1)
	case "hold": // a hold placed; its release was this process's to do
		_, err = led.Hold(ctx, wallet.HoldReq{ID: "h1", Account: "quiet", Amount: 4, TTL: time.Second})
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	select {} // until SIGKILL
}

// crashChild runs this test binary as a second process playing role, waits
// until it says ready, and kills it with SIGKILL.
func crashChild(t *testing.T, role, prefix string) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+role, "WALLET_TEST_ADDR="+shared.Addr(), "WALLET_TEST_PREFIX="+prefix)
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	line, _ := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, child.Process.Kill())
	_ = child.Wait()
	require.Equal(t, "ready\n", line)
}

// A transfer across groups whose process was killed midway is finished by
// the background recovery of any Ledger on the same Redis and prefix,
// on by default, though nobody ever calls its source account again: its
// amount does not stay held.
func TestRegress_Recovery_onByDefault_finishesCutTransferNobodyTouches(t *testing.T) {
	ctx := t.Context()
	wallet.SetDefaultRecovery(t, time.Second)
	seed, rdb, prefix := newLedger(t, wallet.WithRecovery(0))
	openFunded(t, seed, map[string]int64{"a/src": 100, "b/dst": 0})
	crashChild(t, "transfer", prefix)
	acct := prefix + ":wallet:v2:{a}:acct:a/src"
	require.Equal(t, "30", rdb.HGet(ctx, acct, "held").Val(), "in flight after the crash")

	// A process restarts with the default options and serves other
	// accounts only.
	restarted := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
	t.Cleanup(func() { _ = restarted.Close() })
	waitFor(t, func() bool {
		return rdb.HGet(ctx, acct, "held").Val() == "0" && rdb.ZCard(ctx, prefix+":wallet:v2:{a}:xpend").Val() == 0
	})
	require.Equal(t, int64(70), balanceOf(t, seed, "a/src").Posted)
	require.Equal(t, int64(30), balanceOf(t, seed, "b/dst").Posted)
	require.NoError(t, seed.Verify(ctx, "a/src"))
	require.NoError(t, seed.Verify(ctx, "b/dst"))
}

// The hold records of an account whose hold was placed by a process that
// was then killed (its reclaimer's schedule gone with it), and that nobody
// calls again, are released and handed to Redis's expiry by the
// background recovery of any Ledger on the same Redis and prefix.
func TestRegress_Recovery_onByDefault_releasesHoldsOfQuietAccount(t *testing.T) {
	ctx := t.Context()
	wallet.SetDefaultRecovery(t, time.Second)
	seed, rdb, prefix := newLedger(t, wallet.WithRecovery(0))
	openFunded(t, seed, map[string]int64{"quiet": 10})
	crashChild(t, "hold", prefix)
	acct := prefix + ":wallet:v2:{quiet}:acct:quiet"
	hk := []string{prefix + ":wallet:v2:{quiet}:holds:quiet", prefix + ":wallet:v2:{quiet}:hidx:quiet"}
	require.Equal(t, "4", rdb.HGet(ctx, acct, "held").Val())
	for _, k := range hk {
		require.Equal(t, time.Duration(-1), rdb.PTTL(ctx, k).Val(), "an open hold's records keep no expiry")
	}

	restarted := mustNew(t, shared.Client(), wallet.WithKeyPrefix(prefix))
	t.Cleanup(func() { _ = restarted.Close() })
	waitFor(t, func() bool {
		for _, k := range hk {
			if d := rdb.PTTL(ctx, k).Val(); d <= 0 || d > wallet.DefaultIdempotencyWindow {
				return false
			}
		}
		return rdb.HGet(ctx, acct, "held").Val() == "0"
	})
	require.Equal(t, int64(10), balanceOf(t, seed, "quiet").Available)
	require.NoError(t, seed.Verify(ctx, "quiet"))
}
