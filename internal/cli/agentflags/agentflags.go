// Package agentflags is the flag block of the commands that run an agent (agent, mcp, spawn):
// its name, role and channels, the capabilities of the ones that issue its credential
// themselves, and the one publish policy they share.
package agentflags

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/wire"
)

// Flags are the values of --name, --role, --subscribe and --allow-publish, and of --capability
// where RegisterCapability added it.
type Flags struct {
	Name         string
	Role         string
	Subscribe    []string
	AllowPublish []string
	Capabilities []string
	// Fresh and Takeover are --fresh and --takeover, where RegisterRun added them.
	Fresh, Takeover bool
}

// Register adds the flags to fs; nameUsage says when --name is required.
func (f *Flags) Register(fs *pflag.FlagSet, nameUsage string) {
	fs.StringVar(&f.Name, "name", "", nameUsage)
	fs.StringVar(&f.Role, "role", "", "a role, to receive anycast tasks")
	fs.StringSliceVar(&f.Subscribe, "subscribe", nil, "channels the agent joins")
	fs.StringSliceVar(&f.AllowPublish, "allow-publish", nil, "channels the agent may post to (default: the concrete channels of --subscribe)")
}

// RegisterCapability adds --capability to fs: for the commands that issue the agent's
// credential themselves.
func (f *Flags) RegisterCapability(fs *pflag.FlagSet) { CapabilityVar(fs, &f.Capabilities) }

// RegisterRun adds --fresh and --takeover to fs: for the commands that run the agent in their own
// process (agent, mcp).
func (f *Flags) RegisterRun(fs *pflag.FlagSet) {
	fs.BoolVar(&f.Fresh, "fresh", false, "start a new lifecycle of the agent: what was sent to its current one is dropped (default: resume it, with every DM sent while no process ran it)")
	fs.BoolVar(&f.Takeover, "takeover", false, "take the agent over from the process that runs it now, which lets go and says so (default: refuse, naming that process)")
}

// CapabilityVar adds --capability to fs, repeatable, storing its values in p.
func CapabilityVar(fs *pflag.FlagSet, p *[]string) {
	fs.StringArrayVar(p, "capability", nil, fmt.Sprintf("a capability the agent's credential carries, one of %q; repeat for more", authority.KnownCapabilities))
}

// Request is the agent credential the flags ask for.
func (f *Flags) Request() ledger.Request {
	return ledger.Request{Name: f.Name, Role: f.Role, Subscribe: f.Subscribe, AllowPublish: f.AllowPublish, Capabilities: f.Capabilities}
}

// ValidCapabilities returns a usage error unless each of caps is a known capability; flag names
// the flag they came from.
func ValidCapabilities(flag string, caps []string) error {
	for _, c := range caps {
		if err := authority.ValidateCapability(c); err != nil {
			return &exit.UsageError{Err: fmt.Errorf("%s: %w", flag, err)}
		}
	}
	return nil
}

// ValidName returns a usage error unless name is a valid actor token; flag names the flag or
// argument it came from.
func ValidName(flag, name string) error {
	if err := wire.ValidateActor(name); err != nil {
		return &exit.UsageError{Err: fmt.Errorf("%s: %w", flag, err)}
	}
	return nil
}
