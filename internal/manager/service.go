package manager

import (
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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/contract"
	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// The manager endpoint (SPEC §13.2–§13.6): the supervisor's commands served on the ep rails, so
// any host holding a credential with the capability can spawn, list and stop agents, and an agent
// can stop itself. spawn is a goal: its reply is the acceptance (goalId = the request id), its
// progress rides epe, and its terminal result is a create-only fact on epf, written once the
// agent is present (succeeded), has exited (failed), or its 30 s readiness deadline passed
// (uncertain).

// ReadinessDeadline is how long a spawned agent has to become present (SPEC §13.6: 30 s).
const ReadinessDeadline = 30 * time.Second

// The goal states a spawn's terminal fact carries (SPEC §13.6).
const (
	GoalSucceeded = "succeeded"
	GoalFailed    = "failed"
	GoalCancelled = "cancelled"
	GoalUncertain = "uncertain"
)

// The progress phases of a spawn goal, in order, as the reference emits them.
const (
	phaseHandoff    = "handoff"
	phaseLaunched   = "launched"
	phasePresence   = "presence"
	phaseCancelling = "cancelling"
	phaseTerminal   = "terminal"
)

// ServiceConfig is what a Service serves.
type ServiceConfig struct {
	// Conn is the serving connection: a credential with the manager's serve rows at Epoch.
	Conn *nats.Conn
	// Presence is the connection the spawned agents' presence is watched on, for readiness; Conn
	// when nil. A remote manager's serve identity holds the serve rows alone, and its supervisor
	// identity reads presence.
	Presence *nats.Conn
	Space    wire.Space
	Instance wire.LifecycleUID
	Epoch    int64
	// Owner is the manager's owner token (its descriptor's owner).
	Owner string
	// HostLaunch reports whether a caller may spawn a raw command (launchOptions.command): host
	// launch authority, which only the mesh operator's instrument holds.
	HostLaunch func(ctx context.Context, caller wire.Lifecycle) bool
	// CallerGrant returns what a caller's own credential may do; a spawn by any caller but the
	// operator's instrument must stay within it (channels read and posted to, role). Nil refuses
	// such spawns.
	CallerGrant func(ctx context.Context, caller wire.Lifecycle) (*cotal.Grant, error)
	// Readiness is the readiness deadline; zero means ReadinessDeadline.
	Readiness time.Duration
	// Personas is the directory of the agent files a spawn's config names (package persona), on
	// this manager's host; empty refuses config.
	Personas string
	// Runs is the directory of the launch specs a launch names (package manifest), on this
	// manager's host; empty refuses launch.
	Runs string
	// CredsDir, when set, is where a launched agent's creds file is written, as <name>.creds.
	CredsDir string
	// Workspace is the directory a spawned agent's relative cwd is taken from, and the cwd of
	// one that names none.
	Workspace string
	// Workflows hosts workflow runs (the run-* commands); nil hosts none (they are unimplemented).
	Workflows *runhost.Host
	// Sessions establishes and ends attach sessions; nil serves none (attach is unimplemented).
	Sessions SessionAuthority
	// MaxSessions is the ceiling of concurrent sessions; zero means DefaultMaxSessions.
	MaxSessions int
	// SessionIdle ends a session whose holder sent nothing for so long; zero means SessionIdle.
	SessionIdle time.Duration
	Log         *slog.Logger
}

// Service serves one supervisor as the manager endpoint. Create it with Serve; Stop ends it.
type Service struct {
	sup      *Supervisor
	cfg      ServiceConfig
	js       jetstream.JetStream
	presence jetstream.KeyValue
	started  time.Time
	host     string
	srv      *endpoint.Server
	reg      *endpoint.Registration

	ctx    context.Context // ends at Stop: the goal followers
	cancel context.CancelFunc
	goals  chan struct{} // one slot per goal follower; Stop waits for them all

	mu        sync.Mutex
	goalIndex map[goalKey]*goal  // guarded by mu: the open goals, and the settled ones for goalRetention
	sessions  map[string]*bridge // guarded by mu: the sessions served, by id
	turns     turnTable          // the seats' open turns, and the yields of the ended ones

	sessionSlots chan struct{} // one per session served or being established: the ceiling
	stopping     bool          // guarded by mu: Stop has begun, and no session starts

	sessionsWG sync.WaitGroup // the bridges running
	closes     sync.WaitGroup // the ledger closes of ended sessions
}

// maxGoals bounds the spawn goals followed at once.
const maxGoals = 256

// Serve publishes the manager's contract, registers the instance in the space's service
// registry and serves its commands on cfg.Conn.
func (s *Supervisor) Serve(ctx context.Context, cfg ServiceConfig) (*Service, error) {
	if cfg.Readiness <= 0 {
		cfg.Readiness = ReadinessDeadline
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = SessionIdle
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.HostLaunch == nil {
		cfg.HostLaunch = func(context.Context, wire.Lifecycle) bool { return false }
	}
	cluster, err := Contract()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, err
	}
	if cfg.Presence == nil {
		cfg.Presence = cfg.Conn
	}
	pjs, err := jetstream.New(cfg.Presence)
	if err != nil {
		return nil, err
	}
	presence, err := pjs.KeyValue(ctx, string(cfg.Space.PresenceBucket()))
	if err != nil {
		return nil, fmt.Errorf("open presence: %w", err)
	}
	records, err := js.KeyValue(ctx, string(meshwire.RecordsBucket(cfg.Space)))
	if err != nil {
		return nil, fmt.Errorf("open the records bucket: %w", err)
	}
	host, _ := os.Hostname()
	svc := &Service{sup: s, cfg: cfg, js: js, presence: presence, started: time.Now(), host: host, goals: make(chan struct{}, maxGoals),
		goalIndex: map[goalKey]*goal{}, sessions: map[string]*bridge{}, sessionSlots: make(chan struct{}, cfg.MaxSessions)}
	svc.ctx, svc.cancel = context.WithCancel(context.Background())

	if err := contract.Publish(ctx, js, cfg.Space, cluster.Artifacts); errors.Is(err, contract.ErrCorrupt) {
		// A capture holds a digest subject: describe carries the documents all the same.
		cfg.Log.Warn("the contract store holds a foreign message at a digest subject of the manager contract", "err", err)
	} else if err != nil {
		return nil, fmt.Errorf("publish the manager's contract: %w", err)
	}
	handlers := map[string]endpoint.Handler{
		CommandStatus: svc.status, CommandPs: svc.ps, CommandInspect: svc.inspect,
		CommandSpawn: svc.spawn, CommandDespawn: svc.despawn, CommandStop: svc.stop,
		CommandAttach: svc.attach, CommandInput: svc.input,
		CommandModels: svc.models, CommandResolveCwd: svc.resolveCwd, CommandDefinePersona: svc.definePersona,
		CommandListPersonas: svc.listPersonas, CommandShowPersona: svc.showPersona, CommandLaunch: svc.launch,
		CommandTurn: svc.turnCmd, CommandTurnPending: svc.turnPending, CommandTurnYield: svc.turnYield,
		CommandRunStart: svc.runStart, CommandRunResume: svc.runResume, CommandRunAnswer: svc.runAnswer,
		CommandRunStatus: svc.runStatus, CommandRunPs: svc.runPs,
	}
	var cmds []endpoint.Command
	var names []string
	for _, c := range cluster.Document.Commands {
		if slices.Contains(unimplemented, c.Name) {
			continue // declared for the reference's document, served by no Go manager
		}
		sch := cluster.Schemas[c.Name]
		cmds = append(cmds, endpoint.Command{Name: c.Name, Class: c.Class, Modes: c.Modes, InputDigest: c.InputDigest, OutputDigest: c.OutputDigest,
			Input: sch.Input, Output: sch.Output, Handle: handlers[c.Name],
			// A manager with no run directory launches no manifest, and one with no run host
			// hosts no workflow run: the class rail's call goes to one that does (a remote
			// manager leaves both to the host's).
			OffClassRail: c.Name == CommandLaunch && cfg.Runs == "" || strings.HasPrefix(c.Name, "run-") && cfg.Workflows == nil})
		names = append(names, c.Name)
	}
	doc, _ := json.Marshal(cluster.Document) // always encodes
	svc.srv, err = endpoint.Serve(cfg.Conn, endpoint.Config{
		Space: cfg.Space, Endpoint: wire.ManagerEndpoint, Owner: cfg.Owner, Instance: cfg.Instance, Epoch: cfg.Epoch, Commands: cmds,
		Clusters: []endpoint.Cluster{{Digest: cluster.Closure.Digest, Commands: names, Document: doc}}, Log: cfg.Log,
		Cancel: svc.cancelGoal,
	})
	if err != nil {
		return nil, err
	}
	svc.reg, err = endpoint.Register(ctx, records, cfg.Instance, cfg.Epoch, endpoint.ServiceSpec{
		Endpoint: string(wire.ManagerEndpoint), Owner: cfg.Owner, ClusterDigests: []string{cluster.Closure.Digest}, Protocol: endpoint.Protocol{V: 1},
	}, cfg.Log)
	if err != nil {
		_ = svc.srv.Stop(ctx)
		return nil, err
	}
	return svc, nil
}

// Stop ends every session (manager-restart), deregisters the instance, stops serving and waits
// for the goal followers.
func (svc *Service) Stop(ctx context.Context) error {
	svc.endSessions("", meshwire.EndManagerRestart)
	waited := make(chan struct{})
	go func() { svc.sessionsWG.Wait(); svc.closes.Wait(); close(waited) }()
	var err error
	select {
	case <-waited:
	case <-ctx.Done(): // deregister and stop serving all the same, on a short deadline of their own
		err = fmt.Errorf("end the sessions: %w", ctx.Err())
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
	}
	err = errors.Join(err, svc.reg.Deregister(ctx, svc.cfg.Epoch))
	err = errors.Join(err, svc.srv.Stop(ctx))
	svc.cancel()
	for range maxGoals {
		select {
		case svc.goals <- struct{}{}:
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
	}
	return err
}

// Row is one agent as a manager reports it in ps and inspect: the reference's AGENT_ROW.
type Row struct {
	Name         string `json:"name"`
	ID           string `json:"id"`
	Role         string `json:"role,omitempty"`
	Agent        string `json:"agent"`
	Space        string `json:"space"`
	Mode         string `json:"mode"`
	Status       string `json:"status"`
	UptimeMs     int64  `json:"uptimeMs"`
	Mesh         string `json:"mesh"`
	LifecycleUID string `json:"lifecycleUid"`
	Cwd          string `json:"cwd,omitempty"`
	PID          int    `json:"pid,omitempty"`
	InstanceID   string `json:"instanceId,omitempty"`
	Host         string `json:"host,omitempty"`
}

// agentMode is the mode a row reports: every agent of this supervisor is a process it spawned.
const agentMode = "process"

func (svc *Service) row(st Status) Row {
	agent := string(st.Agent)
	if agent == "" {
		agent = "command"
	}
	return Row{Name: st.Name, ID: st.Principal, Role: st.Role, Agent: agent, Space: string(svc.cfg.Space), Mode: agentMode,
		Status: string(st.State), UptimeMs: time.Since(st.Started).Milliseconds(), Mesh: string(svc.cfg.Space),
		LifecycleUID: string(st.LifecycleUID), Cwd: st.Dir, PID: st.PID, InstanceID: string(svc.cfg.Instance), Host: svc.host}
}

func (svc *Service) status(context.Context, *endpoint.Request) (any, error) {
	live := 0
	for _, st := range svc.sup.List() {
		if st.State == StateRunning || st.State == StateRestarting {
			live++
		}
	}
	return map[string]any{
		"instanceId": svc.cfg.Instance, "runtime": agentMode, "custody": "legacy", "agentCount": live,
		"uptimeMs": time.Since(svc.started).Milliseconds(), "connectors": []any{}, "classSpawn": true,
		"staticReconciliation": map[string]any{"state": "idle", "failures": []any{}},
	}, nil
}

// ps lists the agents the caller may see (seer).
func (svc *Service) ps(ctx context.Context, req *endpoint.Request) (any, error) {
	sees := svc.seer(ctx, req.Caller())
	rows := []Row{}
	for _, st := range svc.sup.List() {
		if sees(st.Principal) {
			rows = append(rows, svc.row(st))
		}
	}
	return rows, nil
}

// seer returns whether caller may see the agent of a principal in ps and inspect: an agent of its
// own owner, or any agent when it holds host launch authority (the operator's instrument), which
// is asked once, and only for an agent of another owner.
func (svc *Service) seer(ctx context.Context, caller wire.Lifecycle) func(principal string) bool {
	var operator *bool
	return func(principal string) bool {
		if p, err := wire.ParsePrincipal(principal); err == nil && p.Owner() == caller.Principal.Owner() {
			return true
		}
		if operator == nil {
			ok := svc.cfg.HostLaunch(ctx, caller)
			operator = &ok
		}
		return *operator
	}
}

// inspect answers the row of the named agent; an agent the caller may not see is not found.
func (svc *Service) inspect(ctx context.Context, req *endpoint.Request) (any, error) {
	var args struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	st, ok := svc.sup.Lookup(args.Name)
	if !ok || !svc.seer(ctx, req.Caller())(st.Principal) {
		return nil, notExecuted(wire.CodeNotFound, "this manager runs no agent %s", args.Name)
	}
	return svc.row(st), nil
}

func notExecuted(code wire.ErrorCode, format string, args ...any) *wire.EndpointError {
	return wire.NewEndpointError(code, wire.OutcomeNotExecuted, format, args...)
}

// spec maps the args to a Spec, refusing what this manager does not implement by name.
func (a *SpawnArgs) spec(hostLaunch bool) (Spec, *wire.EndpointError) {
	for field, set := range map[string]bool{
		"config": a.Config != "", "identity": a.Identity != "", "variant": a.Variant != "",
		"continueSession": a.ContinueSession != "",
		"shareTools":      a.ShareTools != "", "supervise": len(a.Supervise) > 0,
	} {
		if set {
			return Spec{}, notExecuted(wire.CodeUnimplemented, "this manager does not implement spawn's %s", field)
		}
	}
	agent := a.Agent
	if agent == "" {
		agent = a.DefaultAgent
	}
	sp := Spec{Name: a.Name, Role: a.Role, Subscribe: a.Subscribe, AllowSubscribe: a.AllowSubscribe, AllowPublish: a.AllowPublish,
		Agent: Harness(agent), Dir: a.Cwd, Model: a.Model, Instructions: a.instructions, Kickoff: a.Prompt, Resume: a.Resume}
	if o := a.LaunchOptions; o != nil && (len(o.Command) > 0 || len(o.Env) > 0) {
		if !hostLaunch {
			return Spec{}, notExecuted(wire.CodePermissionDenied, "launchOptions.command and env are host launch authority, which the caller does not hold")
		}
		sp.Command, sp.Env = o.Command, o.Env
	}
	if o := a.LaunchOptions; o != nil {
		sp.Runtime = Runtime(o.Runtime) // how it runs, not what: no launch authority needed
	}
	sp.Command = append(sp.Command, a.cotalArgs...)
	if err := sp.validate(); err != nil {
		return Spec{}, notExecuted(wire.CodeBadRequest, "%v", err)
	}
	return sp, nil
}

func (svc *Service) spawn(ctx context.Context, req *endpoint.Request) (any, error) {
	var args SpawnArgs
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	var capabilities []string
	if args.Config != "" && svc.cfg.Personas != "" {
		var refusal *wire.EndpointError
		if capabilities, refusal = args.applyPersona(svc.cfg.Personas); refusal != nil {
			return nil, refusal
		}
	}
	return svc.start(ctx, req, args, func(sp *Spec) { sp.Capabilities = capabilities })
}

// start spawns the agent args describe, as req's caller, and follows its readiness as the goal
// req opens. shape, when not nil, completes the spec before it is checked against the caller.
func (svc *Service) start(ctx context.Context, req *endpoint.Request, args SpawnArgs, shape func(*Spec)) (any, error) {
	switch {
	case args.Cwd == "":
		args.Cwd = svc.cfg.Workspace
	case !filepath.IsAbs(args.Cwd) && svc.cfg.Workspace != "":
		args.Cwd = filepath.Join(svc.cfg.Workspace, args.Cwd) // a relative cwd is the workspace's
	}
	operator := svc.cfg.HostLaunch(ctx, req.Caller())
	spec, refusal := args.spec(operator)
	if refusal != nil {
		return nil, refusal
	}
	if !operator {
		spec.SpawnedBy, spec.Owner = req.Caller().String(), req.Caller().Principal.Owner()
	}
	if shape != nil {
		shape(&spec)
	}
	if !operator {
		if refusal := svc.withinCaller(ctx, req.Caller(), spec); refusal != nil {
			return nil, refusal
		}
	}
	fingerprint, err := meshwire.Fingerprint(req.Route, req.Envelope)
	if err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "fingerprint: %v", err)
	}
	select {
	case svc.goals <- struct{}{}:
	default:
		return nil, notExecuted(wire.CodeResourceExhausted, "this manager follows %d spawns already", maxGoals)
	}
	g := &goal{svc: svc, caller: req.Caller(), id: req.Envelope.ID, fingerprint: fingerprint, name: spec.Name,
		cancel: make(chan string, 1), done: make(chan struct{})}
	g.watchPresence(spec.Name)
	st, err := svc.sup.Spawn(ctx, spec)
	if err != nil {
		g.stopWatch()
		<-svc.goals
		switch {
		case errors.Is(err, ErrAlreadyExists):
			return nil, notExecuted(wire.CodeAlreadyExists, "%v", err)
		case errors.Is(err, ErrClosed):
			return nil, notExecuted(wire.CodeUnavailable, "%v", err)
		}
		return nil, wire.NewEndpointError(wire.CodeInternal, wire.OutcomeUnknown, "spawn %s: %v", spec.Name, err)
	}
	p, _ := wire.ParsePrincipal(st.Principal) // the supervisor's own issue
	g.agent, g.exited = wire.Lifecycle{Principal: p, UID: st.LifecycleUID}, svc.sup.Done(spec.Name)
	svc.track(g)
	g.progress(phaseHandoff, "", nil)
	go g.follow() // owned: holds a goals slot that Stop waits for
	return Acceptance{Name: spec.Name, Owner: p.Owner(), Actor: p.Actor(), UID: string(st.LifecycleUID), GoalID: g.id,
		Fingerprint: fingerprint, ReadinessDeadlineMs: svc.cfg.Readiness.Milliseconds(),
		Executor: Executor{LifecycleUID: string(svc.cfg.Instance), Epoch: svc.cfg.Epoch}}, nil
}

