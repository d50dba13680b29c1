// Package manager is the local supervisor: it spawns agent processes, each on its own issued
// credential handed over as launch material, restarts one that crashes with backoff until it
// crashes too often (then it is escalated: no more restarts), and retires an agent's lifecycle
// when its process is done, so nothing it held outlives it. A process runs on a pseudo-terminal
// unless its spec asks for none: its Terminal keeps a scrollback and lets a person watch and type.
package manager

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gocotal/cotal/internal/atomicfile"
	"github.com/gocotal/cotal/internal/metrics"
	"github.com/gocotal/cotal/wire"
)

// LaunchMaterialEnv names the one environment variable a spawned process gets from the
// supervisor: the path of its launch material. No secret travels in the environment.
const LaunchMaterialEnv = "COTAL_LAUNCH_MATERIAL"

// Spec is an agent to spawn.
type Spec struct {
	Name           string   `json:"name"`
	Role           string   `json:"role,omitempty"`
	Subscribe      []string `json:"subscribe,omitempty"`
	AllowSubscribe []string `json:"allowSubscribe,omitempty"`
	AllowPublish   []string `json:"allowPublish,omitzero"` // nil: the default; empty: none
	// Command is the process to run, argv[0] first; with Agent, the harness's extra arguments.
	Command []string `json:"command,omitempty"`
	// Agent, when set, starts that harness with the cotal MCP server configured.
	Agent Harness `json:"agent,omitempty"`
	// Model is the model the harness runs, when it takes one (Harness.command).
	Model string `json:"model,omitempty"`
	// Instructions are the persona: what the harness appends to its system prompt.
	Instructions string `json:"instructions,omitempty"`
	// Kickoff is a first message the harness submits once the session is up (spawn's prompt):
	// what to do now, where Instructions say who the agent is.
	Kickoff string `json:"kickoff,omitempty"`
	// Resume reopens an earlier session of the harness: ResumeLast for its latest in the working
	// directory, or a session id (Harness.resumes).
	Resume string `json:"resume,omitempty"`
	// Capabilities are what the agent's credential carries beyond an agent's baseline: an agent
	// file's capabilities, which only its operator-written file grants.
	Capabilities []string `json:"capabilities,omitempty"`
	// Env adds variables to the process's environment.
	Env []string `json:"env,omitempty"`
	// Dir is the process's working directory; empty means the supervisor's.
	Dir string `json:"cwd,omitempty"`
	// Runtime is how the process runs; empty means RuntimePTY.
	Runtime Runtime `json:"runtime,omitempty"`
	// CredsFile, when set, is where the agent's creds are written instead of its private launch
	// directory: the mesh's creds folder, for an agent a manifest launched. It is removed with
	// the launch material.
	CredsFile string `json:"credsFile,omitempty"`
	// SpawnedBy is the lifecycle (dot-form) of the agent that asked for this spawn; empty when the
	// host's operator did. Such an agent may despawn what it spawned and nothing else.
	SpawnedBy string `json:"spawnedBy,omitempty"`
	// Owner is the owner token of the caller that asked for this spawn, when it was not the
	// host's operator: on a user-auth mesh's host, a person's agent is issued as theirs.
	Owner string `json:"owner,omitempty"`
}

