package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/manager"
	"github.com/gocotal/cotal/internal/manifest"
	"github.com/gocotal/cotal/wire"
)

// The classifications of an additive deploy's items, as the reference names them.
const (
	Created         = "created"
	WillCreate      = "will-create"
	ExistsUnmanaged = "exists-unmanaged"
	AlreadyOwned    = "already-owned"
	Stale           = "stale"
)

// SpawnOptions are the inputs of `cotal spawn -f`.
type SpawnOptions struct {
	File       string
	DryRun     bool
	AllowStale []string
	// MeshURL, when set, deploys as the person logged in to the user-auth mesh whose exchange is
	// there, on the mesh's host: their agents, within their own grant.
	MeshURL string
}

// registry opens the space's channel registry as a credential of profile.
func registry(ctx context.Context, f *factory.Factory, sp wire.Space, profile authority.Profile) (jetstream.KeyValue, func(), error) {
	js, closeJS, err := f.JetStream(ctx, sp, profile, "cotal_deploy")
	if err != nil {
		return nil, nil, err
	}
	kv, err := js.KeyValue(ctx, string(sp.ChannelsBucket()))
	if err != nil {
		closeJS()
		return nil, nil, fmt.Errorf("open the channel registry: %w", err)
	}
	return kv, closeJS, nil
}

// Spawn deploys a manifest additively onto the running mesh f targets: it classifies each
// channel and agent against the live mesh and the run's ledger, creates what is new, leaves what
// exists and is not its own untouched, restarts a stale agent only when AllowStale names it, and
// records what it created in the run's ledger (one run per manifest file and space). It prints
// the run id and one line per item to w. It acts as the operator, or with MeshURL as the person
// logged in there, whose agents the run's become.
func Spawn(ctx context.Context, f *factory.Factory, w io.Writer, o SpawnOptions) error {
	d, _, sp, err := f.Mesh("spawn -f deploys onto an authenticated mesh: an open one has no credentials to scope")
	if err != nil {
		return err
	}
	path, err := filepath.Abs(o.File)
	if err != nil {
		return err
	}
	ledgers := LedgerDir(d.Path)
	l, err := LedgerOf(ledgers, path, string(sp))
	if err != nil {
		return err
	}
	runID := ""
	if l != nil {
		runID = l.RunID
	}
	plan, err := Load(o.File, runID)
	if err != nil {
		return err
	}
	if plan.Spec.Space != string(sp) {
		return fmt.Errorf("%s deploys space %s; the mesh's space here is %s (--space names another)", o.File, plan.Spec.Space, sp)
	}
	for _, name := range o.AllowStale {
		if plan.Spec.Agent(name) == nil {
			return fmt.Errorf("--allow-stale %s: %s has no agent %s", name, o.File, name)
		}
	}
	var as *acting
	if o.MeshURL != "" {
		as, err = asPerson(ctx, f, o.MeshURL, d, sp)
	} else {
		as, err = asOperator(ctx, f, sp, true)
	}
	if err != nil {
		return err
	}
	defer as.Close()
	switch {
	case l == nil:
		l = &Ledger{APIVersion: LedgerAPIVersion, RunID: plan.Spec.RunID, Space: string(sp), Manifest: path, Channels: []string{}, Agents: []OwnedAgent{}}
	case l.Owner != as.owner:
		return fmt.Errorf("run %s of %s was deployed by %s; deploy it as them, or `cotal down -f` it first", l.RunID, o.File, ownerName(l.Owner))
	}
	l.Owner, plan.Spec.Owner = as.owner, as.owner
	fmt.Fprintf(w, "run %s (%s)\n", plan.Spec.RunID, filepath.Join(ledgers, plan.Spec.RunID+".json"))

	c, err := classify(ctx, w, as, plan, l, o.AllowStale)
	if err != nil {
		return err
	}
	if as.readers == nil {
		fmt.Fprintln(w, "  note: who else may read these channels is the operator's to see (`cotal spawn -f --dry-run` without --mesh)")
	} else if err := warnUnmanaged(ctx, as, w, plan.Manifest, as.ctl.Me.Principal.Owner()); err != nil {
		fmt.Fprintf(w, "  warning: the credentials could not be read (%v): an isolation conflict cannot be ruled out\n", err)
	}
	if o.DryRun {
		fmt.Fprintln(w, "dry run: nothing changed")
		return nil
	}
	if len(c.newChannels) > 0 {
		kv, closeKV, err := as.writer(ctx)
		if err != nil {
			return fmt.Errorf("%w; nothing was changed", err)
		}
		created, existing, err := seed(ctx, kv, plan.Manifest, c.newChannels)
		closeKV()
		for _, c := range created {
			l.Channels = append(l.Channels, c)
			fmt.Fprintf(w, "  channel %s: %s\n", c, Created)
		}
		for _, c := range existing {
			fmt.Fprintf(w, "  channel %s: %s (created meanwhile by someone else)\n", c, ExistsUnmanaged)
		}
		if err != nil {
			return errors.Join(err, l.Save(ledgers))
		}
	}
	for _, name := range c.restart {
		if err := as.despawn(ctx, name); err != nil {
			return errors.Join(fmt.Errorf("restart %s: %w", name, err), l.Save(ledgers))
		}
	}
	results, err := Launch(ctx, as.ctl, manifest.RunDir(d.Path), plan.Spec, append(c.launch, c.restart...))
	if err != nil {
		return errors.Join(err, l.Save(ledgers))
	}
	for _, r := range results {
		if r.Err == nil {
			a := r.Spawned.Acceptance
			l.Own(OwnedAgent{Name: r.Name, ID: a.Owner + "." + a.Actor, LifecycleUID: a.UID, Hash: plan.Spec.Agent(r.Name).Hash})
		}
	}
	if err := l.Save(ledgers); err != nil {
		return err
	}
	errs := []error{Report(w, results)}
	if len(c.stale) > 0 {
		errs = append(errs, fmt.Errorf("stale agents left as they run: %s (--allow-stale restarts them)", strings.Join(c.stale, ", ")))
	}
	if len(c.foreign) > 0 {
		errs = append(errs, fmt.Errorf("agents not launched, their names taken by agents this run does not own: %s", strings.Join(c.foreign, ", ")))
	}
	return errors.Join(errs...)
}