// withinCaller refuses a spawn that would give the new agent what its caller's own credential
// does not hold: a channel it may not read, one it may not post to (the posting rights the agent
// would get, defaulted as the ledger defaults them), or another role.
func (svc *Service) withinCaller(ctx context.Context, caller wire.Lifecycle, spec Spec) *wire.EndpointError {
	if svc.cfg.CallerGrant == nil {
		return notExecuted(wire.CodePermissionDenied, "this manager spawns for the operator only")
	}
	g, err := svc.cfg.CallerGrant(ctx, caller)
	if err != nil {
		return notExecuted(wire.CodePermissionDenied, "the caller's own grant cannot be read: %v", err)
	}
	for _, ch := range append(slices.Clone(spec.Subscribe), spec.AllowSubscribe...) {
		if !g.CanRead(ch) {
			return notExecuted(wire.CodePermissionDenied, "the new agent may not read %s: its caller cannot", ch)
		}
	}
	post := spec.AllowPublish
	if post == nil {
		post = slices.DeleteFunc(slices.Clone(spec.Subscribe), func(ch string) bool { return !wire.IsConcreteChannel(ch) })
	}
	for _, ch := range post {
		if !g.CanPost(ch) {
			return notExecuted(wire.CodePermissionDenied, "the new agent may not post to %s: its caller cannot", ch)
		}
	}
	if spec.Role != "" && spec.Role != g.Role && !slices.Contains(g.Capabilities, userauth.ScopeRolePrefix+spec.Role) {
		return notExecuted(wire.CodePermissionDenied, "the new agent may not take role %s: its caller neither holds it nor may delegate it", spec.Role)
	}
	for _, c := range spec.Capabilities {
		if !slices.Contains(g.Capabilities, c) {
			return notExecuted(wire.CodePermissionDenied, "the new agent may not hold capability %s: its caller does not", c)
		}
	}
	return nil
}

