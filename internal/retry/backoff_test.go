package retry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoff_boundedAndJittered(t *testing.T) {
	p := Policy{Attempts: 10, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	for attempt, ceiling := range map[int]time.Duration{
		1: 10 * time.Millisecond, 2: 20 * time.Millisecond, 3: 40 * time.Millisecond,
		5: 160 * time.Millisecond, 6: 200 * time.Millisecond, 60: 200 * time.Millisecond,
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := backoff(p, attempt)
			require.GreaterOrEqual(t, d, ceiling/2, "attempt %d", attempt)
			require.LessOrEqual(t, d, ceiling, "attempt %d", attempt)
			seen[d] = true
		}
		require.Greater(t, len(seen), 1, "attempt %d: no jitter", attempt)
	}
	require.Zero(t, backoff(Policy{}, 3))
}

func TestDefaultPolicy(t *testing.T) {
	require.Equal(t, Policy{Attempts: 3, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}, DefaultPolicy())
}
