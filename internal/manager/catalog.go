package manager

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/persona"
	"github.com/gocotal/cotal/wire"
)

// The manager's catalog commands: the persona catalog (define-persona, list-personas,
// show-persona), the harnesses' model catalogs (models), and resolve-cwd, which checks a working
// directory on this host before a spawn names it.

// Catalog is one harness's model catalog, as models answers it.
type Catalog struct {
	Agent     string  `json:"agent"`
	Supported bool    `json:"supported"`
	Models    []Model `json:"models"`
	Error     string  `json:"error,omitempty"`
}

// Model is one model a harness takes: its id, as --model passes it.
type Model struct {
	ID string `json:"id"`
}

// claudeModels are the aliases Claude Code takes for its current models.
var claudeModels = []Model{{ID: "opus"}, {ID: "sonnet"}, {ID: "haiku"}}

// catalogWait bounds a harness's own listing of its models.
const catalogWait = 15 * time.Second

// catalog returns harness h's model catalog on this host.
func catalog(ctx context.Context, h Harness) Catalog {
	c := Catalog{Agent: string(h), Supported: true, Models: []Model{}}
	switch h {
	case HarnessClaude:
		c.Models = claudeModels
	case HarnessCodex:
		c.Error = "codex publishes no model catalog: give --model a model id codex takes"
	case HarnessOpenCode:
		ctx, cancel := context.WithTimeout(ctx, catalogWait)
		defer cancel()
		out, err := exec.CommandContext(ctx, "opencode", "models").Output()
		if err != nil {
			c.Error = "opencode models: " + err.Error()
			break
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			if id := strings.TrimSpace(sc.Text()); strings.Contains(id, "/") && !strings.ContainsAny(id, " \t") {
				c.Models = append(c.Models, Model{ID: id})
			}
		}
	case HarnessCotal:
		c.Supported = false
		c.Error = "cotal's own agent runs no model"
	}
	return c
}

// models answers the model catalog of one harness (args.agent) or of every one.
func (svc *Service) models(ctx context.Context, req *endpoint.Request) (any, error) {
	var args struct {
		Agent   string `json:"agent"`
		Refresh bool   `json:"refresh"` // every listing is fresh
	}
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	harnesses := Harnesses
	if args.Agent != "" {
		h := Harness(args.Agent)
		if !slices.Contains(Harnesses, h) {
			return nil, notExecuted(wire.CodeBadRequest, "agent %q: must be one of %q", args.Agent, Harnesses)
		}
		harnesses = []Harness{h}
	}
	out := []Catalog{}
	for _, h := range harnesses {
		out = append(out, catalog(ctx, h))
	}
	return map[string]any{"catalogs": out}, nil
}

// resolveCwd answers the directory a spawn on this host would run in: args.cwd, absolute, with
// its symbolic links resolved; it must be a directory here.
func (svc *Service) resolveCwd(_ context.Context, req *endpoint.Request) (any, error) {
	var args struct {
		Cwd string `json:"cwd"`
	}
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	if !filepath.IsAbs(args.Cwd) || strings.ContainsRune(args.Cwd, 0) {
		return nil, notExecuted(wire.CodeBadRequest, "cwd %q: must be an absolute path", args.Cwd)
	}
	dir, err := filepath.EvalSymlinks(args.Cwd)
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(dir); err == nil && !fi.IsDir() {
			err = errors.New("not a directory")
		}
	}
	if err != nil {
		return nil, notExecuted(wire.CodeNotFound, "cwd %s on %s: %v", args.Cwd, svc.host, err)
	}
	return map[string]string{"cwd": dir, "host": svc.host}, nil
}

// PersonaRow is one persona as list-personas and show-persona answer it: its content, never its
// grants; show-persona adds the body.
type PersonaRow struct {
	Name        string `json:"name"`
	Role        string `json:"role,omitempty"`
	Model       string `json:"model,omitempty"`
	Description string `json:"description,omitempty"`
	Owner       string `json:"owner,omitempty"`
	Persona     string `json:"persona,omitempty"`
	Error       string `json:"error,omitempty"`
}

func personaRow(e persona.Entry) PersonaRow {
	if e.Err != nil {
		return PersonaRow{Name: e.Name, Error: e.Err.Error()}
	}
	f := e.File
	return PersonaRow{Name: e.Name, Role: f.Role, Model: f.Model, Description: f.Description, Owner: f.Owner}
}

