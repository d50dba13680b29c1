package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/wire"
)

// presenceDial is how many agents connect at once. A variable only so that the race detector's
// bounded form of TestRosterHoldsThousands can dial fewer at a time.
var presenceDial = 128

// Presence case shape.
const (
	// presenceHandshake bounds each agent's connection handshake, on both sides: a mass join on
	// a loaded machine (or under the race detector) outlasts nats.go's 2 s default.
	presenceHandshake = 10 * time.Second
	// presenceIssuers is how many credentials are issued at once.
	presenceIssuers = 4
	// presencePoll is how often the roster is counted.
	presencePoll = 10 * time.Millisecond
	// targetConverge is the longest a 5,000-agent roster may take to converge (issue 8).
	targetConverge = 5 * time.Second
	// cpuSamples is how many broker CPU readings the heartbeat figure averages, one a second.
	cpuSamples = 5
)

// openFilesFor refuses a presence case of n agents that this process cannot hold open: a socket
// per agent and, with the broker embedded, the broker's end of each too, with room for the rest.
// Failing there would cost the agents already connected and end on a bare "too many open files".
func openFilesFor(n int, embedded bool) error {
	need := uint64(n) + 1024
	if embedded {
		need += uint64(n)
	}
	if limit, ok := openFileLimit(); ok && limit < need {
		how := "raise it (ulimit -n)"
		if embedded {
			how += ", or bench a mesh of its own with --server, which holds the broker's ends"
		}
		return fmt.Errorf("%d agents need about %d open files in this process, over its limit of %d: %s", n, need, limit, how)
	}
	return nil
}

// presenceCase measures n agents joining: how long until an observer's roster shows every one
// online, how long a fresh roster takes to load them, and the broker's CPU under their
// heartbeats.
func presenceCase(n int) func(context.Context, *runner) ([]Result, error) {
	return func(ctx context.Context, r *runner) ([]Result, error) {
		if err := openFilesFor(n, r.env.Embedded); err != nil {
			return nil, err
		}
		f := r.fleet()
		defer f.close()
		prefix := r.name("p%d_", n)
		creds, err := issueMany(ctx, r.env, n, prefix)
		if err != nil {
			return nil, err
		}
		obsCred, err := f.issue(ctx, authority.ProfileObserver, f.name("roster"))
		if err != nil {
			return nil, err
		}
		obs, err := f.client(ctx, obsCred, cotal.WithPresence(false))
		if err != nil {
			return nil, err
		}
		// Cotal: every agent connects through the SDK, which writes its presence and heartbeats.
		af := r.fleet()
		defer af.close()
		connected, converged, err := join(ctx, obs, prefix, creds, func(ctx context.Context, cred *authority.Credential) error {
			_, err := af.client(ctx, cred, cotal.WithNATSOptions(nats.Timeout(presenceHandshake)))
			return err
		})
		if err != nil {
			return nil, err
		}

		start := time.Now()
		fresh, err := obs.Roster(ctx)
		if err != nil {
			return nil, err
		}
		loaded := time.Since(start)
		fresh.Stop()

		cpu, err := heartbeatCPU(ctx, r.env)
		if err != nil {
			return nil, err
		}
		af.close() // the agents write their offline rows

		// Raw: the same credentials connect as plain nats.go and each writes its presence row and
		// rewrites it every heartbeat interval, as the SDK does. (A row written once goes stale
		// after the liveness window: with 5,000 agents the first rows went stale before the last
		// were written, and the roster never showed them all online.)
		rf := r.fleet()
		defer rf.close()
		beat, stopBeats := context.WithCancel(context.WithoutCancel(ctx))
		rf.onClose(stopBeats)
		rawConnected, rawConverged, err := join(ctx, obs, prefix, creds, func(ctx context.Context, cred *authority.Credential) error {
			_, js, err := rf.conn(ctx, cred, nats.Timeout(presenceHandshake))
			if err != nil {
				return err
			}
			if err := writePresence(ctx, js, r.env.Space, cred); err != nil {
				return err
			}
			go heartbeat(beat, js, r.env.Space, cred)
			return nil
		})
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("presence/%d", n)
		conv := Result{
			Name: name + "/converge", Unit: "s", Cotal: converged.Seconds(), Raw: rawConverged.Seconds(), Ratio: converged.Seconds() / rawConverged.Seconds(),
			Note: fmt.Sprintf("%d agents connecting %d at a time, from the first connect until an observer's roster shows all online (all connected after %.2f s; raw %.2f s); a fresh roster loads them in %.3f s; raw: nats.go connections under the same credentials, each writing one presence row",
				n, presenceDial, connected.Seconds(), rawConnected.Seconds(), loaded.Seconds()),
		}
		if n >= 5000 {
			conv.Target = fmt.Sprintf("< %s", targetConverge)
			conv.Met = met(converged < targetConverge)
		}
		where := "an external broker"
		if r.env.Embedded {
			where = "the embedded broker's process, which also runs these agents"
		}
		cpuRes := Result{
			Name: name + "/cpu", Unit: "% core", Cotal: cpu,
			Note: fmt.Sprintf("CPU of %s under %d heartbeats every %s, averaged over %d s", where, n, wire.HeartbeatInterval, cpuSamples),
		}
		return []Result{conv, cpuRes}, nil
	}
}

