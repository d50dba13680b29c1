package console

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/wire"
)

// tuiRun runs the interactive console until q.
func tuiRun(ctx context.Context, o *Options) error {
	_, st, sp, err := o.Mesh("")
	if err != nil {
		return err
	}
	arrivals := make(chan *cotal.Delivery, 1024)
	handler := cotal.WithHandler(func(_ context.Context, d *cotal.Delivery) error {
		select {
		case arrivals <- d:
		default: // the screen fell behind: the line is lost to it, not to the mesh
		}
		return nil
	})
	var c *cotal.Client
	if o.Creds == "" {
		c, err = o.WatchClient(ctx, sp, authority.ProfileObserver, "cotal_console", cotal.WithPresence(false), handler, cotal.WithJoin(">"))
	} else {
		var g *cotal.Grant
		if g, err = cotal.ReadCreds(o.Creds); err == nil {
			c, err = cotal.Connect(ctx, st.URL, cotal.WithCreds(o.Creds), cotal.WithPresence(false), handler, cotal.WithJoin(g.AllowSubscribe...))
		}
	}
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	roster, err := c.Roster(ctx)
	if err != nil {
		return err
	}
	defer roster.Stop()
	actions := o.actions(c, roster, st.Open, sp)
	p := tea.NewProgram(NewModel(sp, actions, roster.Peers(), o.Now), tea.WithAltScreen(), tea.WithContext(ctx),
		tea.WithInput(o.IO.In), tea.WithOutput(o.IO.Out))
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case d := <-arrivals:
				p.Send(DeliveryMsg{D: d})
			case peer := <-roster.Changes():
				p.Send(PeerMsg{P: peer})
			}
		}
	}()
	if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) && ctx.Err() == nil {
		return err
	}
	return nil
}

// actions are the console's commands: sending as its credential when it is an agent's (--creds),
// the manager's commands as the operator's one-shot instrument when it runs on the mesh's own
// credentials, and attach as a child `cotal attach`.
func (o *Options) actions(c *cotal.Client, roster *cotal.Roster, open bool, sp wire.Space) Actions {
	a := Actions{Status: fmt.Sprintf("space %s as %s (read-only observer)", sp, c.Principal())}
	if o.Creds != "" {
		a.Status = fmt.Sprintf("space %s as %s (sends within its grant; no manager commands)", sp, c.Principal())
		a.Post = func(ctx context.Context, channel, text string) error {
			_, err := c.Post(ctx, channel, []wire.Part{wire.TextPart(text)})
			return err
		}
		a.DM = func(ctx context.Context, to, text string) error {
			p, err := roster.Resolve(to)
			if err != nil {
				return err
			}
			_, err = c.DirectMessage(ctx, p, []wire.Part{wire.TextPart(text)})
			return err
		}
		a.Ask = func(ctx context.Context, role, text string) error {
			_, err := c.Ask(ctx, role, []wire.Part{wire.TextPart(text)})
			return err
		}
		return a
	}
	if open {
		return a // an open mesh has no manager commands
	}
	a.Spawn = func(ctx context.Context, name string, command []string) (string, error) {
		ctl, err := o.Control(ctx)
		if err != nil {
			return "", err
		}
		defer ctl.Close()
		cwd, _ := os.Getwd()
		sp, err := ctl.Manager.SpawnOn(ctx, "", manager.SpawnArgs{Name: name, Cwd: cwd, LaunchOptions: &manager.LaunchOptions{Command: command}})
		if err != nil {
			return "", factory.Refusal(err)
		}
		return fmt.Sprintf("%s.%s spawned by manager %s: goal %s", sp.Acceptance.Owner, sp.Acceptance.Actor, sp.Acceptance.Executor.LifecycleUID, sp.State), nil
	}
	a.Stop = func(ctx context.Context, name string) (string, error) {
		ctl, err := o.Control(ctx)
		if err != nil {
			return "", err
		}
		defer ctl.Close()
		if _, err := ctl.Manager.Despawn(ctx, ctl.Records, name, true); err != nil {
			return "", factory.Refusal(err)
		}
		return "stopped " + name, nil
	}
	if exe, err := os.Executable(); err == nil {
		a.Attach = func(name string) *exec.Cmd {
			args := []string{"attach", name}
			if o.Target.Dir != "" {
				args = append(args, "--dir", o.Target.Dir)
			}
			return exec.Command(exe, args...)
		}
	}
	return a
}
