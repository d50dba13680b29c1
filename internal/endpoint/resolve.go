package endpoint

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gocotal/cotal/internal/contract"
	"github.com/gocotal/cotal/wire"
)

// Descriptor is what describe answers (SPEC §13.7): the endpoint, its owner, its discovery
// protocol and its clusters.
type Descriptor struct {
	Endpoint     string    `json:"endpoint"`
	Owner        string    `json:"owner"`
	EndpointType string    `json:"endpointType,omitempty"`
	Protocol     Protocol  `json:"protocol"`
	Clusters     []Cluster `json:"clusters"`
}

// DescribeAnswer is describe's reply data: the descriptor, and whether it is the public one (every
// command of every cluster) rather than scoped to the caller.
type DescribeAnswer struct {
	Public     bool       `json:"public"`
	Descriptor Descriptor `json:"descriptor"`
}

// Resolved is an endpoint as one describe resolved it: the incarnation that answered and the
// contract of each command it serves.
type Resolved struct {
	Answer   DescribeAnswer
	From     wire.EndpointReplyFrom
	Commands map[string]contract.Command
}

// Describe calls describe on endpoint at instance (any instance when empty) and resolves its
// commands from the descriptor's cluster documents. A descriptor whose protocol is not v1, or a
// cluster without its document, is refused: this caller cannot pin that contract.
func (c *Caller) Describe(ctx context.Context, endpoint wire.EndpointName, instance wire.LifecycleUID) (*Resolved, error) {
	call := Call{Endpoint: endpoint, Command: wire.CommandDescribe}
	if instance != "" {
		call.Address, call.Instance = wire.AddressInst, instance
	}
	reply, err := c.Call(ctx, call)
	if err != nil {
		return nil, err
	}
	r := &Resolved{From: reply.From, Commands: map[string]contract.Command{}}
	if err := json.Unmarshal(reply.Data, &r.Answer); err != nil {
		return nil, fmt.Errorf("describe %s: the descriptor does not decode: %w", endpoint, err)
	}
	if v := r.Answer.Descriptor.Protocol.V; v != 1 {
		return nil, wire.NewEndpointError(wire.CodeUnsupportedVersion, wire.OutcomeNotExecuted, "%s describes itself at discovery protocol %d; this caller speaks 1", endpoint, v)
	}
	for _, cl := range r.Answer.Descriptor.Clusters {
		if len(cl.Document) == 0 {
			return nil, fmt.Errorf("describe %s: cluster %s comes without its document", endpoint, cl.Digest)
		}
		var doc contract.Document
		if err := json.Unmarshal(cl.Document, &doc); err != nil {
			return nil, fmt.Errorf("describe %s: cluster %s: %w", endpoint, cl.Digest, err)
		}
		for _, cmd := range doc.Commands {
			r.Commands[cmd.Name] = cmd
		}
	}
	return r, nil
}

// Call returns a Call of command, pinned to the contract the describe resolved, with args (the
// empty object when nil and the input is not void).
func (r *Resolved) Call(command string, args any) (Call, error) {
	cmd, ok := r.Commands[command]
	if !ok {
		return Call{}, wire.NewEndpointError(wire.CodeNotFound, wire.OutcomeNotExecuted, "%s serves no command %s", r.Answer.Descriptor.Endpoint, command)
	}
	if cmd.Class != wire.ClassEphemeral {
		return Call{}, wire.NewEndpointError(wire.CodeUnimplemented, wire.OutcomeNotExecuted, "%s %s is a %s command; this caller calls ephemeral ones", r.Answer.Descriptor.Endpoint, command, cmd.Class)
	}
	if args == nil && cmd.InputDigest != contract.VoidDigest() {
		// No args for a command whose input is not void: send the empty object, as the
		// reference's caller does, so an input whose members are all optional is satisfied.
		args = json.RawMessage(`{}`)
	}
	return Call{Endpoint: wire.EndpointName(r.Answer.Descriptor.Endpoint), Command: command, Args: args,
		InputDigest: cmd.InputDigest, OutputDigest: cmd.OutputDigest}, nil
}