// ownerName names a run's owner in a message: a person's owner token, or the operator.
func ownerName(owner string) string {
	if owner == "" {
		return "the operator"
	}
	return owner
}

// classes are the items of an additive deploy by what it does with them.
type classes struct {
	newChannels []*manifest.Channel
	// launch are the agents to create, restart the stale ones --allow-stale names, stale the
	// others, foreign those whose names agents of another run or none hold.
	launch, restart, stale, foreign []string
}

// classify classifies each channel and agent of the plan against the registry, the managers and
// the run's ledger, and prints one line per item to w.
func classify(ctx context.Context, w io.Writer, as *acting, plan *Plan, l *Ledger, allowStale []string) (*classes, error) {
	c := &classes{}
	for _, ch := range plan.Manifest.Channels {
		_, err := as.registry.Get(ctx, ch.Name)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			c.newChannels = append(c.newChannels, ch)
		case err != nil:
			return nil, fmt.Errorf("read channel %s: %w", ch.Name, err)
		case slices.Contains(l.Channels, ch.Name):
			fmt.Fprintf(w, "  channel %s: %s\n", ch.Name, AlreadyOwned)
		default:
			fmt.Fprintf(w, "  channel %s: %s (its card is left as it is)\n", ch.Name, ExistsUnmanaged)
		}
	}
	for _, a := range plan.Spec.Agents {
		row, err := as.find(ctx, a.Name)
		if err != nil && !isNotFound(err) {
			return nil, fmt.Errorf("look %s up: %w", a.Name, err)
		}
		owned := l.Agent(a.Name)
		switch {
		case row == nil || !live(row):
			c.launch = append(c.launch, a.Name)
			fmt.Fprintf(w, "  agent %s: %s\n", a.Name, WillCreate)
		case owned == nil || owned.ID != row.ID || owned.LifecycleUID != row.LifecycleUID:
			c.foreign = append(c.foreign, a.Name)
			fmt.Fprintf(w, "  agent %s: %s (an agent of that name runs, not launched by this run)\n", a.Name, ExistsUnmanaged)
		case owned.Hash == a.Hash:
			fmt.Fprintf(w, "  agent %s: %s\n", a.Name, AlreadyOwned)
		case slices.Contains(allowStale, a.Name):
			c.restart = append(c.restart, a.Name)
			fmt.Fprintf(w, "  agent %s: %s (restarting: --allow-stale)\n", a.Name, Stale)
		default:
			c.stale = append(c.stale, a.Name)
			fmt.Fprintf(w, "  agent %s: %s (its launch fields changed; --allow-stale %s restarts it)\n", a.Name, Stale, a.Name)
		}
	}
	return c, nil
}