func (s Spec) validate() error {
	if err := wire.ValidateAgentName(s.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if err := s.Agent.validate(); err != nil {
		return err
	}
	if s.Agent == "" && (len(s.Command) == 0 || s.Command[0] == "") {
		return &wire.ValidationError{Field: "command", Rule: "is required without an agent preset"}
	}
	if err := s.Agent.takes(s.Model, s.Instructions); err != nil {
		return err
	}
	if err := s.Agent.kicksOff(s.Kickoff); err != nil {
		return err
	}
	if err := s.Agent.resumes(s.Resume); err != nil {
		return err
	}
	if s.Dir != "" {
		if !filepath.IsAbs(s.Dir) {
			return &wire.ValidationError{Field: "cwd", Value: s.Dir, Rule: "must be an absolute path"}
		}
		if fi, err := os.Stat(s.Dir); err != nil || !fi.IsDir() {
			return &wire.ValidationError{Field: "cwd", Value: s.Dir, Rule: "must be a directory on the supervisor's host"}
		}
	}
	for _, e := range s.Env {
		if err := ValidateEnv(e); err != nil {
			return err
		}
	}
	switch s.Runtime {
	case "", RuntimePTY, RuntimeHeadless:
	default:
		return &wire.ValidationError{Field: "runtime", Value: string(s.Runtime), Rule: fmt.Sprintf("must be %q or %q", RuntimePTY, RuntimeHeadless)}
	}
	return nil
}

// ValidateEnv checks one entry of a spawn's environment: KEY=VALUE, the key not empty, and no
// NUL, which no process environment can hold.
func ValidateEnv(entry string) error {
	if k, _, ok := strings.Cut(entry, "="); !ok || k == "" || strings.ContainsRune(entry, 0) {
		return &wire.ValidationError{Field: "env", Value: entry, Rule: "must be KEY=VALUE, with a key and no NUL"}
	}
	return nil
}

// Launch is an issued agent: its principal, its creds (or, for a managed agent of a user-auth
// mesh, Bearer instead), and how to retire its lifecycle.
type Launch struct {
	Principal wire.Principal
	UID       wire.LifecycleUID
	Creds     []byte
	Bearer    *BearerLaunch
	Retire    func(context.Context) error
}

// Issuer issues and provisions an agent's credential for a spec.
type Issuer func(ctx context.Context, spec Spec) (*Launch, error)

// Config configures a Supervisor.
type Config struct {
	Issue Issuer
	Space wire.Space
	// URL is the broker URL written into launch material.
	URL string
	// MaterialDir holds each agent's launch material, in a private directory of its own.
	MaterialDir string
	// MCPCommand runs `cotal mcp`; the launch material's MCP configuration appends
	// --creds <path> to it.
	MCPCommand []string
	// MaxRestarts crashes within RestartWindow are restarted; the next one escalates.
	MaxRestarts   int
	RestartWindow time.Duration
	// Backoff is the first restart's delay; it doubles per restart up to 30 s.
	Backoff time.Duration
	// StopGrace is how long Stop waits after SIGTERM before it kills.
	StopGrace time.Duration
	// AwaitWake, when set, waits a while (seconds) for what should wake the idle agent principal,
	// as the agent's own `cotal mcp` judges, and returns the line to type into its terminal; ""
	// when nothing came. The supervisor asks it over and over for a PTY agent of a harness that
	// has no other way in while idle (Codex), and types what it returns.
	AwaitWake func(ctx context.Context, principal wire.Principal) (string, error)
	// TellSeat, when set, tells the agent principal's own `cotal mcp` of a hook event (HookTurn
	// with a PendingTurn, HookConclaves with a SeatConclaves), as soon as a workflow run opens
	// it, so its harness's push wakes it (a hook hands it in, a channel wakes the session, a
	// terminal is typed into). An agent with no such server finds its turns by asking
	// (turn-pending), and its conclaves in each turn's payload.
	TellSeat func(ctx context.Context, principal wire.Principal, event string, payload []byte) error
	// LogDir, when set, keeps each terminal agent's output in <LogDir>/<name>.log as it is read,
	// rotated at AgentLogMax, so what an agent said outlives its manager.
	LogDir string
	Log    *slog.Logger
}

// The restart policy's defaults: three restarts within a minute, then escalation.
const (
	DefaultMaxRestarts   = 3
	DefaultRestartWindow = 60 * time.Second
	DefaultBackoff       = 500 * time.Millisecond
	DefaultStopGrace     = 5 * time.Second
	maxBackoff           = 30 * time.Second
)

// State is a spawned agent's process state.
type State string

// The process states. Exited, escalated, stopped and failed are final: the lifecycle is retired.
const (
	StateRunning    State = "running"
	StateRestarting State = "restarting"
	StateExited     State = "exited"
	StateEscalated  State = "escalated"
	StateStopped    State = "stopped"
	StateFailed     State = "failed"
)

// Status is a spawned agent as the supervisor sees it.
type Status struct {
	Name      string `json:"name"`
	Principal string `json:"principal"`
	// LifecycleUID is the agent's lifecycle: one per spawn, kept across restarts.
	LifecycleUID wire.LifecycleUID `json:"lifecycleUid"`
	Role         string            `json:"role,omitempty"`
	// Agent is the harness preset, or empty for a plain command.
	Agent Harness `json:"agent,omitempty"`
	Dir   string  `json:"cwd,omitempty"`
	// Runtime is how the agent's process runs.
	Runtime Runtime `json:"runtime"`
	// SpawnedBy is the lifecycle of the agent that spawned this one; empty for the operator's.
	SpawnedBy string `json:"spawnedBy,omitempty"`
	// Started is when the agent was spawned.
	Started  time.Time `json:"started"`
	State    State     `json:"state"`
	PID      int       `json:"pid,omitempty"`
	Restarts int       `json:"restarts"`
	ExitCode int       `json:"exitCode"`
	Since    time.Time `json:"since"`
	Error    string    `json:"error,omitempty"`
}

// Supervisor runs spawned agents. It is safe for concurrent use; Close ends it.
type Supervisor struct {
	cfg Config
	// closing is cancelled when Close begins: it cuts short the spawns under way.
	closing  context.Context
	closeNow context.CancelFunc

	mu sync.Mutex
	// mu guards agents, reserved and closed. A name is in reserved while a Spawn issues and
	// starts it, and in agents once it has run: Spawn checks both and reserves the name under mu
	// before it issues anything, so two spawns of one name never both issue.
	agents   map[string]*agent
	reserved map[string]bool
	closed   bool

	// spawns counts Spawns past their reservation, wg the supervise goroutines. spawns is added
	// to only under mu while !closed, wg only by a Spawn that spawns counts, so each Add happens
	// before the Wait of Close that must see it.
	spawns sync.WaitGroup
	wg     sync.WaitGroup
}

type agent struct {
	spec     Spec
	launch   *Launch
	material string
	// argv and env start the process: the spec's command, or its harness preset's.
	argv, env []string
	stop      chan struct{}
	stopOnce  sync.Once
	done      chan struct{}
	// term is the agent's terminal, or nil when it runs headless.
	term *Terminal

	mu     sync.Mutex
	status Status
	proc   *os.Process
}

// New returns a supervisor for cfg, filling in the restart policy's defaults.
func New(cfg Config) (*Supervisor, error) {
	if cfg.Issue == nil || cfg.MaterialDir == "" || cfg.URL == "" {
		return nil, errors.New("manager: a supervisor needs an issuer, a material directory and a URL")
	}
	if cfg.MaxRestarts == 0 {
		cfg.MaxRestarts = DefaultMaxRestarts
	}
	if cfg.RestartWindow == 0 {
		cfg.RestartWindow = DefaultRestartWindow
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := atomicfile.MkdirPrivate(cfg.MaterialDir); err != nil {
		return nil, err
	}
	closing, closeNow := context.WithCancel(context.Background())
	return &Supervisor{cfg: cfg, closing: closing, closeNow: closeNow, agents: map[string]*agent{}, reserved: map[string]bool{}}, nil
}

// Material is the launch material file a spawned process finds at $COTAL_LAUNCH_MATERIAL.
type Material struct {
	V         int    `json:"v"`
	Space     string `json:"space"`
	URL       string `json:"url"`
	Principal string `json:"principal"`
	// Creds is the path of the agent's creds file; empty for a managed agent of a user-auth mesh,
	// which connects as Bearer says.
	Creds  string          `json:"creds,omitempty"`
	Bearer *BearerMaterial `json:"bearer,omitempty"`
	// MCPServers is an MCP client configuration that runs `cotal mcp` on those creds.
	MCPServers map[string]MCPServer `json:"mcpServers,omitempty"`
}

// ReadMaterial reads and checks the launch material at path (a spawned process finds the path in
// $COTAL_LAUNCH_MATERIAL): it must name the mesh's URL, the creds file and the space.
func ReadMaterial(path string) (*Material, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the launch material: %w", err)
	}
	var m Material
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("launch material %s: %w", path, err)
	}
	if m.URL == "" || m.Space == "" || (m.Creds == "") == (m.Bearer == nil) {
		return nil, fmt.Errorf("launch material %s: it names no url or space, or not exactly one of creds and bearer", path)
	}
	return &m, nil
}

