package up

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gocotal/cotal/internal/authority"
)

// sizeUnits are the suffixes a size takes, as operators write them: SI units are powers of
// 1000, IEC units powers of 1024.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// parseSize reads a byte count such as 512MiB, 16GB or 1073741824; "unlimited" is
// authority.Unlimited.
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "unlimited" {
		return authority.Unlimited, nil
	}
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	unit, ok := sizeUnits[strings.TrimSpace(t[i:])]
	n, err := strconv.ParseFloat(t[:i], 64)
	if !ok || err != nil || i == 0 {
		return 0, fmt.Errorf("%q is not a size: write bytes, a number with KB, MB, GB, TB, KiB, MiB, GiB or TiB, or unlimited", s)
	}
	v := n * float64(unit)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(v), nil
}
