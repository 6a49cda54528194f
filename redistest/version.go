package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Version is a redis-server version, as reported by INFO server.
type Version struct {
	Major, Minor, Patch int
}

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool {
	if v.Major != major {
		return v.Major > major
	}
	return v.Minor >= minor
}

// String returns "major.minor.patch".
func (v Version) String() string {
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// ParseVersion parses "7.0.15" (a missing patch or minor counts as 0).
func ParseVersion(s string) (Version, error) {
	parts := strings.SplitN(strings.TrimSpace(s), ".", 3)
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil {
			return Version{}, fmt.Errorf("redistest: bad version %q", s)
		}
		n[i] = v
	}
	return Version{Major: n[0], Minor: n[1], Patch: n[2]}, nil
}

// Version asks the running server for its version (INFO server).
func (s *Server) Version(ctx context.Context) (Version, error) {
	info, err := s.info(ctx, "server")
	if err != nil {
		return Version{}, err
	}
	return ParseVersion(infoField(info, "redis_version"))
}

// infoField returns the value of "name:value" in an INFO reply, or "".
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
