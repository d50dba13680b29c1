package lang

import (
	"fmt"
	"math"
	"strconv"
)

// unitMillis are the duration units (§4.6) in milliseconds.
var unitMillis = map[string]int64{"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}

// ParseDuration reads a duration, a whole number and one unit (ms, s, m, h, d: "30s", "4h"), as
// milliseconds. Nothing else parses: no bare number, no default unit.
func ParseDuration(s string) (int64, error) {
	m := durationPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a duration: a whole number and one unit of ms, s, m, h, d (\"30s\", \"10m\")", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	unit := unitMillis[m[2]]
	if err != nil || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("the duration %q is too long", s)
	}
	return n * unit, nil
}
