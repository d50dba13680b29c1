// Package deploy brings a manifest's team onto a running mesh: it checks the manifest against
// what this host can launch, seeds its channels in the space's registry and launches its agents
// through the space's manager (`cotal up -f`, `cotal spawn -f`), records what an additive deploy
// created in a ledger, and removes exactly that again (`cotal down -f`).
package deploy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/manifest"
	"github.com/gocotal/cotal/wire"
)

// Plan is a manifest read and resolved for a run: its launch spec, with the run id.
type Plan struct {
	Manifest *manifest.Manifest
	Spec     *manifest.LaunchSpec
}

// Load reads the manifest at path, resolves it for run id (a new one when empty) and checks that
// this host's manager can launch every agent (Preflight).
func Load(path, runID string) (*Plan, error) {
	m, err := manifest.Load(path)
	if err != nil {
		return nil, err
	}
	if runID == "" {
		runID = manifest.NewRunID()
	}
	spec, err := m.Launch(runID)
	if err != nil {
		return nil, err
	}
	p := &Plan{Manifest: m, Spec: spec}
	return p, p.Preflight()
}

// Preflight refuses, naming the agent, what the manager would refuse at launch: a harness it does
// not know or that is not installed here, and the launch fields it does not implement.
func (p *Plan) Preflight() error {
	var errs []error
	for _, a := range p.Spec.Agents {
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: agent %s: %s", p.Manifest.Path, a.Name, fmt.Sprintf(format, args...)))
		}
		h := manager.Harness(a.Agent)
		switch {
		case !slices.Contains(manager.Harnesses, h):
			fail("harness %q: must be one of %q", a.Agent, manager.Harnesses)
			continue
		case h != manager.HarnessCotal:
			if _, err := exec.LookPath(string(h)); err != nil {
				fail("harness %s is not installed on this host (%v)", h, err)
			}
		}
		switch {
		case a.Variant != "":
			fail("variant %q: the manager does not implement variants yet", a.Variant)
		case a.Prompt != "" && h == manager.HarnessCotal:
			fail("prompt: a kickoff message needs an LLM harness (claude, codex or opencode); cotal's own agent reads none")
		case a.Continuity == "exact":
			fail("continuity exact: the manager does not implement session continuity yet")
		}
		for k := range a.LaunchOptions {
			if k != "runtime" {
				fail("launchOptions.%s: the manager does not implement it", k)
			}
		}
	}
	return errors.Join(errs...)
}

// Print writes the plan a dry run shows: each channel's card and members, each agent's harness
// and grants.
func (p *Plan) Print(w io.Writer) {
	top := p.Manifest.Resolve()
	fmt.Fprintf(w, "space %s, run %s\n", p.Spec.Space, p.Spec.RunID)
	for _, c := range p.Manifest.Channels {
		g := top.Channels[c.Name]
		fmt.Fprintf(w, "  channel %s: read %s, post %s, subscribe %s\n", c.Name, list(g.Read), list(g.Post), list(g.Subscribe))
	}
	for _, a := range p.Spec.Agents {
		fmt.Fprintf(w, "  agent %s (%s): read %s, post %s, subscribe %s\n", a.Name, a.Agent, list(a.AllowSubscribe), list(a.AllowPublish), list(a.Subscribe))
	}
}

func list(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

// Card returns the registry card of manifest channel c, the manifest's defaults under its own
// fields.
func Card(m *manifest.Manifest, c *manifest.Channel) wire.ChannelConfig {
	cfg := wire.ChannelConfig{Description: c.Description, Instructions: c.Instructions, Replay: c.Replay,
		ReplayWindow: cmp.Or(c.ReplayWindow, m.Defaults.ReplayWindow), DeliveryClass: cmp.Or(c.DeliveryClass, m.Defaults.DeliveryClass)}
	if cfg.Replay == nil {
		cfg.Replay = m.Defaults.Replay
	}
	return cfg
}

// SeedChannels creates the registry card of each of the manifest's channels that the registry
// does not hold yet, and returns the channels it created and those that already existed (left
// untouched). A card is created only where none is: a concurrent writer's card is never replaced.
func SeedChannels(ctx context.Context, kv jetstream.KeyValue, m *manifest.Manifest) (created, existing []string, err error) {
	for _, c := range m.Channels {
		card := Card(m, c)
		if err := card.Validate(); err != nil {
			return created, existing, fmt.Errorf("%s: channel %s: %w", m.Path, c.Name, err)
		}
		raw, _ := json.Marshal(card) // a struct of strings and flags always encodes
		_, err := kv.Create(ctx, c.Name, raw)
		switch {
		case errors.Is(err, jetstream.ErrKeyExists):
			existing = append(existing, c.Name)
		case err != nil:
			return created, existing, fmt.Errorf("seed channel %s: %w", c.Name, err)
		default:
			created = append(created, c.Name)
		}
	}
	return created, existing, nil
}

// Launched is one agent's launch: its acceptance and goal, or the error that refused it.
type Launched struct {
	Name    string
	Spawned *manager.Spawned
	Err     error
}

// launchers bounds the launches in flight at once.
const launchers = 32

// Launch saves the plan's launch spec where the mesh's manager reads it (runs) and launches the
// named agents through ctl, several at once, each followed to its goal's end. Results are in the
// order of names.
func Launch(ctx context.Context, ctl *factory.Control, runs string, spec *manifest.LaunchSpec, names []string) ([]Launched, error) {
	if _, err := manifest.SaveLaunchSpec(runs, spec); err != nil {
		return nil, fmt.Errorf("save the launch spec of run %s: %w", spec.RunID, err)
	}
	out := make([]Launched, len(names))
	slots := make(chan struct{}, launchers)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			sp, err := ctl.Manager.Launch(ctx, "", manager.LaunchArgs{RunID: spec.RunID, Name: name})
			out[i] = Launched{Name: name, Spawned: sp, Err: err}
		})
	}
	wg.Wait()
	return out, nil
}

// Report writes one line per launch and returns an error naming the agents that did not come up.
func Report(w io.Writer, results []Launched) error {
	var failed []string
	for _, r := range results {
		switch {
		case r.Err != nil:
			fmt.Fprintf(w, "  agent %s: %v\n", r.Name, factory.Refusal(r.Err))
			failed = append(failed, r.Name)
		case r.Spawned.State == manager.GoalSucceeded:
			a := r.Spawned.Acceptance
			fmt.Fprintf(w, "  agent %s: online (%s.%s, lifecycle %s)\n", r.Name, a.Owner, a.Actor, a.UID)
		default:
			state := cmp.Or(r.Spawned.State, "still open")
			fmt.Fprintf(w, "  agent %s: spawn %s (pending: `cotal ps` shows it)\n", r.Name, state)
			if r.Spawned.State == manager.GoalFailed {
				failed = append(failed, r.Name)
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d agents did not launch: %s", len(failed), len(results), strings.Join(failed, ", "))
	}
	return nil
}
