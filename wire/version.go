package wire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MinServerVersion is the oldest nats-server Cotal runs on (SPEC §13.12's broker floor): per-key
// TTLs, the extended consumer-create subject and the permission semantics the grants rely on.
const MinServerVersion = "2.12.0"

// CheckServerVersion returns an error unless version (as a server reports it, e.g. "2.12.1" or
// "v2.15.0-beta.1") is at least MinServerVersion. Clients call it right after connecting.
func CheckServerVersion(version string) error {
	got, err := parseVersion(version)
	if err != nil {
		return fmt.Errorf("broker version %q: %w", version, err)
	}
	floor, _ := parseVersion(MinServerVersion) // a constant that parses
	for i := range got {
		if got[i] != floor[i] {
			if got[i] < floor[i] {
				return fmt.Errorf("broker version %s is older than %s, the oldest Cotal supports; upgrade nats-server", version, MinServerVersion)
			}
			return nil
		}
	}
	return nil
}

func parseVersion(v string) ([3]int, error) {
	var out [3]int
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, errors.New("want major.minor.patch")
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, errors.New("want major.minor.patch")
		}
		out[i] = n
	}
	return out, nil
}
