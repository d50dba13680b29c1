package version

import (
	"runtime/debug"
	"testing"
)

func TestRead(t *testing.T) {
	tests := []struct {
		name     string
		bi       *debug.BuildInfo
		ok       bool
		version  string
		revision string
	}{
		{"no build info", nil, false, "devel", ""},
		{"checkout build", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "devel", ""},
		{"module build", &debug.BuildInfo{
			Main:     debug.Module{Version: "v0.1.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}},
		}, true, "v0.1.0", "abc123"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := Read(func() (*debug.BuildInfo, bool) { return tt.bi, tt.ok })
			if info.Version != tt.version || info.Revision != tt.revision || info.ProtocolVersion == "" {
				t.Errorf("Read = %+v, want version %q revision %q", info, tt.version, tt.revision)
			}
		})
	}
}
