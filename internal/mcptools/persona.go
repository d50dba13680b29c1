package mcptools

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/wire"
)

// personaArgs are cotal_persona's arguments: define-persona's, the body named prompt as the
// reference's tool names it.
type personaArgs struct {
	Name           string   `json:"name" jsonschema:"the persona's name, the agent name a spawn of it takes ([A-Za-z0-9_]+)"`
	Prompt         string   `json:"prompt" jsonschema:"the persona: the instructions its agent's harness is launched with"`
	Model          string   `json:"model,omitempty" jsonschema:"the model its harness runs"`
	Role           string   `json:"role,omitempty" jsonschema:"its role: yours or none"`
	Agent          string   `json:"agent,omitempty" jsonschema:"the harness it runs in"`
	Subscribe      []string `json:"subscribe,omitempty" jsonschema:"channels it joins at start: ones you may read"`
	AllowSubscribe []string `json:"allowSubscribe,omitempty" jsonschema:"channels it may read (default: subscribe): ones you may read"`
	AllowPublish   []string `json:"allowPublish,omitempty" jsonschema:"channels it may post to (default: none): ones you may post to"`
}

// personasArgs are cotal_personas' arguments.
type personasArgs struct {
	Name string `json:"name,omitempty" jsonschema:"one persona to show with its instructions; omit it to list them all"`
}

// personasOut is cotal_personas' structured output.
type personasOut struct {
	Personas []manager.PersonaRow `json:"personas"`
}

// persona defines a persona in the manager's catalog, within the caller's own grant.
func (t *Tools) persona(ctx context.Context, in personaArgs) (*mcp.CallToolResult, error) {
	m, err := t.manager()
	if err != nil {
		return nil, err
	}
	if err := wire.ValidateAgentName(in.Name); err != nil {
		return nil, fmt.Errorf("name: %w", err)
	}
	if strings.TrimSpace(in.Prompt) == "" {
		return nil, fmt.Errorf("prompt: the persona's instructions are required")
	}
	var out struct {
		Name string `json:"name"`
		Path string `json:"path"`
	}
	args := manager.PersonaArgs{Name: in.Name, Persona: in.Prompt, Model: in.Model, Role: in.Role, Agent: in.Agent,
		Subscribe: in.Subscribe, AllowSubscribe: in.AllowSubscribe, AllowPublish: in.AllowPublish}
	if err := m.Ask(ctx, manager.CommandDefinePersona, args, &out); err != nil {
		return nil, err
	}
	return text("defined persona %s (%s): cotal_spawn with persona %s starts it", out.Name, out.Path, out.Name), nil
}

// personas lists the manager's persona catalog, or shows one persona.
func (t *Tools) personas(ctx context.Context, in personasArgs) (*mcp.CallToolResult, personasOut, error) {
	m, err := t.manager()
	if err != nil {
		return nil, personasOut{}, err
	}
	var out personasOut
	if in.Name != "" {
		var row manager.PersonaRow
		if err := m.Ask(ctx, manager.CommandShowPersona, map[string]string{"name": in.Name}, &row); err != nil {
			return nil, out, err
		}
		out.Personas = []manager.PersonaRow{row}
	} else if err := m.Ask(ctx, manager.CommandListPersonas, nil, &out); err != nil {
		return nil, out, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d personas:", len(out.Personas))
	for _, p := range out.Personas {
		fmt.Fprintf(&b, "\n- %s", p.Name)
		for _, f := range []struct{ k, v string }{{"role", p.Role}, {"model", p.Model}, {"owner", p.Owner}, {"error", p.Error}} {
			if f.v != "" {
				fmt.Fprintf(&b, " %s=%s", f.k, f.v)
			}
		}
		if p.Description != "" {
			fmt.Fprintf(&b, ": %s", p.Description)
		}
		if p.Persona != "" {
			fmt.Fprintf(&b, "\n%s", p.Persona)
		}
	}
	return text("%s", b.String()), out, nil
}