// MCPServer is one entry of an MCP client configuration.
type MCPServer struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// Spawn issues the agent's credential, writes its launch material and starts its process. The
// name is reserved before anything is issued: while another Spawn of it is under way, or its
// agent has not finished, Spawn returns an error wrapping ErrAlreadyExists; a finished agent is
// replaced. A failed issue or start retires what was issued and releases the name. Spawn returns
// ErrClosed once Close has begun, and Close cuts short a Spawn under way.
func (s *Supervisor) Spawn(ctx context.Context, spec Spec) (Status, error) {
	if err := spec.validate(); err != nil {
		return Status{}, err
	}
	if err := s.reserve(spec.Name); err != nil {
		return Status{}, err
	}
	defer s.spawns.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.closing, cancel)()
	a, err := s.launch(ctx, spec)
	metrics.ManagerSpawns.WithLabelValues(metrics.Result(err)).Inc()
	s.mu.Lock()
	delete(s.reserved, spec.Name)
	wakes := err == nil && a.term != nil && spec.Agent == HarnessCodex && s.cfg.AwaitWake != nil
	if err == nil {
		s.agents[spec.Name] = a
		s.wg.Add(1) // Close waits for this Spawn before it waits for wg
		if wakes {
			s.wg.Add(1)
		}
	}
	s.mu.Unlock()
	if err != nil {
		return Status{}, err
	}
	go func() { // owned: Close waits for it
		defer s.wg.Done()
		s.supervise(a)
	}()
	if wakes {
		go func() { // owned: Close waits for it
			defer s.wg.Done()
			s.wake(a)
		}()
	}
	return a.snapshot(), nil
}

