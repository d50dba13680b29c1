package meshwire

import "strings"

// PatternCovers reports whether the subject pattern a covers every subject the pattern p covers:
// '>' covers one or more remaining tokens of any kind, '*' covers one token that is not '>', and
// a literal covers only itself.
func PatternCovers(a, p string) bool {
	at, pt := strings.Split(a, "."), strings.Split(p, ".")
	for i, t := range at {
		if t == ">" {
			return i < len(pt)
		}
		if i >= len(pt) || pt[i] == ">" {
			return false
		}
		if t != "*" && t != pt[i] {
			return false
		}
	}
	return len(at) == len(pt)
}

// PatternsOverlap reports whether some subject matches both subject patterns a and b.
func PatternsOverlap(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		switch {
		case i == len(at) || i == len(bt):
			return len(at) == len(bt)
		case at[i] == ">" || bt[i] == ">":
			return true
		case at[i] != "*" && bt[i] != "*" && at[i] != bt[i]:
			return false
		}
	}
}
