package up

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/broker"
	"github.com/gocotal/cotal/internal/cli/deploy"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/manifest"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/wire"
)

// managerWait bounds how long `up -f` waits for the new mesh's manager to answer.
const managerWait = 30 * time.Second

// fromManifest sets the options the manifest decides and the command line did not: the space,
// the broker's port and host, and an open mesh for broker.auth false.
func (o *Options) fromManifest(m *manifest.Manifest) error {
	given := func(flag string) bool {
		return slices.ContainsFunc(o.setFlags, func(f string) bool { return strings.HasPrefix(f, "--"+flag+"=") })
	}
	if !given("space") {
		o.Spaces = []string{string(m.Space)}
	}
	switch m.Broker.Auth {
	case "open":
		if !given("open") {
			o.Open = true
		}
	case "user":
		return fmt.Errorf("%s: broker.auth user: bring the mesh up with `cotal up --user-auth`, then deploy the team onto it with `cotal spawn -f`", m.Path)
	}
	if m.Broker.Host != "" && !given("host") {
		o.Host = m.Broker.Host
	}
	if m.Broker.Servers != "" && !given("port") {
		u, err := url.Parse(strings.TrimSpace(strings.Split(m.Broker.Servers, ",")[0]))
		if err != nil {
			return fmt.Errorf("%s: broker.servers: %w", m.Path, err)
		}
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil {
				return fmt.Errorf("%s: broker.servers port %q: %w", m.Path, p, err)
			}
			o.Port = n
		}
	}
	if o.NoManager {
		return &exit.UsageError{Err: errors.New("-f launches its agents through the mesh's manager: drop --no-manager")}
	}
	return nil
}

// childFlags are the flags a detached `up -f` starts the mesh with: those given, but the
// manifest's own, and the options the manifest decided.
func (o *Options) childFlags() []string {
	out := slices.DeleteFunc(slices.Clone(o.setFlags), func(f string) bool {
		return strings.HasPrefix(f, "--file=") || strings.HasPrefix(f, "--dry-run=") || strings.HasPrefix(f, "--space=") ||
			strings.HasPrefix(f, "--port=") || strings.HasPrefix(f, "--host=") || strings.HasPrefix(f, "--open=")
	})
	out = append(out, "--space="+strings.Join(o.Spaces, ","), "--port="+strconv.Itoa(o.Port), "--host="+o.Host)
	if o.Open {
		out = append(out, "--open=true")
	}
	return out
}

// upManifest runs `cotal up -f`: a fresh mesh with the manifest's channels seeded and its agents
// launched. It refuses when a mesh already runs in the directory or anything answers at the
// broker's address: it never seeds a live broker.
func upManifest(ctx context.Context, o *Options) error {
	plan, err := deploy.Load(o.File, "")
	if err != nil {
		return err
	}
	if err := o.fromManifest(plan.Manifest); err != nil {
		return err
	}
	if o.DryRun {
		fmt.Fprintf(o.IO.Out, "up -f %s (dry run: nothing changes)\n", o.File)
		plan.Print(o.IO.Out)
		return nil
	}
	if o.Open {
		return &exit.UsageError{Err: errors.New("an open mesh (broker.auth false, --open) has no credentials to scope: -f deploys onto an authenticated mesh")}
	}
	mo, d, err := o.prepare()
	if err != nil {
		return err
	}
	if st, err := d.ReadState(); err == nil {
		return fmt.Errorf("a mesh is already running at %s (pid %d): up -f brings up a fresh one; deploy onto it with `cotal spawn -f %s`, or `cotal down` first", st.URL, st.PID, o.File)
	}
	if o.Port != 0 {
		addr := net.JoinHostPort(cmpHost(o.Host), strconv.Itoa(o.Port))
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return fmt.Errorf("something already answers at %s: up -f never seeds a live broker; `cotal spawn -f %s` deploys onto a running mesh", addr, o.File)
		}
	}
	if o.Detach {
		o.setFlags = o.childFlags()
		if err := detach(ctx, o, d); err != nil {
			return err
		}
		return o.deployFresh(ctx, d, plan)
	}
	return o.serve(ctx, d, mo, func() error { return o.deployFresh(ctx, d, plan) })
}

// cmpHost is the address to look for a broker at: loopback for a wildcard bind.
func cmpHost(host string) string {
	if host == "" || host == "0.0.0.0" || host == "::" {
		return broker.DefaultHost
	}
	return host
}

// deployFresh seeds every channel of the plan (and the manifest's defaults) on the new mesh in d
// and launches every agent.
func (o *Options) deployFresh(ctx context.Context, d mesh.Dir, plan *deploy.Plan) error {
	f := o.factory
	f.Target.Dir, f.Target.Space = d.Path, plan.Spec.Space
	defer f.Close()
	sp := wire.Space(plan.Spec.Space)
	js, closeJS, err := f.JetStream(ctx, sp, authority.ProfileChannelWriter, "cotal_channels")
	if err != nil {
		return err
	}
	defer closeJS()
	kv, err := js.KeyValue(ctx, string(sp.ChannelsBucket()))
	if err != nil {
		return fmt.Errorf("open the channel registry: %w", err)
	}
	if err := seedDefaults(ctx, kv, plan.Manifest); err != nil {
		return err
	}
	created, _, err := deploy.SeedChannels(ctx, kv, plan.Manifest)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "run %s: %d channels seeded\n", plan.Spec.RunID, len(created))
	ctl, err := f.WatchControl(ctx)
	if err != nil {
		return err
	}
	defer ctl.Close()
	if err := awaitManager(ctx, ctl); err != nil {
		return err
	}
	names := make([]string, len(plan.Spec.Agents))
	for i, a := range plan.Spec.Agents {
		names[i] = a.Name
	}
	results, err := deploy.Launch(ctx, ctl, manifest.RunDir(d.Path), plan.Spec, names)
	if err != nil {
		return err
	}
	return deploy.Report(o.IO.Out, results)
}

// seedDefaults writes the manifest's channel defaults, when it has any, as the space's.
func seedDefaults(ctx context.Context, kv jetstream.KeyValue, m *manifest.Manifest) error {
	if m.Defaults == (manifest.Defaults{}) {
		return nil
	}
	def := wire.ChannelDefaults{Replay: m.Defaults.Replay, ReplayWindow: m.Defaults.ReplayWindow, DeliveryClass: m.Defaults.DeliveryClass}
	if err := def.Validate(); err != nil {
		return fmt.Errorf("%s: defaults: %w", m.Path, err)
	}
	raw, _ := json.Marshal(def) // a struct of strings and a flag always encodes
	if _, err := kv.Put(ctx, wire.ChannelDefaultsKey, raw); err != nil {
		return fmt.Errorf("write the channel defaults: %w", err)
	}
	return nil
}

// awaitManager waits until a manager of the space answers status.
func awaitManager(ctx context.Context, ctl *factory.Control) error {
	ctx, cancel := context.WithTimeout(ctx, managerWait)
	defer cancel()
	for {
		var st map[string]any
		err := ctl.Manager.Ask(ctx, manager.CommandStatus, nil, &st)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the mesh's manager did not answer within %s: %w", managerWait, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
