// Package spawn implements `cotal spawn`, `cotal stop` and `cotal supervise`: starting and
// stopping agent processes through the space's manager endpoint, and running a manager beside
// the mesh.
package spawn

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/cli/agentflags"
	"github.com/gocotal/cotal/internal/cli/deploy"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/cli/iostreams"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/manifest"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/remotemgr"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/internal/userauth/oidc"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal spawn`.
type Options struct {
	*factory.Factory
	agentflags.Flags
	AllowSubscribe []string
	Agent          string
	Detach         bool
	JSON           bool
	// Env adds KEY=VALUE entries to the agent's environment.
	Env []string
	// Runtime is the agent's runtime: pty (a terminal `cotal attach` reaches) or headless.
	Runtime string
	// Instance pins the spawn to one manager instance (any manager when empty).
	Instance string
	// MeshURL is a user-auth mesh's exchange URL: spawn as the person logged in there, through
	// the one manager they may address (Instance, or the only live one).
	MeshURL string
	// Persona is the agent file the agent is spawned from (`cotal spawn PERSONA`); Model and
	// Prompt override and extend it.
	Persona string
	Model   string
	Prompt  string
	// Variant is the model variant; Resume reopens a harness session (manager.ResumeLast or an
	// id); Cwd is the agent's working directory on the manager's host.
	Variant string
	Resume  string
	Cwd     string
	// File is a manifest to deploy additively onto the running mesh (spawn -f).
	File       string
	DryRun     bool
	AllowStale []string
}

// Result is what `cotal spawn --json` prints. The field names are a stable interface.
type Result struct {
	// Acceptance is the manager's acceptance of the spawn: the agent's identity and lifecycle,
	// its goal id and the manager instance that runs it.
	Acceptance manager.Acceptance `json:"acceptance"`
	// State is the spawn goal's terminal state (succeeded, failed or uncertain); absent when the
	// follow ended first.
	State string `json:"state,omitempty"`
	// Data is the goal's terminal data: the agent, and the reason when it did not succeed.
	Data json.RawMessage `json:"data,omitempty"`
	// Process is the agent's last row from its manager, once a spawn without --detach has waited
	// for it to end.
	Process *manager.Row `json:"process,omitempty"`
}

// The polling of a spawn without --detach: how often it asks the manager about its agent, and
// how long one question may take.
const (
	pollEvery    = 500 * time.Millisecond
	findDeadline = 5 * time.Second
	// stopWait bounds the stop of an agent on Ctrl-C, and `cotal stop`.
	stopWait = 30 * time.Second
)

// NewCmdSpawn returns the `cotal spawn` command.
func NewCmdSpawn(f *factory.Factory) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "spawn PERSONA [flags] [-- ARGS...] | spawn --name NAME [flags] [--agent A] -- [COMMAND] [ARGS...] | spawn -f cotal.yaml",
		Short: "Start an agent process through the space's manager",
		Long: "Ask a manager of the space (the one of `cotal up`, or a `cotal supervise`) to start\n" +
			"COMMAND as agent local.NAME (with --mesh, as your own u_….NAME), in this directory: the manager issues and provisions its\n" +
			"credential, writes its launch material (creds and an MCP configuration for `cotal mcp`) to\n" +
			"a private file whose path is in $COTAL_LAUNCH_MATERIAL, restarts it if it crashes (three\n" +
			"times a minute at most), and retires its lifecycle when it is done. The spawn is a goal: it\n" +
			"succeeds once the agent is present on the mesh, fails if its process ends first, and is\n" +
			"uncertain if neither happens within the manager's 30 s readiness deadline.\n\n" +
			"`cotal spawn PERSONA` starts the agent .cotal/agents/PERSONA.md describes (`cotal personas`):\n" +
			"its name, role, harness, model, channel grants and instructions come from the file; --agent,\n" +
			"--role and --model override it, --prompt gives it a kickoff message (its first turn, once\n" +
			"its session is up), and --subscribe, --allow-subscribe and --allow-publish may narrow its\n" +
			"grants, never widen them.\n\n" +
			"With --detach, spawn returns once the goal has ended: exit 0 when it succeeded, 1 otherwise.\n" +
			"Without it, spawn then waits for the agent to end and stops it on Ctrl-C.\n\n" +
			"`cotal spawn -f cotal.yaml` deploys a manifest's team onto the running mesh, additively: it\n" +
			"prints the run id, classifies each channel and agent (created, exists-unmanaged,\n" +
			"already-owned, stale), creates only what is new and records it in the run's ledger,\n" +
			".cotal/manifests/RUNID.json, which `cotal down -f` removes. Running it again on an unchanged\n" +
			"file changes nothing; an agent whose launch fields changed is stale, and the run exits\n" +
			"non-zero unless --allow-stale names it (which restarts it). With --mesh URL, on the mesh's\n" +
			"host, it deploys as the person logged in there: their deployer view plans and launches, the\n" +
			"agents are their own (u_….NAME) within their grant, and new channels need their admin scope.",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case o.File != "" && len(args) > 0:
				return &exit.UsageError{Err: fmt.Errorf("spawn -f deploys the manifest's agents: drop %q", args[0])}
			case o.File != "":
				return deploy.Spawn(cmd.Context(), f, f.IO.Out, deploy.SpawnOptions{File: o.File, DryRun: o.DryRun, AllowStale: o.AllowStale, MeshURL: o.MeshURL})
			case o.DryRun || len(o.AllowStale) > 0:
				return &exit.UsageError{Err: errors.New("--dry-run and --allow-stale go with -f")}
			}
			before := len(args)
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				before = dash
			}
			switch {
			case before == 1 && o.Name == "":
				if err := agentflags.ValidName("PERSONA", args[0]); err != nil {
					return err
				}
				o.Persona, o.Name = args[0], args[0]
				return spawnRun(cmd.Context(), o, args[1:])
			case before > 0:
				return &exit.UsageError{Err: fmt.Errorf("put the command after --: cotal spawn --name N -- %s (or spawn a persona: cotal spawn PERSONA)", args[0])}
			case (o.Model != "" || o.Prompt != "" || o.Variant != "" || o.Resume != "") && o.Agent == "":
				return &exit.UsageError{Err: errors.New("--model, --variant, --prompt and --resume are for an agent spawned from a persona, or with --agent")}
			case len(args) == 0 && o.Agent == "":
				return &exit.UsageError{Err: errors.New("name a persona, a command after --, or a harness with --agent")}
			}
			return spawnRun(cmd.Context(), o, args)
		},
	}
	fs := cmd.Flags()
	o.Target.Register(fs)
	o.Flags.Register(fs, "the agent's name (required)")
	fs.StringSliceVar(&o.AllowSubscribe, "allow-subscribe", nil, "channels or patterns the agent may read (default: --subscribe)")
	fs.StringVar(&o.Agent, "agent", "", fmt.Sprintf("start a harness with the cotal MCP server configured, one of %q; ARGS after -- are passed to it", manager.Harnesses))
	fs.StringVar(&o.Model, "model", "", "the model the harness runs (overrides the persona's)")
	fs.StringVar(&o.Prompt, "prompt", "", "a kickoff message: the agent's first turn, once its session is up")
	fs.StringVar(&o.Variant, "variant", "", "the model variant the harness runs (as the harness names it)")
	fs.StringVar(&o.Resume, "resume", "", "reopen a session of the harness: its latest in the working directory (--resume alone), or one by id (claude, opencode)")
	fs.Lookup("resume").NoOptDefVal = manager.ResumeLast
	fs.StringVar(&o.Cwd, "cwd", "", "the agent's working directory on the manager's host: absolute (checked there first), or relative to the manager's workspace (default: this directory)")
	fs.StringArrayVar(&o.Env, "env", nil, "add KEY=VALUE to the agent's environment (repeatable; needs host launch authority, as a command does)")
	fs.StringVar(&o.Runtime, "runtime", string(manager.RuntimePTY), fmt.Sprintf("run the agent in a terminal (%s, for cotal attach and input) or %s", manager.RuntimePTY, manager.RuntimeHeadless))
	fs.StringVar(&o.Instance, "instance", "", "the manager instance to spawn on (its id, as cotal ps and cotal endpoints print it; default: any, or with --mesh the only live one you may address)")
	fs.StringVar(&o.MeshURL, "mesh", "", "spawn as yourself (`cotal login --mesh` first) through your manager on the user-auth mesh whose exchange is at this URL")
	fs.BoolVar(&o.Detach, "detach", false, "return once the spawn's goal has ended, leaving the agent running")
	fs.BoolVar(&o.JSON, "json", false, "print the acceptance, the goal's state and the agent's last row as JSON")
	fs.StringVarP(&o.File, "file", "f", "", "deploy a manifest (cotal.yaml) additively onto the running mesh, recording what it creates")
	fs.BoolVar(&o.DryRun, "dry-run", false, "with -f: classify every channel and agent and change nothing")
	fs.StringSliceVar(&o.AllowStale, "allow-stale", nil, "with -f: restart these agents whose launch fields changed (default: report them stale and exit non-zero)")
	return cmd
}

func spawnRun(ctx context.Context, o *Options, command []string) error {
	if err := agentflags.ValidName("--name", o.Name); err != nil {
		return err
	}
	if rt := manager.Runtime(o.Runtime); rt != manager.RuntimePTY && rt != manager.RuntimeHeadless {
		return &exit.UsageError{Err: fmt.Errorf("--runtime %q: must be %s or %s", o.Runtime, manager.RuntimePTY, manager.RuntimeHeadless)}
	}
	if o.Agent != "" && !slices.Contains(manager.Harnesses, manager.Harness(o.Agent)) {
		return &exit.UsageError{Err: fmt.Errorf("--agent %q: must be one of %q", o.Agent, manager.Harnesses)}
	}
	for _, e := range o.Env {
		if err := manager.ValidateEnv(e); err != nil {
			return &exit.UsageError{Err: fmt.Errorf("--env: %w", err)}
		}
	}
	if o.Instance != "" {
		if _, err := wire.ParseLifecycleUID(o.Instance); err != nil {
			return &exit.UsageError{Err: fmt.Errorf("--instance: %w", err)}
		}
	}
	ctl, err := o.control(ctx)
	if err != nil {
		return err
	}
	defer ctl.Close()
	cwd, err := o.workingDir(ctx, ctl)
	if err != nil {
		return err
	}
	// A persona is resolved by the manager, in its own catalog (the config of the reference's
	// spawn): the file on its host is the one that runs.
	args := manager.SpawnArgs{Name: o.Name, Config: o.Persona, Agent: o.Agent, Role: o.Role, Cwd: cwd, Model: o.Model, Prompt: o.Prompt,
		Variant: o.Variant, Resume: o.Resume,
		Subscribe: o.Subscribe, AllowSubscribe: o.AllowSubscribe, AllowPublish: o.AllowPublish}
	args.LaunchOptions = &manager.LaunchOptions{Command: command, Env: o.Env, Runtime: o.Runtime}
	sp, err := ctl.Manager.SpawnOn(ctx, wire.LifecycleUID(o.Instance), args)
	if err != nil {
		return noManager(fmt.Errorf("spawn %s: %w", o.Name, err), ctl)
	}
	res := &Result{Acceptance: sp.Acceptance, State: sp.State, Data: sp.Data}
	a := sp.Acceptance
	state := sp.State
	if state == "" {
		state = "still open"
	}
	fmt.Fprintf(o.IO.ErrOut, "%s.%s (lifecycle %s) spawned by manager %s: goal %s\n", a.Owner, a.Actor, a.UID, a.Executor.LifecycleUID, state)
	switch {
	case o.Detach && ctx.Err() != nil:
		return fmt.Errorf("spawn %s: interrupted before its goal ended; it may still come up (`cotal ps`, `cotal stop %s`)", o.Name, o.Name)
	case o.Detach || sp.State == manager.GoalFailed:
		if err := printResult(o.IO, o.JSON, res); err != nil {
			return err
		}
		return goalError(o.Name, sp)
	}
	row, err := waitEnd(ctx, ctl, o.Name)
	if ctx.Err() != nil { // Ctrl-C: stop the agent rather than leave it behind
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopWait)
		defer cancel()
		row, err = stopAgent(sctx, ctl, o.Name)
	}
	if err != nil {
		return noManager(err, ctl)
	}
	res.Process = row
	if err := printResult(o.IO, o.JSON, res); err != nil {
		return err
	}
	if st := manager.State(row.Status); st == manager.StateEscalated || st == manager.StateFailed {
		return fmt.Errorf("agent %s ended %s", o.Name, st)
	}
	return nil
}

// workingDir returns the agent's working directory: this directory by default; --cwd relative,
// for the manager to take from its workspace; --cwd absolute, as the manager that will run the
// agent resolves it on its host (resolve-cwd), so a directory missing there is refused before
// anything starts.
func (o *Options) workingDir(ctx context.Context, ctl *factory.Control) (string, error) {
	switch {
	case o.Cwd == "":
		cwd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("the agent's working directory: %w", err)
		}
		return cwd, nil
	case !filepath.IsAbs(o.Cwd):
		return o.Cwd, nil
	}
	mc := *ctl.Manager
	if o.Instance != "" {
		mc.Pinned = wire.LifecycleUID(o.Instance)
	}
	var res struct {
		Cwd  string `json:"cwd"`
		Host string `json:"host"`
	}
	if err := mc.Ask(ctx, manager.CommandResolveCwd, map[string]string{"cwd": o.Cwd}, &res); err != nil {
		return "", noManager(fmt.Errorf("--cwd %s: %w", o.Cwd, err), ctl)
	}
	return res.Cwd, nil
}

// control connects the caller: the person's manager-caller view with --mesh, else the
// operator's instrument, which a spawn waiting for its agent holds past a one-shot credential's
// few minutes.
func (o *Options) control(ctx context.Context) (*factory.Control, error) {
	switch {
	case o.MeshURL != "":
		if err := o.CheckMesh(o.MeshURL); err != nil {
			return nil, err
		}
		return o.MeshControl(ctx, o.MeshURL, wire.LifecycleUID(o.Instance))
	case o.Detach:
		return o.Control(ctx)
	}
	return o.WatchControl(ctx)
}

// goalError reports a spawn goal that did not succeed, with its reason.
func goalError(name string, sp *manager.Spawned) error {
	var why struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(sp.Data, &why) // a goal without a reason is reported without one
	switch sp.State {
	case manager.GoalSucceeded:
		return nil
	case "":
		return fmt.Errorf("spawn %s: its goal %s did not end in time; see `cotal ps`", name, sp.Acceptance.GoalID)
	case manager.GoalUncertain:
		return fmt.Errorf("spawn %s: goal %s is uncertain: %s", name, sp.Acceptance.GoalID, why.Reason)
	}
	return fmt.Errorf("spawn %s: goal %s %s: %s", name, sp.Acceptance.GoalID, sp.State, why.Reason)
}

// waitEnd polls the managers for the named agent until its process is done, and returns its
// last row. An agent no manager knows any more, or a space no manager serves any more, has ended
// too; a question that fails otherwise is asked again. It returns ctx's error when ctx ends.
func waitEnd(ctx context.Context, ctl *factory.Control, name string) (*manager.Row, error) {
	last := &manager.Row{Name: name, Status: "unknown"}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		fctx, cancel := context.WithTimeout(ctx, findDeadline)
		row, _, err := ctl.Manager.Find(fctx, ctl.Records, name)
		cancel()
		switch {
		case ctx.Err() != nil:
			return last, ctx.Err()
		case err == nil:
			last = row
			if st := manager.State(row.Status); st != manager.StateRunning && st != manager.StateRestarting {
				return row, nil
			}
		case isCode(err, wire.CodeNotFound, wire.CodeFailedPrecondition):
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-tick.C:
		}
	}
}

// stopAgent despawns the named agent through the manager that runs it and returns its row once
// stopped (the row before the stop if the manager cannot be asked again).
func stopAgent(ctx context.Context, ctl *factory.Control, name string) (*manager.Row, error) {
	row, err := ctl.Manager.Despawn(ctx, ctl.Records, name, true)
	if err != nil {
		return nil, fmt.Errorf("stop %s: %w", name, err)
	}
	if after, _, err := ctl.Manager.Find(ctx, ctl.Records, name); err == nil {
		return after, nil
	}
	return row, nil
}

// isCode reports whether err is an *wire.EndpointError with one of codes.
func isCode(err error, codes ...wire.ErrorCode) bool {
	e, ok := errors.AsType[*wire.EndpointError](err)
	return ok && slices.Contains(codes, e.Code)
}

// noManager explains an error that says no manager serves the space, or, for a person's view,
// that their manager is gone: an empty registry (failed-precondition) or no responder on the
// manager's rail (unavailable, not executed).
// Refusals become not-authorized; anything else is returned as it is.
func noManager(err error, ctl *factory.Control) error {
	if isCode(err, wire.CodeFailedPrecondition) || isCode(err, wire.CodeUnavailable) && endpoint.Outcome(err) == wire.OutcomeNotExecuted {
		if p := ctl.Manager.Pinned; p != "" { // a person's view of one manager (--mesh)
			return fmt.Errorf("manager %s does not answer; run it again with `cotal supervise --mesh`: %w", p, err)
		}
		return fmt.Errorf("no supervisor serves space %s; start one with `cotal up` (without --no-manager) or `cotal supervise`: %w", ctl.Space, err)
	}
	return factory.Refusal(err)
}

func printResult(io *iostreams.IOStreams, asJSON bool, res *Result) error {
	if asJSON {
		return json.NewEncoder(io.Out).Encode(res)
	}
	a := res.Acceptance
	if res.Process == nil {
		state := res.State
		if state == "" {
			state = "still open"
		}
		fmt.Fprintf(io.Out, "%s (%s.%s, lifecycle %s): spawn %s\n", a.Name, a.Owner, a.Actor, a.UID, state)
		return nil
	}
	printRow(io, res.Process)
	return nil
}

func printRow(io *iostreams.IOStreams, r *manager.Row) {
	fmt.Fprintf(io.Out, "%s (%s): %s", r.Name, r.ID, r.Status)
	if r.PID != 0 {
		fmt.Fprintf(io.Out, ", pid %d", r.PID)
	}
	if r.InstanceID != "" {
		fmt.Fprintf(io.Out, ", manager %s", r.InstanceID)
	}
	fmt.Fprintln(io.Out)
}

// NewCmdStop returns the `cotal stop` command.
func NewCmdStop(f *factory.Factory) *cobra.Command {
	var name, meshURL, instance string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stop NAME",
		Short: "Stop a spawned agent: SIGTERM, then SIGKILL after a grace period; its lifecycle is retired",
		Long: "Ask the manager that runs agent NAME to stop it (despawn, in mode any, pinned to the\n" +
			"lifecycle it runs), and print its row once stopped. An agent no manager runs is an error.\n" +
			"With --mesh URL, as the person logged in to that user-auth mesh: one of your own agents,\n" +
			"on the one manager you may address (--instance names it when you run several).",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if name != "" && name != args[0] {
					return &exit.UsageError{Err: fmt.Errorf("stop %s --name %s: name the agent once", args[0], name)}
				}
				name = args[0]
			}
			if err := agentflags.ValidName("NAME", name); err != nil {
				return err
			}
			control := f.Control
			switch {
			case meshURL != "":
				if err := f.CheckMesh(meshURL); err != nil {
					return err
				}
				if instance != "" {
					if _, err := wire.ParseLifecycleUID(instance); err != nil {
						return &exit.UsageError{Err: fmt.Errorf("--instance: %w", err)}
					}
				}
				control = func(ctx context.Context) (*factory.Control, error) {
					return f.MeshControl(ctx, meshURL, wire.LifecycleUID(instance))
				}
			case instance != "":
				return &exit.UsageError{Err: errors.New("--instance names the manager of a --mesh stop; without --mesh the manager that runs the agent is found")}
			}
			ctl, err := control(cmd.Context())
			if err != nil {
				return err
			}
			defer ctl.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), stopWait)
			defer cancel()
			row, err := stopAgent(ctx, ctl, name)
			if err != nil {
				return noManager(err, ctl)
			}
			if asJSON {
				return json.NewEncoder(f.IO.Out).Encode(row)
			}
			printRow(f.IO, row)
			return nil
		},
	}
	f.Target.Register(cmd.Flags())
	cmd.Flags().StringVar(&name, "name", "", "the agent to stop (the same as NAME, which it predates)")
	cmd.Flags().StringVar(&meshURL, "mesh", "", "stop, as yourself (`cotal login --mesh` first), an agent of your manager on the user-auth mesh whose exchange is at this URL")
	cmd.Flags().StringVar(&instance, "instance", "", "with --mesh, the manager instance to ask (default: the only live one you may address)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the agent's row, as its manager reports it, as JSON")
	return cmd
}

// NewCmdSupervise returns the `cotal supervise` command.
func NewCmdSupervise(f *factory.Factory) *cobra.Command {
	var life time.Duration
	var name, meshURL, actor, rosterPath string
	var maxSessions int
	cmd := &cobra.Command{
		Use:   "supervise [--name NAME] [--max-sessions N] | --mesh URL [--dir D]",
		Short: "Run a manager beside the running mesh, until Ctrl-C",
		Long: "Run a supervisor for one space of the running mesh: it serves the manager endpoint\n" +
			"(status, ps, inspect, spawn, despawn, attach, input, stop) as instance local.NAME, registered in the\n" +
			"space's service registry, holds the manager lease and answers the manager liveness plane.\n" +
			"`cotal spawn`, `stop` and `ps` reach it there. With --roster FILE it then boots the agents the\n" +
			"roster lists (agents: [{name, agent, role, config, cwd}]), each from its persona file.\n" +
			"Several supervisors of different --name can\n" +
			"serve one space (beside the one of `cotal up`, unless it ran with --no-manager); a second\n" +
			"one of the same name on the same mesh directory is refused. On Ctrl-C it stops and retires\n" +
			"the agents it spawned.\n\n" +
			"With --mesh URL, run a remote manager on this machine for a mesh in user-auth mode\n" +
			"elsewhere (URL is what its `cotal up --user-auth` prints): logged in there (`cotal login\n" +
			"--mesh URL`) as a person granted supervise, it asks the mesh's host for its credentials,\n" +
			"registers, and serves until Ctrl-C, or until its host takes its authority away. Its\n" +
			"instance and its agents' launch material live in --dir (default ./.cotal).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxSessions < 1 {
				return &exit.UsageError{Err: fmt.Errorf("--max-sessions %d: must be at least 1", maxSessions)}
			}
			if meshURL != "" {
				return superviseRemote(cmd.Context(), f, meshURL, actor, maxSessions)
			}
			if err := agentflags.ValidName("--name", name); err != nil {
				return err
			}
			if life < ledger.MinHeldLifetime {
				return &exit.UsageError{Err: fmt.Errorf("--credential-lifetime %s: must be at least %s", life, ledger.MinHeldLifetime)}
			}
			var roster *manifest.Roster
			if rosterPath != "" {
				var err error
				if roster, err = loadRoster(rosterPath); err != nil {
					return err
				}
			}
			d, st, sp, err := f.Mesh("the supervisor needs an authenticated mesh: it issues each agent its own credential")
			if err != nil {
				return err
			}
			l, err := f.Ledger(cmd.Context(), sp)
			if err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "supervising space %s of %s as %s; Ctrl-C stops\n", sp, st.URL, name)
			so := mesh.SupervisorOptions{Name: name, MaxSessions: maxSessions}
			var booted sync.WaitGroup
			if roster != nil {
				so.Ready = func(instance wire.LifecycleUID) {
					booted.Go(func() { bootRoster(cmd.Context(), f, instance, roster) })
				}
			}
			defer booted.Wait()
			return mesh.Supervise(cmd.Context(), d, l, so, life, slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn})))
		},
	}
	cmd.Flags().StringVar(&f.Target.Dir, "dir", "", "the mesh directory (default: the nearest .cotal)")
	cmd.Flags().StringVar(&f.Target.Space, "space", "", "the space agents are spawned into (default: the mesh's first)")
	cmd.Flags().StringVar(&name, "name", mesh.ManagerActor, "the manager's name: its actor, and its instance in the mesh directory")
	cmd.Flags().DurationVar(&life, "credential-lifetime", authority.DaemonLifetime, "lifetime of the supervisor's credential, renewed at two thirds of it")
	cmd.Flags().IntVar(&maxSessions, "max-sessions", manager.DefaultMaxSessions, "the ceiling of attach sessions it serves at once")
	cmd.Flags().StringVar(&meshURL, "mesh", "", "run a remote manager for the user-auth mesh whose exchange is at this URL")
	cmd.Flags().StringVar(&actor, "actor", "cli", "with --mesh: your actor whose row holds supervise")
	cmd.Flags().StringVar(&rosterPath, "roster", "", "boot the agents this roster file lists once the manager serves, each from its persona as `cotal spawn --detach` starts one")
	return cmd
}

