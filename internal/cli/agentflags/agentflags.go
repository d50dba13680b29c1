// Package agentflags is the flag block of the commands that run an agent (agent, mcp, spawn):
// its name, role and channels, and the one publish policy they share.
package agentflags

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/wire"
)

// Flags are the values of --name, --role, --subscribe and --allow-publish.
type Flags struct {
	Name         string
	Role         string
	Subscribe    []string
	AllowPublish []string
}

// Register adds the flags to fs; nameUsage says when --name is required.
func (f *Flags) Register(fs *pflag.FlagSet, nameUsage string) {
	fs.StringVar(&f.Name, "name", "", nameUsage)
	fs.StringVar(&f.Role, "role", "", "a role, to receive anycast tasks")
	fs.StringSliceVar(&f.Subscribe, "subscribe", nil, "channels the agent joins")
	fs.StringSliceVar(&f.AllowPublish, "allow-publish", nil, "channels the agent may post to (default: the concrete channels of --subscribe)")
}

// Request is the agent credential the flags ask for.
func (f *Flags) Request() ledger.Request {
	return ledger.Request{Name: f.Name, Role: f.Role, Subscribe: f.Subscribe, AllowPublish: f.AllowPublish}
}

// ValidName returns a usage error unless name is a valid actor token; flag names the flag or
// argument it came from.
func ValidName(flag, name string) error {
	if err := wire.ValidateActor(name); err != nil {
		return &exit.UsageError{Err: fmt.Errorf("%s: %w", flag, err)}
	}
	return nil
}