// typeGap is how long the supervisor waits between typing a wake line into a terminal and the
// Enter that sends it: a harness takes keys that come at once for a paste, in which Enter is a
// new line rather than a send.
const typeGap = 300 * time.Millisecond

// wake types into the agent's terminal, for as long as the agent lives, what AwaitWake says
// should wake it, so an idle harness starts a turn (its prompt hook then hands the messages in).
func (s *Supervisor) wake(a *agent) {
	ctx, cancel := context.WithCancel(s.closing)
	defer cancel()
	go func() {
		select {
		case <-a.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		line, err := s.cfg.AwaitWake(ctx, a.launch.Principal)
		if line != "" && err == nil {
			if _, err = a.term.Write([]byte(line)); err == nil {
				err = sleep(ctx, typeGap)
				_, _ = a.term.Write([]byte("\r")) // between runs there is nothing to send it to
			}
		}
		if err != nil && sleep(ctx, time.Second) != nil { // its cotal mcp is not up yet, or went away
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reserve claims name for one Spawn, and counts that Spawn for Close.
func (s *Supervisor) reserve(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch a, ok := s.agents[name]; {
	case s.closed:
		return fmt.Errorf("spawn %s: %w", name, ErrClosed)
	case s.reserved[name]:
		return fmt.Errorf("spawn %s: %w (it is being spawned)", name, ErrAlreadyExists)
	case ok && !a.final():
		return fmt.Errorf("spawn %s: %w (it is %s)", name, ErrAlreadyExists, a.snapshot().State)
	}
	s.reserved[name] = true
	s.spawns.Add(1)
	return nil
}

// launch issues the agent's credential, writes its launch material and starts its process. On
// failure it retires the credential and removes the material before it returns.
func (s *Supervisor) launch(ctx context.Context, spec Spec) (*agent, error) {
	launch, err := s.cfg.Issue(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("issue %s: %w", spec.Name, err)
	}
	a := &agent{spec: spec, launch: launch, stop: make(chan struct{}), done: make(chan struct{})}
	now := time.Now()
	a.status = Status{Name: spec.Name, Principal: launch.Principal.String(), LifecycleUID: launch.UID, Role: spec.Role,
		Agent: spec.Agent, Dir: spec.Dir, Runtime: spec.Runtime.orDefault(), SpawnedBy: spec.SpawnedBy, Started: now, Since: now}
	if a.status.Runtime == RuntimePTY {
		a.term = newTerminal(spec.Name)
		if s.cfg.LogDir != "" {
			if err := os.MkdirAll(s.cfg.LogDir, 0o700); err != nil {
				return nil, err
			}
			a.term.log = &agentLog{path: filepath.Join(s.cfg.LogDir, spec.Name+".log")}
		}
	}
	var m Material
	if a.material, m, err = s.writeMaterial(spec, launch); err == nil {
		a.argv, a.env = spec.Command, spec.Env
		if spec.Agent != "" {
			var env []string
			a.argv, env, err = spec.Agent.command(m, filepath.Dir(a.material), spec)
			a.env = append(env, spec.Env...) // the spawn's own environment wins over the preset's
		}
	}
	if err == nil {
		err = s.start(a)
	}
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return nil, errors.Join(err, launch.Retire(rctx), s.removeMaterial(a))
	}
	return a, nil
}

// writeMaterial writes the agent's creds and launch material into a fresh private directory.
func (s *Supervisor) writeMaterial(spec Spec, launch *Launch) (string, Material, error) {
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix) // crypto/rand.Read never fails
	dir := filepath.Join(s.cfg.MaterialDir, spec.Name+"-"+hex.EncodeToString(suffix))
	if err := atomicfile.MkdirPrivate(dir); err != nil {
		return "", Material{}, err
	}
	path := filepath.Join(dir, "launch.json")
	m := Material{V: 1, Space: string(s.cfg.Space), URL: s.cfg.URL, Principal: launch.Principal.String()}
	var connect []string // how cotal mcp connects as the agent
	if launch.Bearer != nil {
		b, err := writeBearer(dir, launch.UID, launch.Bearer)
		if err != nil {
			return "", Material{}, err
		}
		m.Bearer, connect = b, []string{"--launch-material", path}
	} else {
		m.Creds = filepath.Join(dir, "agent.creds")
		if spec.CredsFile != "" {
			if err := atomicfile.MkdirPrivate(filepath.Dir(spec.CredsFile)); err != nil {
				return "", Material{}, err
			}
			m.Creds = spec.CredsFile
		}
		if err := atomicfile.Write(m.Creds, launch.Creds, 0o600); err != nil {
			return "", Material{}, err
		}
		connect = []string{"--creds", m.Creds}
	}
	if len(s.cfg.MCPCommand) > 0 {
		args := append(slices.Clone(s.cfg.MCPCommand[1:]), connect...)
		m.MCPServers = map[string]MCPServer{"cotal": {Command: s.cfg.MCPCommand[0], Args: args}}
	}
	raw, _ := json.MarshalIndent(m, "", "  ") // always encodes
	return path, m, atomicfile.Write(path, raw, 0o600)
}

func (s *Supervisor) removeMaterial(a *agent) error {
	if a.material == "" {
		return nil
	}
	var err error
	// The creds file outside the material is removed only while it still holds this agent's
	// creds: an agent launched again under the name may have written its own there already.
	if f := a.spec.CredsFile; f != "" && a.launch != nil {
		if raw, rerr := os.ReadFile(f); rerr == nil && bytes.Equal(raw, a.launch.Creds) {
			err = os.Remove(f)
		}
	}
	return errors.Join(err, os.RemoveAll(filepath.Dir(a.material)))
}

// start starts the agent's process: on a new pty of its terminal, or headless in a process group
// of its own. Either way Stop signals the process's whole group.
func (s *Supervisor) start(a *agent) error {
	cmd := exec.Command(a.argv[0], a.argv[1:]...)
	cmd.Env = append(append(os.Environ(), a.env...), LaunchMaterialEnv+"="+a.material)
	cmd.Dir = a.spec.Dir
	var err error
	if a.term != nil {
		err = a.term.start(cmd)
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		err = cmd.Start()
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", a.spec.Name, err)
	}
	a.mu.Lock()
	a.proc = cmd.Process
	a.status.State, a.status.PID, a.status.Since = StateRunning, cmd.Process.Pid, time.Now()
	a.mu.Unlock()
	return nil
}

// supervise waits for the agent's process, restarting a crashed one under the policy, and
// retires the lifecycle when the agent is done.
func (s *Supervisor) supervise(a *agent) {
	defer close(a.done)
	var crashes []time.Time
	backoff := s.cfg.Backoff
	for {
		state, code := s.wait(a)
		final := state
		if state == StateRestarting {
			now := time.Now()
			crashes = append(slices.DeleteFunc(crashes, func(t time.Time) bool { return now.Sub(t) > s.cfg.RestartWindow }), now)
			if len(crashes) > s.cfg.MaxRestarts {
				final = StateEscalated
			}
		}
		a.set(func(st *Status) { st.State, st.ExitCode, st.PID, st.Since = final, code, 0, time.Now() })
		if final != StateRestarting {
			break
		}
		s.cfg.Log.Warn("agent crashed; restarting", "agent", a.spec.Name, "exit", code, "in", backoff)
		select {
		case <-a.stop:
			a.set(func(st *Status) { st.State = StateStopped })
		case <-time.After(backoff):
		}
		if a.snapshot().State == StateStopped {
			break
		}
		backoff = min(2*backoff, maxBackoff)
		if err := s.start(a); err != nil {
			a.set(func(st *Status) { st.State, st.Error = StateFailed, err.Error() })
			break
		}
		metrics.ManagerRestarts.Inc()
		a.set(func(st *Status) { st.Restarts++ })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := errors.Join(a.launch.Retire(ctx), s.removeMaterial(a)); err != nil {
		s.cfg.Log.Error("retire a finished agent", "agent", a.spec.Name, "err", err)
		a.set(func(st *Status) { st.Error = err.Error() })
	}
}

// wait waits for the running process, and for its terminal's run to end, and classifies its end:
// stopped when Stop asked for it, exited on status 0, restarting otherwise.
func (s *Supervisor) wait(a *agent) (State, int) {
	a.mu.Lock()
	proc := a.proc
	a.mu.Unlock()
	ps, err := proc.Wait()
	if a.term != nil {
		a.term.finish()
	}
	code := -1
	if err == nil {
		code = ps.ExitCode()
	}
	select {
	case <-a.stop:
		return StateStopped, code
	default:
	}
	if code == 0 {
		return StateExited, code
	}
	return StateRestarting, code
}

// Stop stops an agent: SIGTERM to its process group, SIGKILL after the grace period, and waits
// until its lifecycle is retired.
func (s *Supervisor) Stop(ctx context.Context, name string) error {
	return s.StopAgent(ctx, name, true)
}

// StopAgent stops an agent as Stop does when graceful, and with SIGKILL at once otherwise.
func (s *Supervisor) StopAgent(ctx context.Context, name string, graceful bool) error {
	s.mu.Lock()
	a, ok := s.agents[name]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("stop %s: %w", name, ErrNotFound)
	}
	a.stopOnce.Do(func() { close(a.stop) })
	grace := time.NewTimer(s.cfg.StopGrace)
	if graceful {
		a.signal(syscall.SIGTERM)
	} else {
		grace.Reset(0)
	}
	defer grace.Stop()
	select {
	case <-a.done:
		return nil
	case <-grace.C:
		a.signal(syscall.SIGKILL)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// signal sends sig to the agent's process group, if a process runs.
func (a *agent) signal(sig syscall.Signal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.proc != nil && a.status.State == StateRunning {
		_ = syscall.Kill(-a.proc.Pid, sig) // it may have just exited
	}
}

// Wait blocks until the named agent is done (exited, escalated, stopped or failed).
func (s *Supervisor) Wait(ctx context.Context, name string) (Status, error) {
	s.mu.Lock()
	a, ok := s.agents[name]
	s.mu.Unlock()
	if !ok {
		return Status{}, fmt.Errorf("wait for %s: %w", name, ErrNotFound)
	}
	select {
	case <-a.done:
		return a.snapshot(), nil
	case <-ctx.Done():
		return a.snapshot(), ctx.Err()
	}
}

// Terminal returns the named agent's terminal. It returns an error wrapping ErrNotFound for an
// agent the supervisor does not know, and one wrapping ErrNoTerminal for an agent that runs
// headless.
func (s *Supervisor) Terminal(name string) (*Terminal, error) {
	s.mu.Lock()
	a, ok := s.agents[name]
	s.mu.Unlock()
	switch {
	case !ok:
		return nil, fmt.Errorf("terminal of %s: %w", name, ErrNotFound)
	case a.term == nil:
		return nil, fmt.Errorf("terminal of %s: %w", name, ErrNoTerminal)
	}
	return a.term, nil
}

// Lookup returns the named agent's status and whether the supervisor knows it.
func (s *Supervisor) Lookup(name string) (Status, bool) {
	s.mu.Lock()
	a, ok := s.agents[name]
	s.mu.Unlock()
	if !ok {
		return Status{}, false
	}
	return a.snapshot(), true
}

// lookupSpec returns the named agent's status and the spec it was spawned from.
func (s *Supervisor) lookupSpec(name string) (Status, Spec, bool) {
	s.mu.Lock()
	a, ok := s.agents[name]
	s.mu.Unlock()
	if !ok {
		return Status{}, Spec{}, false
	}
	return a.snapshot(), a.spec, true
}

// Done returns a channel closed when the named agent is done, or nil for an unknown agent.
func (s *Supervisor) Done(name string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.agents[name]; ok {
		return a.done
	}
	return nil
}

// List returns every agent the supervisor knows, by name.
func (s *Supervisor) List() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.agents))
	for _, a := range s.agents {
		out = append(out, a.snapshot())
	}
	slices.SortFunc(out, func(x, y Status) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// Close ends the supervisor in the reverse order of its work: it stops accepting spawns, cuts
// short and waits for the spawns under way, then stops every agent (SIGTERM, SIGKILL after the
// grace period) and waits until each lifecycle is retired. If ctx ends first, Close returns
// ctx.Err() and what it waits for goes on. Calling Close again waits again.
func (s *Supervisor) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.closeNow()
	if err := waitFor(ctx, &s.spawns); err != nil {
		return err
	}
	// No Spawn is under way and none can begin: every agent is in s.agents.
	s.mu.Lock()
	agents := slices.Collect(maps.Keys(s.agents))
	s.mu.Unlock()
	errs := make([]error, len(agents))
	var stops sync.WaitGroup
	for i, name := range agents {
		stops.Go(func() { errs[i] = s.Stop(ctx, name) }) // owned: waited just below
	}
	stops.Wait() // each Stop returns by ctx's end
	if err := waitFor(ctx, &s.wg); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// waitFor waits for wg, or returns ctx.Err() if ctx ends first.
func waitFor(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { // ends when wg does, even after waitFor has returned on ctx
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *agent) snapshot() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status
}

func (a *agent) set(edit func(*Status)) {
	a.mu.Lock()
	edit(&a.status)
	a.mu.Unlock()
}

func (a *agent) final() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}
