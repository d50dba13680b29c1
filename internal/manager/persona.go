package manager

import (
	"cmp"
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"time"

	"github.com/gocotal/cotal/internal/persona"
	"github.com/gocotal/cotal/wire"
)

// The agent file keys cotal's own agent (agent: cotal) takes, so a workflow run can be tried
// with no model: the JSON value it answers each ask with, how long each turn takes it, and how
// long it takes to start.
const (
	PersonaOnAsk      = "onAsk"
	PersonaTurnTakes  = "turnTakes"
	PersonaStartTakes = "startTakes"
)

// cotalHints applies the persona's hints for cotal's own agent to the spawn.
func (a *SpawnArgs) cotalHints(f *persona.File) *wire.EndpointError {
	if v := f.Meta[PersonaOnAsk]; v != "" {
		if !json.Valid([]byte(v)) {
			return notExecuted(wire.CodeBadRequest, "persona %s: %s %q is not a JSON value", f.Name, PersonaOnAsk, v)
		}
		a.cotalArgs = append(a.cotalArgs, "--on-ask", v)
	}
	for _, h := range []struct{ key, flag string }{{PersonaTurnTakes, "--turn-takes"}, {PersonaStartTakes, "--start-takes"}} {
		key, flag := h.key, h.flag
		v := f.Meta[key]
		if v == "" {
			continue
		}
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return notExecuted(wire.CodeBadRequest, "persona %s: %s %q is not a duration (e.g. 3s)", f.Name, key, v)
		}
		a.cotalArgs = append(a.cotalArgs, flag, v)
	}
	return nil
}

// applyPersona fills a spawn from the agent file its config names in dir, the manager's catalog
// (the reference's config: a persona name): the file gives the harness, role, model, grants and
// instructions, the spawn's own fields win over it, and its channel fields may only narrow the
// file's grants. It returns the file's capabilities, which the agent's credential carries: the
// file is the operator's, so a caller cannot grant itself one through it. The config is consumed.
func (a *SpawnArgs) applyPersona(dir string) ([]string, *wire.EndpointError) {
	name := a.Config
	f, err := persona.Load(dir, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, notExecuted(wire.CodeNotFound, "no persona %s in this manager's catalog %s", name, dir)
	case err != nil:
		return nil, notExecuted(wire.CodeBadRequest, "persona %s: %v", name, err)
	}
	a.Config = ""
	a.Name = cmp.Or(a.Name, f.Name)
	a.Agent = cmp.Or(a.Agent, f.Agent)
	a.Role = cmp.Or(a.Role, f.Role)
	if Harness(cmp.Or(a.Agent, a.DefaultAgent)) != HarnessCotal {
		// cotal's own agent runs no model and follows no instructions; every other harness is
		// given the persona's.
		a.Model = cmp.Or(a.Model, f.Model)
		a.instructions = strings.TrimSpace(f.Persona)
	} else if refusal := a.cotalHints(f); refusal != nil {
		return nil, refusal
	}
	narrow := func(field string, given, file []string) ([]string, *wire.EndpointError) {
		if file == nil {
			file = []string{}
		}
		if given == nil {
			return file, nil
		}
		for _, ch := range given {
			if !wire.ChannelInAllow(file, ch) {
				return nil, notExecuted(wire.CodePermissionDenied, "%s %s: persona %s does not grant it (%q): a spawn may narrow a persona's grants, never widen them", field, ch, f.Name, file)
			}
		}
		return given, nil
	}
	var refusal *wire.EndpointError
	if a.Subscribe, refusal = narrow("subscribe", a.Subscribe, f.Subscribe); refusal != nil {
		return nil, refusal
	}
	if a.AllowSubscribe, refusal = narrow("allowSubscribe", a.AllowSubscribe, f.ReadACL()); refusal != nil {
		return nil, refusal
	}
	if a.AllowPublish, refusal = narrow("allowPublish", a.AllowPublish, f.AllowPublish); refusal != nil {
		return nil, refusal
	}
	return f.Capabilities, nil
}