// live reports whether a manager's row is of an agent still running (or being restarted): a
// spawn may take the name of one that ended.
func live(row *manager.Row) bool {
	st := manager.State(row.Status)
	return st == manager.StateRunning || st == manager.StateRestarting
}

// seed creates the cards of the channels given, as SeedChannels does.
func seed(ctx context.Context, kv jetstream.KeyValue, m *manifest.Manifest, channels []*manifest.Channel) (created, existing []string, err error) {
	sub := *m
	sub.Channels = channels
	return SeedChannels(ctx, kv, &sub)
}

func isNotFound(err error) bool {
	e, ok := errors.AsType[*wire.EndpointError](err)
	return ok && (e.Code == wire.CodeNotFound || e.Code == wire.CodeFailedPrecondition)
}

// DownOptions are the inputs of `cotal down -f`.
type DownOptions struct {
	File  string
	RunID string
	// MeshURL, when set, removes a person's deploy as that person (SpawnOptions.MeshURL).
	MeshURL string
}

// Down removes what one additive deploy created, conservatively: an agent only when the one
// running under its name is the identity and lifecycle the ledger recorded, a channel only when
// no agent but the run's own may read it. Whatever it cannot prove its own stays, and so does
// the ledger, listing it, for a later `down -f --run`. A person (MeshURL) stops their agents
// through their manager-caller view and leaves the channels to the operator, who alone sees who
// else may read them.
func Down(ctx context.Context, f *factory.Factory, w io.Writer, o DownOptions) error {
	d, _, sp, err := f.Mesh("down -f removes a deploy from an authenticated mesh")
	if err != nil {
		return err
	}
	ledgers := LedgerDir(d.Path)
	var l *Ledger
	if o.RunID != "" {
		l, err = ReadLedger(ledgers, o.RunID)
	} else {
		var path string
		if path, err = filepath.Abs(o.File); err == nil {
			l, err = LedgerOf(ledgers, path, string(sp))
		}
		if err == nil && l == nil {
			err = fmt.Errorf("no deploy of %s into space %s is recorded in %s (--run names one)", o.File, sp, ledgers)
		}
	}
	if err != nil {
		return err
	}
	var as *acting
	if o.MeshURL != "" {
		as, err = asPersonCaller(ctx, f, o.MeshURL, sp)
	} else {
		as, err = asOperator(ctx, f, sp, false)
	}
	if err != nil {
		return fmt.Errorf("%w; nothing was removed, and the ledger of run %s is kept", err, l.RunID)
	}
	defer as.Close()
	if o.MeshURL != "" && l.Owner != as.owner {
		return fmt.Errorf("run %s was deployed by %s, not by you; nothing was removed", l.RunID, ownerName(l.Owner))
	}
	fmt.Fprintf(w, "run %s\n", l.RunID)
	ours := map[string]bool{}
	var kept []OwnedAgent
	for _, a := range l.Agents {
		ours[a.ID] = true
		row, err := as.find(ctx, a.Name)
		switch {
		case err != nil && isNotFound(err):
			fmt.Fprintf(w, "  agent %s: gone\n", a.Name)
		case err != nil:
			kept = append(kept, a)
			fmt.Fprintf(w, "  agent %s: kept (%v)\n", a.Name, err)
		case row.ID != a.ID || row.LifecycleUID != a.LifecycleUID:
			kept = append(kept, a)
			fmt.Fprintf(w, "  agent %s: kept (the one running is %s lifecycle %s, not this run's)\n", a.Name, row.ID, row.LifecycleUID)
		default:
			if err := as.despawn(ctx, a.Name); err != nil {
				kept = append(kept, a)
				fmt.Fprintf(w, "  agent %s: kept (stop: %v)\n", a.Name, err)
				continue
			}
			fmt.Fprintf(w, "  agent %s: stopped\n", a.Name)
		}
	}
	l.Agents = kept
	channels, err := removeChannels(ctx, as, w, l.Channels, ours)
	l.Channels = channels
	if err == nil && l.Empty() {
		return l.Remove(ledgers)
	}
	err = errors.Join(err, l.Save(ledgers))
	return errors.Join(err, fmt.Errorf("run %s keeps %d channels and %d agents it could not prove its own to remove; its ledger is kept for `cotal down -f --run %s`",
		l.RunID, len(l.Channels), len(l.Agents), l.RunID))
}

