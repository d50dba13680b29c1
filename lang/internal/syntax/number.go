package syntax

import (
	"math"
	"strconv"
	"strings"
)

// FormatNumber spells v as JavaScript's Number::toString does (ECMA-262 §6.1.6.1.20), which is
// also how RFC 8785 writes a number: the shortest digits that read back as v, in positional
// notation from 1e-7 up to 1e21 and in exponent notation outside it.
func FormatNumber(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	case v == 0:
		return "0"
	}
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	e := strconv.FormatFloat(v, 'e', -1, 64) // d.ddde±x
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k, n := len(digits), x+1
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits
	}
	expSign := "+"
	if n-1 < 0 {
		expSign = "-"
	}
	exponent := strconv.Itoa(abs(n - 1))
	if k == 1 {
		return sign + digits + "e" + expSign + exponent
	}
	return sign + digits[:1] + "." + digits[1:] + "e" + expSign + exponent
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