// superviseRemote runs `cotal supervise --mesh URL`.
func superviseRemote(ctx context.Context, f *factory.Factory, meshURL, actor string, maxSessions int) error {
	if err := factory.CheckMeshURL(meshURL); err != nil {
		return err
	}
	if err := wire.ValidateActor(actor); err != nil {
		return &exit.UsageError{Err: fmt.Errorf("--actor: %w", err)}
	}
	hc := userauth.NewHTTPClient()
	path, err := oidc.DefaultSessionsPath()
	if err != nil {
		return err
	}
	doc, err := authservice.Discover(ctx, hc, path, meshURL)
	if err != nil {
		return err
	}
	tokens, err := authservice.IDTokens(ctx, hc, path, meshURL, doc)
	if err != nil {
		return err
	}
	d, err := mesh.FindDir(f.Target.Dir, ".")
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	err = mesh.SuperviseRemote(ctx, d, remotemgr.SuperviseConfig{
		Space: wire.Space(doc.Space), Server: doc.Brokers(), AuthorityURL: strings.Join(doc.ManagerAuthorities().URLs(), ","), Actor: actor,
		ExchangeURL: strings.Join(doc.Exchanges().URLs(), ","), SentinelCreds: []byte(doc.SentinelCreds),
		IDToken: tokens, HTTP: hc, MaxSessions: maxSessions, Log: log,
		Ready: func(instance wire.LifecycleUID, epoch int64) {
			fmt.Fprintf(f.IO.ErrOut, "remote manager %s serving space %s of %s at epoch %d; Ctrl-C stops\n", instance, doc.Space, doc.Server, epoch)
		},
	})
	if ctx.Err() != nil {
		return nil // Ctrl-C: stopped as asked
	}
	return err
}

