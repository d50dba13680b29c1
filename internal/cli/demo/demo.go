// Package demo implements `cotal demo`: an embedded mesh in a temporary directory, three scripted
// agents, and multicast, direct message and anycast shown end to end.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/cli/console"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// stepTimeout bounds each step of the script.
const stepTimeout = 30 * time.Second

// NewCmdDemo returns the `cotal demo` command.
func NewCmdDemo(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "See Cotal work: a throwaway mesh, three agents, multicast, DM and anycast",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return demoRun(cmd.Context(), f.IO.Out) },
	}
}

// agent is one scripted participant and what it surfaced.
type agent struct {
	name   string
	client *cotal.Client
	got    chan *cotal.Delivery
}

func demoRun(ctx context.Context, out io.Writer) error {
	tmp, err := os.MkdirTemp("", "cotal-demo-")
	if err != nil {
		return fmt.Errorf("create the demo directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	d := mesh.Dir{Path: filepath.Join(tmp, mesh.DirName)}
	fmt.Fprintf(out, "1. starting an embedded, authenticated mesh in %s\n", tmp)
	m, err := mesh.Up(ctx, d, mesh.Options{Port: -1})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stepTimeout)
		defer cancel()
		_ = m.Shutdown(sctx) // the demo's outcome is already decided
	}()
	fmt.Fprintf(out, "   broker at %s, space %s\n", m.URL(), mesh.DefaultSpace)

	general := []string{"general"}
	alice, err := start(ctx, m, ledger.Request{Name: "alice", AllowPublish: general, Subscribe: general})
	if err != nil {
		return err
	}
	bob, err := start(ctx, m, ledger.Request{Name: "bob", Subscribe: general})
	if err != nil {
		return err
	}
	carol, err := start(ctx, m, ledger.Request{Name: "carol", Role: "reviewer"})
	if err != nil {
		return err
	}
	for _, a := range []*agent{alice, bob, carol} {
		defer a.client.Close(context.WithoutCancel(ctx))
	}
	fmt.Fprintln(out, "2. alice, bob and carol (role reviewer) joined, each on its own least-privilege credential")

	roster, err := alice.client.Roster(ctx)
	if err != nil {
		return err
	}
	defer roster.Stop()
	for _, p := range roster.Peers() {
		fmt.Fprintf(out, "   present: %s (%s)\n", p.Key, p.Presence.Status)
	}

	fmt.Fprintln(out, "3. multicast: alice posts to #general")
	if _, err := alice.client.Post(ctx, "general", text("hello, everyone")); err != nil {
		return err
	}
	if err := expect(ctx, out, bob, wire.DeliveryChannel); err != nil {
		return err
	}

	fmt.Fprintln(out, "4. direct message: alice writes to bob, who answers")
	if _, err := alice.client.DirectMessage(ctx, bob.client.Principal(), text("can you look at the build?")); err != nil {
		return err
	}
	if err := expect(ctx, out, bob, wire.DeliveryDM); err != nil {
		return err
	}
	if _, err := bob.client.DirectMessage(ctx, alice.client.Principal(), text("on it")); err != nil {
		return err
	}
	if err := expect(ctx, out, alice, wire.DeliveryDM); err != nil {
		return err
	}

	fmt.Fprintln(out, "5. anycast: alice hands a review to any reviewer")
	if _, err := alice.client.Ask(ctx, "reviewer", text("please review PR 42")); err != nil {
		return err
	}
	if err := expect(ctx, out, carol, wire.DeliveryAnycast); err != nil {
		return err
	}
	fmt.Fprintln(out, "6. done: every message was guarded, acknowledged after it surfaced, and allowed by the broker")
	return nil
}

func text(s string) []wire.Part { return []wire.Part{wire.TextPart(s)} }

// start mints, provisions and connects one agent.
func start(ctx context.Context, m *mesh.Mesh, req ledger.Request) (*agent, error) {
	l := m.Ledger(mesh.DefaultSpace)
	cred, err := l.Issue(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := l.ProvisionAgent(ctx, cred, req); err != nil {
		return nil, err
	}
	a := &agent{name: req.Name, got: make(chan *cotal.Delivery, 16)}
	a.client, err = cotal.Connect(ctx, m.URL(), cotal.WithCredsData(cred.Creds), cotal.WithJoin(req.Subscribe...),
		cotal.WithHandler(func(_ context.Context, d *cotal.Delivery) error {
			a.got <- d
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return a, nil
}

// expect waits for a delivery of kind to a, passing over others (an agent hears its own posts),
// and prints it.
func expect(ctx context.Context, out io.Writer, a *agent, kind wire.DeliveryKind) error {
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	for {
		select {
		case d := <-a.got:
			if d.Kind != kind {
				continue
			}
			fmt.Fprintf(out, "   %s received: ", a.name)
			console.Line(out, time.Now(), d)
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%s received no %s in time", a.name, kind)
		}
	}
}