// catalogDir returns the persona directory, or the refusal of a manager that keeps none.
func (svc *Service) catalogDir() (string, *wire.EndpointError) {
	if svc.cfg.Personas == "" {
		return "", notExecuted(wire.CodeUnimplemented, "this manager keeps no persona catalog")
	}
	return svc.cfg.Personas, nil
}

func (svc *Service) listPersonas(context.Context, *endpoint.Request) (any, error) {
	dir, refusal := svc.catalogDir()
	if refusal != nil {
		return nil, refusal
	}
	entries, err := persona.Entries(dir)
	if err != nil {
		return nil, wire.NewEndpointError(wire.CodeInternal, wire.OutcomeNotExecuted, "read the persona catalog: %v", err)
	}
	rows := []PersonaRow{}
	for _, e := range entries {
		rows = append(rows, personaRow(e))
	}
	return map[string]any{"personas": rows}, nil
}

func (svc *Service) showPersona(_ context.Context, req *endpoint.Request) (any, error) {
	dir, refusal := svc.catalogDir()
	if refusal != nil {
		return nil, refusal
	}
	var args struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	f, err := persona.Load(dir, args.Name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, notExecuted(wire.CodeNotFound, "no persona %s in this manager's catalog", args.Name)
	case err != nil:
		return PersonaRow{Name: args.Name, Error: err.Error()}, nil
	}
	row := personaRow(persona.Entry{Name: args.Name, File: f})
	row.Persona = f.Persona
	return row, nil
}

// PersonaArgs are define-persona's arguments: a persona's body, harness, model, role and grants.
type PersonaArgs struct {
	Name           string   `json:"name"`
	Persona        string   `json:"persona"`
	Model          string   `json:"model,omitempty"`
	Role           string   `json:"role,omitempty"`
	Agent          string   `json:"agent,omitempty"`
	Subscribe      []string `json:"subscribe,omitempty"`
	AllowSubscribe []string `json:"allowSubscribe,omitempty"`
	AllowPublish   []string `json:"allowPublish,omitzero"`
}

// definePersona writes a persona into the catalog. The operator's instrument defines any; any
// other caller defines one within its own grant (what it may read and post to, its own role),
// owned by it, and may not replace a persona someone else owns. A persona defined over the wire
// carries no capabilities: only the operator's own file grants those.
func (svc *Service) definePersona(ctx context.Context, req *endpoint.Request) (any, error) {
	dir, refusal := svc.catalogDir()
	if refusal != nil {
		return nil, refusal
	}
	var args PersonaArgs
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	f := &persona.File{Name: args.Name, Role: args.Role, Agent: args.Agent, Model: args.Model, Subscribe: args.Subscribe,
		AllowSubscribe: args.AllowSubscribe, AllowPublish: args.AllowPublish, Persona: strings.TrimSpace(args.Persona)}
	if f.AllowPublish == nil {
		f.AllowPublish = []string{} // an omitted allowPublish is a declared none, as in a file
	}
	if err := f.Validate(); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "persona %s: %v", args.Name, err)
	}
	caller := req.Caller()
	if !svc.cfg.HostLaunch(ctx, caller) {
		spec := Spec{Name: f.Name, Role: f.Role, Subscribe: f.Subscribe, AllowSubscribe: f.ReadACL(), AllowPublish: f.AllowPublish}
		if refusal := svc.withinCaller(ctx, caller, spec); refusal != nil {
			return nil, refusal
		}
		f.Owner = caller.Principal.String()
		switch old, err := persona.Load(dir, f.Name); {
		case err == nil && old.Owner != f.Owner:
			return nil, notExecuted(wire.CodePermissionDenied, "persona %s is not %s's: only its owner or the operator may redefine it", f.Name, f.Owner)
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return nil, notExecuted(wire.CodeFailedPrecondition, "persona %s: %v", f.Name, err)
		}
	}
	path, err := persona.Save(dir, f, false)
	if err != nil {
		return nil, wire.NewEndpointError(wire.CodeInternal, wire.OutcomeNotExecuted, "save persona %s: %v", f.Name, err)
	}
	return map[string]string{"name": f.Name, "path": path}, nil
}
