package wire

import "testing"

func TestCheckServerVersion(t *testing.T) {
	for v, ok := range map[string]bool{
		"2.12.0": true, "2.12.1": true, "2.15.2": true, "v2.13.0-beta.1": true, "3.0.0": true,
		"2.11.9": false, "2.10.22": false, "1.99.99": false, "": false, "2.12": false, "x.y.z": false,
	} {
		if err := CheckServerVersion(v); (err == nil) != ok {
			t.Errorf("CheckServerVersion(%q) = %v, want ok=%v", v, err, ok)
		}
	}
}