// join starts a roster on obs, connects every credential through connect, presenceDial at a
// time, and returns how long until all were connected and until the roster showed them all
// online.
func join(ctx context.Context, obs *cotal.Client, prefix string, creds []*authority.Credential, connect func(context.Context, *authority.Credential) error) (connected, converged time.Duration, err error) {
	roster, err := obs.Roster(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer roster.Stop()
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(presenceDial)
	for _, cred := range creds {
		g.Go(func() error { return connect(gctx, cred) })
	}
	if err := g.Wait(); err != nil {
		return 0, 0, err
	}
	connected = time.Since(start)
	if err := waitOnline(ctx, roster, prefix, len(creds)); err != nil {
		return 0, 0, err
	}
	return connected, time.Since(start), nil
}

// writePresence writes the idle presence row a fresh client writes, as raw nats.go.
func writePresence(ctx context.Context, js jetstream.JetStream, sp wire.Space, cred *authority.Credential) error {
	now := wire.MillisOf(time.Now())
	p := wire.Presence{
		Card: wire.AgentCard{
			ID: cred.Principal.String(), Owner: cred.Principal.Owner(), Actor: cred.Principal.Actor(),
			Name: cred.Principal.Actor(), Kind: wire.KindAgent, ProtocolVersion: wire.ProtocolVersion,
		},
		Status: wire.StatusIdle, TS: now, StatusSince: now, Attention: wire.AttentionOpen, LifecycleUID: cred.LifecycleUID,
	}
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = js.Publish(ctx, sp.PresenceBucket().Subject(wire.PresenceKey(cred.Principal)), body)
	return err
}

// heartbeat rewrites cred's presence row every heartbeat interval until ctx ends, as the SDK's
// heartbeat does; a failed write is the next one's to make good.
func heartbeat(ctx context.Context, js jetstream.JetStream, sp wire.Space, cred *authority.Credential) {
	t := time.NewTicker(wire.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = writePresence(ctx, js, sp, cred)
		}
	}
}

// issueMany issues n agent credentials named prefix0, prefix1, ... on the held ledger.
// They are presence-only agents: no durables are provisioned, and they expire with the bench.
func issueMany(ctx context.Context, env *Env, n int, prefix string) ([]*authority.Credential, error) {
	creds := make([]*authority.Credential, n)
	g, gctx := errgroup.WithContext(ctx)
	for w := range presenceIssuers {
		g.Go(func() error {
			for i := w; i < n; i += presenceIssuers {
				var err error
				if creds[i], err = env.Ledger.Issue(gctx, ledger.Request{Name: fmt.Sprintf("%s%d", prefix, i), Expires: benchLifetime}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return creds, g.Wait()
}

// convergeTimeout bounds how long a roster may take to show every agent of a round online.
const convergeTimeout = 30 * time.Second

// waitOnline returns once the roster shows n online peers whose actor starts with prefix.
func waitOnline(ctx context.Context, r *cotal.Roster, prefix string, n int) error {
	t := time.NewTicker(presencePoll)
	defer t.Stop()
	deadline := time.Now().Add(convergeTimeout)
	for {
		online, rows := 0, 0
		for _, p := range r.Peers() {
			if p.Presence != nil && strings.HasPrefix(p.Presence.Card.Actor, prefix) {
				rows++
				if p.Online {
					online++
				}
			}
		}
		if online == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the roster shows %d of %d agents online after %s (%d rows of theirs in all)", online, n, convergeTimeout, rows)
		}
		select {
		case <-r.Done():
			return fmt.Errorf("%w with %d of %d agents online", cotal.ErrRosterEnded, online, n)
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// heartbeatCPU averages the broker CPU (summed over a cluster's servers) over cpuSamples
// seconds.
func heartbeatCPU(ctx context.Context, env *Env) (float64, error) {
	var sum float64
	for range cpuSamples {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
		cpu, err := BrokerCPU(ctx, env.Keyring, env.URL)
		if err != nil {
			return 0, err
		}
		for _, c := range cpu {
			sum += c
		}
	}
	return sum / cpuSamples, nil
}