// stopResult is despawn's and stop's reply.
type stopResult struct {
	Name     string `json:"name"`
	Stopped  bool   `json:"stopped"`
	Graceful bool   `json:"graceful"`
}

func gracefulOf(req *endpoint.Request) (bool, *wire.EndpointError) {
	var args struct {
		Graceful *bool `json:"graceful"`
	}
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return false, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	return args.Graceful == nil || *args.Graceful, nil
}

// despawn stops the target agent, which must be the lifecycle the caller names: a request for a
// predecessor of the name is expired, and the running agent is left alone.
func (svc *Service) despawn(ctx context.Context, req *endpoint.Request) (any, error) {
	graceful, refusal := gracefulOf(req)
	if refusal != nil {
		return nil, refusal
	}
	st, refusal := svc.seatOf(req)
	if refusal != nil {
		return nil, refusal
	}
	// An agent despawns itself and what it spawned (SPEC's child mode); only host launch authority reaches
	// the operator's agents and other agents' children.
	caller := req.Caller()
	self := st.Principal == caller.Principal.String() && st.LifecycleUID == caller.UID
	if !self && st.SpawnedBy != caller.String() && !svc.cfg.HostLaunch(ctx, caller) {
		return nil, notExecuted(wire.CodePermissionDenied, "%s was not spawned by %s: an agent despawns only the agents it spawned", st.Name, caller.Principal)
	}
	svc.endSessions(st.Name, meshwire.EndTargetDespawn)
	if err := svc.sup.StopAgent(ctx, st.Name, graceful); err != nil {
		return nil, wire.NewEndpointError(wire.CodeInternal, wire.OutcomeUnknown, "stop %s: %v", st.Name, err)
	}
	return stopResult{Name: st.Name, Stopped: true, Graceful: graceful}, nil
}