// loadRoster reads a roster and refuses, before the manager starts, what its manager would
// refuse: a harness it does not know, a config that is not a persona name, shared tools.
func loadRoster(path string) (*manifest.Roster, error) {
	r, err := manifest.LoadRoster(path)
	if err != nil {
		return nil, err
	}
	for _, a := range r.Agents {
		switch {
		case !slices.Contains(manager.Harnesses, manager.Harness(a.Agent)):
			return nil, fmt.Errorf("%s: entry %s: agent %q: must be one of %q", path, a.Name, a.Agent, manager.Harnesses)
		case a.Config != "" && agentflags.ValidName("config", a.Config) != nil:
			return nil, fmt.Errorf("%s: entry %s: config %q: must name a persona of the catalog", path, a.Name, a.Config)
		case len(a.ShareTools) > 0:
			return nil, fmt.Errorf("%s: entry %s: share-tools: this manager does not share MCP servers", path, a.Name)
		}
	}
	return r, nil
}

// bootRoster spawns the roster's agents on the manager instance, each as `cotal spawn --detach`
// would, and reports each on stderr.
func bootRoster(ctx context.Context, f *factory.Factory, instance wire.LifecycleUID, r *manifest.Roster) {
	ctl, err := f.WatchControl(ctx)
	if err != nil {
		fmt.Fprintf(f.IO.ErrOut, "roster %s: %v\n", r.Path, err)
		return
	}
	defer ctl.Close()
	for _, a := range r.Agents {
		args := manager.SpawnArgs{Name: a.Name, Config: cmp.Or(a.Config, a.Name), Agent: a.Agent, Role: a.Role, Cwd: a.Cwd}
		sp, err := ctl.Manager.SpawnOn(ctx, instance, args)
		if err == nil {
			err = goalError(a.Name, sp)
		}
		if err != nil {
			fmt.Fprintf(f.IO.ErrOut, "roster: %v\n", factory.Refusal(err))
			continue
		}
		fmt.Fprintf(f.IO.ErrOut, "roster: %s is up (lifecycle %s)\n", a.Name, sp.Acceptance.UID)
	}
}
