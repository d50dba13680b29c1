package up

import (
	"testing"

	"github.com/gocotal/cotal/internal/authority"
)

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"1048576": 1 << 20, "512MiB": 512 << 20, "16GiB": 16 << 30, "16GB": 16e9, "2 gb": 2e9,
		"1.5GiB": 3 << 29, "10b": 10, "unlimited": authority.Unlimited, "UNLIMITED": authority.Unlimited,
	}
	for in, want := range good {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1", "12PB", "1e9", "lots", "1.2.3MB", "99999999999TiB"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}