// readers returns, for each of channels, the principals that may read it: the holders of every
// active agent credential the ledger issued whose grant reads it (what the broker lets them
// subscribe to), leaving out the principals in skip.
func readers(ctx context.Context, f *factory.Factory, sp wire.Space, channels []string, skip map[string]bool) (map[string][]string, error) {
	out := map[string][]string{}
	if len(channels) == 0 {
		return out, nil
	}
	l, err := f.Ledger(ctx, sp)
	if err != nil {
		return nil, err
	}
	rows, err := l.Credentials(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the credentials: %w", err)
	}
	for _, r := range rows {
		if r.State != authstore.CredActive || r.Profile != authority.ProfileAgent || skip[r.Principal] {
			continue
		}
		g, err := cotal.ParseJWT(r.JWT)
		if err != nil {
			return nil, fmt.Errorf("the credential of %s: %w", r.Principal, err)
		}
		for _, ch := range channels {
			if g.CanRead(ch) && !slices.Contains(out[ch], r.Principal) {
				out[ch] = append(out[ch], r.Principal)
			}
		}
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out, nil
}

// removeChannels deletes the registry card of each channel no principal but the run's own agents
// may read, and returns the channels kept. An actor that cannot see who may read keeps them all.
func removeChannels(ctx context.Context, as *acting, w io.Writer, channels []string, ours map[string]bool) ([]string, error) {
	if len(channels) == 0 {
		return channels, nil
	}
	if as.readers == nil {
		for _, ch := range channels {
			fmt.Fprintf(w, "  channel %s: kept (who else may read it is the operator's to see: their `cotal down -f --run` removes it)\n", ch)
		}
		return channels, nil
	}
	others, err := as.readers(ctx, channels, ours)
	if err != nil {
		return channels, err
	}
	kv, closeKV, err := as.writer(ctx)
	if err != nil {
		return channels, err
	}
	defer closeKV()
	var kept []string
	for _, ch := range channels {
		if len(others[ch]) > 0 {
			kept = append(kept, ch)
			fmt.Fprintf(w, "  channel %s: kept (others may read it: %s)\n", ch, strings.Join(others[ch], ", "))
			continue
		}
		if err := kv.Delete(ctx, ch); err != nil {
			kept = append(kept, ch)
			fmt.Fprintf(w, "  channel %s: kept (%v)\n", ch, err)
			continue
		}
		fmt.Fprintf(w, "  channel %s: removed\n", ch)
	}
	return kept, nil
}

// warnUnmanaged warns on w of each declared channel that agents outside the manifest may read:
// an isolation conflict on a shared mesh. It is a lower bound of who may read, not a proof that
// nobody else can: the operator's own instruments read everything.
func warnUnmanaged(ctx context.Context, as *acting, w io.Writer, m *manifest.Manifest, owner string) error {
	channels := make([]string, len(m.Channels))
	for i, c := range m.Channels {
		channels[i] = c.Name
	}
	team := map[string]bool{}
	for _, a := range m.Agents {
		team[owner+"."+a.Name] = true
	}
	others, err := as.readers(ctx, channels, team)
	if err != nil {
		return err
	}
	for _, ch := range channels {
		if len(others[ch]) > 0 {
			fmt.Fprintf(w, "  warning: channel %s may be read by agents outside this manifest: %s\n", ch, strings.Join(others[ch], ", "))
		}
	}
	return nil
}
