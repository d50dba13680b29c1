package send

import (
	"context"
	"errors"
	"testing"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/cli/iostreams"
)

// TestNewCmdSend checks what the flags and arguments fill in, through runF, and which command
// lines validate refuses as usage errors before connecting.
func TestNewCmdSend(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		want  Options
		usage bool
	}{
		{"ledger msg", []string{"msg", "general", "hello", "there"}, Options{As: DefaultActor, Kind: "msg", To: "general", Text: "hello there"}, false},
		{"as", []string{"--as", "ops", "ask", "reviewer", "x"}, Options{As: "ops", Kind: "ask", To: "reviewer", Text: "x"}, false},
		{"creds before the verb", []string{"--creds", "alice.creds", "msg", "other-channel", "hi"}, Options{As: DefaultActor, Creds: "alice.creds", Kind: "msg", To: "other-channel", Text: "hi"}, false},
		{"creds and server after", []string{"dm", "local.bob", "hi", "--creds", "a.creds", "--server", "nats://h:4222"}, Options{As: DefaultActor, Creds: "a.creds", Server: "nats://h:4222", Kind: "dm", To: "local.bob", Text: "hi"}, false},
		{"server alone", []string{"--server", "nats://h:4222", "msg", "general", "hi"}, Options{}, true},
		{"as with creds", []string{"--creds", "a.creds", "--as", "bob", "msg", "general", "hi"}, Options{}, true},
		{"bad server", []string{"--creds", "a.creds", "--server", "h:4222", "msg", "general", "hi"}, Options{}, true},
		{"bad as", []string{"--as", "a.b", "msg", "general", "hi"}, Options{}, true},
		{"wildcard channel", []string{"msg", "team.>", "hi"}, Options{}, true},
		{"empty role", []string{"ask", " ", "hi"}, Options{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			io, _, _, _ := iostreams.Test()
			var got *Options
			cmd := NewCmdSend(factory.New(io), func(_ context.Context, o *Options) error {
				got = o
				return o.validate()
			})
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			if tt.usage {
				if _, ok := errors.AsType[*exit.UsageError](err); !ok {
					t.Fatalf("err = %v, want a usage error", err)
				}
				return
			}
			if err != nil || got == nil {
				t.Fatalf("err = %v", err)
			}
			o := *got
			o.Factory = nil
			if o != tt.want {
				t.Errorf("options = %+v, want %+v", o, tt.want)
			}
		})
	}
}
