package idgen

// Hooks for the tests in package idgen_test.

// Pending returns how many calls of s are registered as in flight and how
// many returned values s keeps for them.
func (s *Sequence) Pending() (inflight, recent int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.inflight {
		inflight += n
	}
	return inflight, len(s.recent)
}
