package lang

import (
	"context"
	"fmt"
	"strings"
)

// The dry run: a plan of a program before anything touches an agent, from one simulated run.

// Plan is a dry run's report.
type Plan struct {
	// Effects are the journal's steps, in the order they began, with how each settled.
	Effects []PlanEffect `json:"effects"`
	// Agents are the agents the run would spawn, in order.
	Agents []PlanAgent `json:"agents"`
	// Checkpoints are the times a person would be asked, in order.
	Checkpoints []PlanCheckpoint `json:"checkpoints"`
	// ElapsedMs is the simulated time the run takes.
	ElapsedMs int64 `json:"elapsedMs"`
	// Steps are the walk's steps.
	Steps int `json:"steps"`
	// UnusedScript are the script's entries no effect asked for.
	UnusedScript []string `json:"unusedScript"`
	// Error is the failure that ended the simulated run, when one did.
	Error *RunError `json:"error,omitempty"`
}

// PlanEffect is one step of a plan.
type PlanEffect struct {
	Step   string `json:"step"`
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Status string `json:"status"`
}

// PlanAgent is one agent a plan spawns.
type PlanAgent struct {
	Persona  string   `json:"persona"`
	Worktree string   `json:"worktree,omitempty"`
	Role     string   `json:"role,omitempty"`
	Joins    []string `json:"joins"`
}

// PlanCheckpoint is one question a plan puts to a person.
type PlanCheckpoint struct {
	Step     string `json:"step"`
	Name     string `json:"name"`
	Prompt   string `json:"prompt"`
	Timeout  string `json:"timeout,omitempty"`
	OnExpiry string `json:"onExpiry,omitempty"`
	To       string `json:"to,omitempty"`
}

// recording wraps a handler and notes the spawns and checkpoints it is asked for.
type recording struct {
	*Sim
	agents      []PlanAgent
	checkpoints []PlanCheckpoint
}

// Perform implements Handler, noting what the run asks for.
func (r *recording) Perform(ctx context.Context, req *Request) (*Outcome, error) {
	r.note(req)
	return r.Sim.Perform(ctx, req)
}

// answer is the simulator's, noting what the run asks for.
func (r *recording) answer(req *Request) (int64, func() (*Outcome, error)) {
	r.note(req)
	return r.Sim.answer(req)
}

// note records a spawn or a checkpoint.
func (r *recording) note(req *Request) {
	switch req.Kind {
	case "spawn":
		a := PlanAgent{Joins: []string{}}
		a.Persona, _ = arg(req.Args, 0).(string)
		if p, ok := arg(req.Args, 0).(*Record); ok {
			a.Persona, _ = optionOf(p, "persona").(string)
		}
		a.Worktree, _ = req.Option("worktree").(string)
		a.Role, _ = req.Option("role").(string)
		if j, ok := req.Option("join").(*Array); ok {
			for _, c := range j.Elems {
				if n, err := channelName("spawn", c); err == nil {
					a.Joins = append(a.Joins, n)
				}
			}
		}
		r.agents = append(r.agents, a)
	case "checkpoint":
		c := PlanCheckpoint{Step: req.Key, Name: req.Name}
		c.Prompt, _ = arg(req.Args, 1).(string)
		c.Timeout, _ = req.Option("timeout").(string)
		c.OnExpiry, _ = req.Option("onExpiry").(string)
		c.To, _ = req.Option("to").(string)
		r.checkpoints = append(r.checkpoints, c)
	}
}

// DryRun plans source: it runs it once under the simulator with script and reports the steps,
// the agents, the checkpoints and the simulated time. A refused program is a *RefusedError.
func DryRun(ctx context.Context, source string, script Script, o RunOptions) (*Plan, error) {
	sim, err := NewSim(script)
	if err != nil {
		return nil, err
	}
	rec := &recording{Sim: sim}
	if o.RunID == "" {
		o.RunID = "dry-run"
	}
	o.Handler = rec
	start := sim.Now()
	res, err := Run(ctx, source, o)
	if err != nil {
		return nil, err
	}
	p := &Plan{Agents: rec.agents, Checkpoints: rec.checkpoints, ElapsedMs: sim.Now() - start, Steps: res.Steps,
		UnusedScript: sim.Unused(), Effects: []PlanEffect{}}
	if p.Agents == nil {
		p.Agents = []PlanAgent{}
	}
	if p.Checkpoints == nil {
		p.Checkpoints = []PlanCheckpoint{}
	}
	if p.UnusedScript == nil {
		p.UnusedScript = []string{}
	}
	for _, e := range res.Entries {
		status := e.Status
		if status == "" {
			status = e.State
		}
		p.Effects = append(p.Effects, PlanEffect{Step: e.Key(), Kind: e.Kind, Name: e.Name, Status: status})
	}
	if res.Err != nil {
		p.Error = RunErrorOf(res.Err)
	}
	return p, nil
}

// Render writes a plan for a person to read.
func (p *Plan) Render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Dry run: %d effects, %d agents, %s of simulated time.\n", len(p.Effects), len(p.Agents), humanMs(p.ElapsedMs))
	if len(p.Checkpoints) == 0 {
		b.WriteString("No checkpoints: this run never stops for a person.\n")
	} else {
		fmt.Fprintf(&b, "A person is asked %d time(s):\n", len(p.Checkpoints))
		for _, c := range p.Checkpoints {
			wait := "waits indefinitely"
			if c.Timeout != "" {
				wait = "waits " + c.Timeout
				if c.OnExpiry != "" {
					wait += ", then " + c.OnExpiry
				}
			}
			fmt.Fprintf(&b, "  %s %q (%s)\n", c.Name, c.Prompt, wait)
		}
	}
	b.WriteString("Agents:\n")
	for _, a := range p.Agents {
		fmt.Fprintf(&b, "  %s", a.Persona)
		if a.Role != "" {
			fmt.Fprintf(&b, " role %s", a.Role)
		}
		if a.Worktree != "" {
			fmt.Fprintf(&b, " worktree %s", a.Worktree)
		}
		if len(a.Joins) > 0 {
			fmt.Fprintf(&b, " joins %s", strings.Join(a.Joins, ", "))
		}
		b.WriteString("\n")
	}
	b.WriteString("Effects, in order:\n")
	for _, e := range p.Effects {
		if e.Status == StatusOK {
			fmt.Fprintf(&b, "   %s\n", e.Step)
		} else {
			fmt.Fprintf(&b, " ! %s %s\n", e.Step, e.Status)
		}
	}
	if len(p.UnusedScript) > 0 {
		fmt.Fprintf(&b, "Script entries never reached: %s\n", strings.Join(p.UnusedScript, ", "))
	}
	if p.Error != nil {
		fmt.Fprintf(&b, "The run fails: %s %s\n", p.Error.Code, p.Error.Message)
	}
	return b.String()
}

// humanMs spells a simulated duration: ms under a second, s under a minute, m under an hour,
// hours with one decimal above.
func humanMs(ms int64) string {
	switch {
	case ms < 1000:
		return fmt.Sprintf("%dms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%ds", ms/1000)
	case ms < 3_600_000:
		return fmt.Sprintf("%dm", ms/60_000)
	}
	return fmt.Sprintf("%.1fh", float64(ms)/3_600_000)
}