// stop is an agent stopping itself: the caller's own lifecycle (the subject's triple). The reply
// goes out before the stop, which would end the caller.
func (svc *Service) stop(_ context.Context, req *endpoint.Request) (any, error) {
	graceful, refusal := gracefulOf(req)
	if refusal != nil {
		return nil, refusal
	}
	me := req.Caller()
	st, ok := svc.sup.Lookup(me.Principal.Actor())
	if !ok || st.Principal != me.Principal.String() || st.LifecycleUID != me.UID {
		return nil, notExecuted(wire.CodeNotFound, "this manager did not spawn %s", me)
	}
	select {
	case svc.goals <- struct{}{}:
	default:
		return nil, notExecuted(wire.CodeResourceExhausted, "this manager is busy")
	}
	// The reply leaves first: the stop ends the caller.
	req.AfterReply(func() {
		go func() { // owned: holds a goals slot that Stop waits for
			defer func() { <-svc.goals }()
			ctx, cancel := context.WithTimeout(svc.ctx, time.Minute)
			defer cancel()
			if err := svc.sup.StopAgent(ctx, me.Principal.Actor(), graceful); err != nil {
				svc.cfg.Log.Warn("stop an agent at its request", "agent", me, "err", err)
			}
		}()
	})
	return stopResult{Name: me.Principal.Actor(), Stopped: true, Graceful: graceful}, nil
}
