package manager

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/manifest"
	"github.com/gocotal/cotal/wire"
)

// launchArgs are launch's arguments: an agent of a run, and, from a deploy on another host, the
// run's launch spec inline.
type launchArgs struct {
	RunID string          `json:"runId"`
	Name  string          `json:"name"`
	Spec  json.RawMessage `json:"spec,omitempty"`
}

// launch starts one agent of a manifest deploy: the entry of the run's launch spec (read from
// this manager's run directory, or given inline, checked as untrusted input and kept there) is
// spawned as spawn would, with its grants and capabilities, as the caller, and, for the
// operator's deploy, its creds are written to the mesh's creds folder when this manager keeps
// one. The reply is spawn's acceptance.
func (svc *Service) launch(ctx context.Context, req *endpoint.Request) (any, error) {
	if svc.cfg.Runs == "" {
		return nil, notExecuted(wire.CodeUnimplemented, "this manager keeps no run directory: it launches no manifest")
	}
	var args launchArgs
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	if err := manifest.ValidateRunID(args.RunID); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "%v", err)
	}
	spec, refusal := svc.runSpec(args)
	if refusal != nil {
		return nil, refusal
	}
	// A run launches its agents as the owner its spec names, the manager's own when it names
	// none, and only for a caller of that owner: a person deploys their own team.
	if owner, caller := cmp.Or(spec.Owner, svc.cfg.Owner), req.Caller().Principal.Owner(); caller != owner {
		return nil, notExecuted(wire.CodePermissionDenied, "run %s launches agents of %s; its caller %s is not theirs", args.RunID, owner, req.Caller().Principal)
	}
	a := spec.Agent(args.Name)
	if a == nil {
		return nil, notExecuted(wire.CodeNotFound, "run %s launches no agent %s", args.RunID, args.Name)
	}
	sa, refusal := svc.launchSpawn(a)
	if refusal != nil {
		return nil, refusal
	}
	return svc.start(ctx, req, sa, func(sp *Spec) {
		sp.Capabilities = a.Capabilities
		if svc.cfg.CredsDir != "" && sp.Owner == "" { // the operator's: a person's connect on bearers
			sp.CredsFile = filepath.Join(svc.cfg.CredsDir, sp.Name+".creds")
		}
	})
}

// runSpec returns the launch spec of args' run: the inline one, checked and saved in the run
// directory, or the one saved there.
func (svc *Service) runSpec(args launchArgs) (*manifest.LaunchSpec, *wire.EndpointError) {
	if len(args.Spec) == 0 {
		spec, err := manifest.LoadLaunchSpec(svc.cfg.Runs, args.RunID)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, notExecuted(wire.CodeNotFound, "this manager holds no launch spec of run %s: send it inline (spec)", args.RunID)
		case err != nil:
			return nil, notExecuted(wire.CodeFailedPrecondition, "run %s: %v", args.RunID, err)
		}
		return spec, svc.ofThisSpace(spec)
	}
	spec, err := manifest.ParseLaunchSpec(args.Spec)
	if err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "%v", err)
	}
	if spec.RunID != args.RunID {
		return nil, notExecuted(wire.CodeBadRequest, "the inline spec is run %s, not run %s", spec.RunID, args.RunID)
	}
	if refusal := svc.ofThisSpace(spec); refusal != nil {
		return nil, refusal
	}
	if _, err := manifest.SaveLaunchSpec(svc.cfg.Runs, spec); err != nil {
		return nil, wire.NewEndpointError(wire.CodeInternal, wire.OutcomeNotExecuted, "keep the launch spec of run %s: %v", spec.RunID, err)
	}
	return spec, nil
}

func (svc *Service) ofThisSpace(spec *manifest.LaunchSpec) *wire.EndpointError {
	if spec.Space != string(svc.cfg.Space) {
		return notExecuted(wire.CodeFailedPrecondition, "run %s deploys space %s; this manager serves %s", spec.RunID, spec.Space, svc.cfg.Space)
	}
	return nil
}

// launchSpawn maps a launch spec's agent to spawn arguments, refusing by name what this manager
// does not implement.
func (svc *Service) launchSpawn(a *manifest.LaunchAgent) (SpawnArgs, *wire.EndpointError) {
	if a.Continuity == "exact" {
		return SpawnArgs{}, notExecuted(wire.CodeUnimplemented, "agent %s: this manager does not implement a launch's continuity exact", a.Name)
	}
	sa := SpawnArgs{Name: a.Name, Agent: a.Agent, Role: a.Role, Model: a.Model, Variant: a.Variant, Prompt: a.Prompt, Events: a.Events,
		Subscribe: a.Subscribe, AllowSubscribe: a.AllowSubscribe, AllowPublish: slices.Clone(a.AllowPublish), Cwd: a.Cwd,
		instructions: a.Instructions}
	if sa.AllowPublish == nil {
		sa.AllowPublish = []string{} // the manifest's default-deny
	}
	if HarnessCotal == Harness(a.Agent) {
		sa.Model, sa.instructions = "", "" // cotal's own agent runs no model and follows no instructions
	}
	for k, v := range a.LaunchOptions {
		rt, ok := v.(string)
		if k != "runtime" || !ok {
			return SpawnArgs{}, notExecuted(wire.CodeUnimplemented, "agent %s: this manager does not implement launchOptions.%s", a.Name, k)
		}
		sa.LaunchOptions = &LaunchOptions{Runtime: rt}
	}
	return sa, nil
}
