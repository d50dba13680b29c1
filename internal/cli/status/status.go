// Package status implements `cotal status`: is the mesh up, and what do its spaces hold.
package status

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/factory"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/ledger/authstore"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/space"
	"github.com/gocotal/cotal/wire"
)

// Options are the inputs of `cotal status`.
type Options struct {
	*factory.Factory
	JSON bool
	// Components reports each component's state rather than the spaces' contents.
	Components bool
}

// Report is what `cotal status --json` prints. The field names are a stable interface.
type Report struct {
	Running bool   `json:"running"`
	URL     string `json:"url,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Open    bool   `json:"open,omitempty"`
	// ExchangeURL is the auth service's public face, in user-auth mode: what `cotal login --mesh`
	// and `cotal supervise --mesh` take.
	ExchangeURL string `json:"exchangeUrl,omitempty"`
	// ExchangeURLs are every authority node's exchange, this node's first, and AuthServices each
	// one's auth service: its exchange and its callout, answering or not.
	ExchangeURLs []string            `json:"exchangeUrls,omitempty"`
	AuthServices []AuthServiceStatus `json:"authServices,omitempty"`
	// Cluster names the NATS cluster this node belongs to; Keyless marks a node started from a
	// bundle, which holds no keys and so reports no spaces.
	Cluster string `json:"cluster,omitempty"`
	Keyless bool   `json:"keyless,omitempty"`
	// NodeDown marks this authority node down: the report came through the cluster's other nodes
	// (URL lists them), and status exits non-zero.
	NodeDown bool `json:"nodeDown,omitempty"`
	// Nodes are the cluster's nodes that answered, with their routes (an authority node asks).
	Nodes []NodeStatus `json:"nodes,omitempty"`
	// Exposure is where the broker listens and whether it needs TLS; nil when no mesh runs.
	Exposure *mesh.Exposure `json:"exposure,omitempty"`
	Spaces   []SpaceStatus  `json:"spaces,omitempty"`
	// Registered names the registry's mesh reached by its server and a credential file; As is
	// the principal that credential connected as. Nothing else is read of such a mesh: the
	// streams and the ledger need the mesh's keys.
	Registered string `json:"registered,omitempty"`
	As         string `json:"as,omitempty"`
}

// SpaceStatus is one space of the report.
type SpaceStatus struct {
	Space       wire.Space     `json:"space"`
	Provisioned bool           `json:"provisioned"`
	Streams     []StreamStatus `json:"streams"`
	// Planes are the liveness verdicts of the space's daemons, by plane, as a peer probes them.
	Planes map[wire.Plane]wire.ResponderState `json:"planes,omitempty"`
	// Quarantined counts, by the guard's reason, the stored messages the warden deleted and told
	// their senders of, as far back as the DM stream keeps its notices.
	Quarantined map[string]int `json:"quarantined,omitempty"`
	// Daemons are the active credentials of the space's daemons (delivery, warden, supervisor),
	// each renewed before two thirds of its lifetime; one expiring soon means renewals fail.
	Daemons []DaemonCredential `json:"daemonCredentials,omitempty"`
}

// DaemonCredential is one daemon's credential in the report.
type DaemonCredential struct {
	Principal string    `json:"principal"`
	Profile   string    `json:"profile"`
	Expires   time.Time `json:"expires"`
}

// daemonCredentials lists the active, expiring credentials of the daemon profiles in sp's ledger.
func daemonCredentials(ctx context.Context, o *Options, sp wire.Space) ([]DaemonCredential, error) {
	l, err := o.Ledger(ctx, sp)
	if err != nil {
		return nil, err
	}
	rows, err := l.Credentials(ctx)
	if err != nil && !errors.Is(err, authstore.ErrCorrupt) { // corrupt rows are `cotal doctor auth`'s
		return nil, err
	}
	var out []DaemonCredential
	for _, r := range rows {
		if r.State == authstore.CredActive && r.ExpiresAt != 0 && r.Profile.Daemon() {
			out = append(out, DaemonCredential{Principal: r.Principal, Profile: string(r.Profile), Expires: r.ExpiresAt.Time().UTC()})
		}
	}
	slices.SortFunc(out, func(a, b DaemonCredential) int { return strings.Compare(a.Profile+a.Principal, b.Profile+b.Principal) })
	return out, nil
}

// StreamStatus is one stream or bucket: Missing when the space lacks it. On a cluster, Leader
// names the node leading it and Replicas its followers.
type StreamStatus struct {
	Name     string          `json:"name"`
	Messages uint64          `json:"messages"`
	Bytes    uint64          `json:"bytes"`
	Missing  bool            `json:"missing,omitempty"`
	Leader   string          `json:"leader,omitempty"`
	Replicas []ReplicaStatus `json:"replicas,omitempty"`
}

// ReplicaStatus is one follower of a replicated stream: whether it is caught up, and how many
// operations behind it is.
type ReplicaStatus struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
	Lag     uint64 `json:"lag"`
}

// NodeStatus is one node of the cluster as it answered: the nodes it routes to.
type NodeStatus struct {
	Name   string   `json:"name"`
	Routes []string `json:"routes"`
}

// ErrNotHealthy is returned when the mesh is down or a space is not fully provisioned, so the
// command exits non-zero for scripts.
var ErrNotHealthy = errors.New("mesh not healthy")

// NewCmdStatus returns the `cotal status` command. runF runs it; nil means statusRun.
func NewCmdStatus(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show whether the mesh is up and what its spaces hold",
		Long: "Show the running mesh, who can reach it (loopback only, or the network with or without\n" +
			"TLS), and each space's streams and buckets with their message counts.\n" +
			"Exits 0 when the broker answers and every space is provisioned, 1 otherwise.\n\n" +
			"With --components, check each part of the mesh instead: the broker, JetStream, each space's\n" +
			"delivery daemon and manager (by their liveness planes, as a peer probes them) and warden,\n" +
			"the auth service in user-auth mode, and the dashboard if `cotal web` runs. It exits 0 when\n" +
			"every component serves, 1 when one is degraded, 2 when the mesh is down and 3 when it cannot\n" +
			"tell, naming each component that does not serve.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			if o.Components {
				return components(cmd.Context(), o)
			}
			return statusRun(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Target.Dir, "dir", "", "the mesh directory (default: the nearest .cotal)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the status as JSON")
	cmd.Flags().BoolVar(&o.Components, "components", false, "check each component (broker, JetStream, daemons, auth, dashboard): exit 0 serving, 1 degraded, 2 down, 3 unknown")
	return cmd
}

func statusRun(ctx context.Context, o *Options) error {
	d, err := mesh.FindDir(o.Target.Dir, ".")
	if remote, ok := errors.AsType[*mesh.RemoteMeshError](err); ok {
		return remoteStatus(ctx, o, remote)
	}
	if err != nil {
		return err
	}
	rep := &Report{}
	st, err := d.ReadState()
	if errors.Is(err, mesh.ErrNotRunning) {
		st, err = d.ThroughPeers()
	}
	switch {
	case errors.Is(err, mesh.ErrNotRunning):
	case err != nil:
		return err
	default:
		rep.Running, rep.URL, rep.PID, rep.Open, rep.ExchangeURL = true, st.URL, st.PID, st.Open, st.ExchangeURL
		rep.Cluster, rep.Keyless, rep.NodeDown = st.Cluster, st.Keyless, st.NodeDown
		if !st.NodeDown {
			e := st.Exposure()
			rep.Exposure = &e
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if !st.Keyless {
			if err := inspect(ctx, o, st, rep); err != nil {
				return err
			}
		}
		if st.Cluster != "" && !st.Keyless {
			if rep.Nodes, err = nodes(ctx, d, st.URL); err != nil {
				return err
			}
		}
		if st.ExchangeURL != "" && !st.Keyless && len(st.Spaces) == 1 {
			if rep.AuthServices, err = authServices(ctx, o, st.Spaces[0]); err != nil {
				return err
			}
			rep.ExchangeURLs = exchangeURLs(st.ExchangeURL, rep.AuthServices)
		}
	}
	if err := render(o, rep); err != nil {
		return err
	}
	if !rep.Running {
		return fmt.Errorf("%w: no mesh is running", ErrNotHealthy)
	}
	if rep.NodeDown {
		return fmt.Errorf("%w: this node is down (start it with its cluster flags); the cluster answered through the others", ErrNotHealthy)
	}
	for _, s := range rep.Spaces {
		if !s.Provisioned {
			return fmt.Errorf("%w: space %s is not fully provisioned (run `cotal up` again)", ErrNotHealthy, s.Space)
		}
	}
	for _, a := range rep.AuthServices {
		if !a.healthy() {
			return fmt.Errorf("%w: the auth service on node %s is not answering (exchange %s, callout %s)", ErrNotHealthy, a.Node, a.Exchange, a.Callout)
		}
	}
	return nil
}

// remoteStatus reports a mesh the registry reaches by its server and a credential file: it is up
// when the credential connects. The rest of the report needs the mesh's keys.
func remoteStatus(ctx context.Context, o *Options, remote *mesh.RemoteMeshError) error {
	e := remote.Entry
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rep := &Report{Registered: remote.Name, URL: e.Server}
	c, err := cotal.Connect(ctx, e.Server, cotal.WithCreds(e.Creds), cotal.WithSpace(e.Space), cotal.WithPresence(false), cotal.WithConnectAttempts(1))
	if err == nil {
		rep.Running, rep.As = true, c.Principal().String()
		_ = c.Close(context.WithoutCancel(ctx))
	}
	if rerr := render(o, rep); rerr != nil {
		return rerr
	}
	if err != nil {
		return fmt.Errorf("%w: mesh %s at %s: %v", ErrNotHealthy, remote.Name, e.Server, err)
	}
	return nil
}

// inspect reads each space's streams on a short-lived credential.
func inspect(ctx context.Context, o *Options, st *mesh.State, rep *Report) error {
	for _, sp := range st.Spaces {
		// Only the provisioner holds STREAM.INFO on every stream of a space.
		js, closeFn, err := o.JetStream(ctx, sp, authority.ProfileProvisioner, "cotal_status")
		if err != nil {
			return err
		}
		ss := SpaceStatus{Space: sp, Provisioned: true}
		for _, name := range space.Streams(sp) {
			s, err := js.Stream(ctx, name)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				ss.Provisioned = false
				ss.Streams = append(ss.Streams, StreamStatus{Name: name, Missing: true})
				continue
			}
			if err != nil {
				closeFn()
				return fmt.Errorf("inspect %s: %w", name, err)
			}
			info := s.CachedInfo()
			row := StreamStatus{Name: name, Messages: info.State.Msgs, Bytes: info.State.Bytes}
			if c := info.Cluster; c != nil && len(c.Replicas) > 0 {
				row.Leader = c.Leader
				for _, r := range c.Replicas {
					row.Replicas = append(row.Replicas, ReplicaStatus{Name: r.Name, Current: r.Current, Lag: r.Lag})
				}
			}
			ss.Streams = append(ss.Streams, row)
		}
		closeFn()
		if ss.Provisioned && !st.Open {
			if ss.Quarantined, err = quarantined(ctx, o, sp); err != nil {
				return err
			}
		}
		if !st.Open {
			if ss.Planes, err = probePlanes(ctx, o, sp); err != nil {
				return err
			}
			if ss.Daemons, err = daemonCredentials(ctx, o, sp); err != nil {
				return err
			}
		}
		rep.Spaces = append(rep.Spaces, ss)
	}
	return nil
}

// nodesWait is how long status waits for the first node's answer; it waits half of it
// after each.
const nodesWait = 2 * time.Second

// nodes asks every node of the cluster, on a system-account credential minted for the request, for
// its routes, and returns those that answered.
func nodes(ctx context.Context, d mesh.Dir, url string) ([]NodeStatus, error) {
	kr, err := d.OpenKeyring()
	if err != nil {
		return nil, err
	}
	replies, err := dial.Servers(ctx, kr, url, jsapi.ServerStatsPing, nodesWait, nodesWait/2)
	if err != nil {
		return nil, err
	}
	var out []NodeStatus
	for _, raw := range replies {
		var stats struct {
			Server struct {
				Name string `json:"name"`
			} `json:"server"`
			Statsz struct {
				Routes []struct {
					Name string `json:"name"`
				} `json:"routes"`
			} `json:"statsz"`
		}
		if json.Unmarshal(raw, &stats) != nil || stats.Server.Name == "" {
			continue
		}
		n := NodeStatus{Name: stats.Server.Name, Routes: []string{}}
		for _, r := range stats.Statsz.Routes {
			if r.Name != "" && !slices.Contains(n.Routes, r.Name) {
				n.Routes = append(n.Routes, r.Name)
			}
		}
		slices.Sort(n.Routes)
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b NodeStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// probePlanes probes each liveness plane as a peer would, on a one-shot agent credential (the
// profile that holds the probe rows).
func probePlanes(ctx context.Context, o *Options, sp wire.Space) (map[wire.Plane]wire.ResponderState, error) {
	c, err := o.Client(ctx, sp, authority.ProfileAgent, "cotal_status", cotal.WithPresence(false))
	if err != nil {
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	out := map[wire.Plane]wire.ResponderState{}
	for _, plane := range wire.Planes {
		res, err := c.Probe(ctx, plane)
		if err != nil {
			return nil, err
		}
		out[plane] = res.Verdict
	}
	return out, nil
}

func render(o *Options, rep *Report) error {
	if o.JSON {
		return json.NewEncoder(o.IO.Out).Encode(rep)
	}
	switch {
	case rep.Registered != "" && rep.Running:
		fmt.Fprintf(o.IO.Out, "mesh %s up at %s (reached as %s through its registered credential)\n", rep.Registered, rep.URL, rep.As)
		return nil
	case rep.Registered != "":
		fmt.Fprintf(o.IO.Out, "mesh %s at %s does not answer its registered credential\n", rep.Registered, rep.URL)
		return nil
	case !rep.Running:
		fmt.Fprintln(o.IO.Out, "no mesh is running (`cotal up` starts one)")
		return nil
	}
	mode := "authenticated"
	if rep.Open {
		mode = "open"
	}
	if rep.NodeDown {
		fmt.Fprintf(o.IO.Out, "this node is down; its cluster answers at %s (%s)\n", rep.URL, mode)
	} else {
		fmt.Fprintf(o.IO.Out, "mesh up at %s (%s, pid %d)\n", rep.URL, mode, rep.PID)
	}
	switch {
	case rep.Keyless:
		fmt.Fprintf(o.IO.Out, "cluster: %s (a node without keys: `cotal status` on an authority node reports the spaces)\n", rep.Cluster)
	case rep.Cluster != "":
		fmt.Fprintf(o.IO.Out, "cluster: %s (an authority node)\n", rep.Cluster)
		for _, n := range rep.Nodes {
			fmt.Fprintf(o.IO.Out, "  node %s: routes to %s\n", n.Name, cmp.Or(strings.Join(n.Routes, ", "), "none"))
		}
	}
	if rep.Exposure != nil {
		fmt.Fprintf(o.IO.Out, "exposure: %s\n", rep.Exposure)
	}
	if rep.ExchangeURL != "" {
		fmt.Fprintf(o.IO.Out, "user-auth exchange: %s\n", rep.ExchangeURL)
		renderAuthServices(o.IO.Out, rep.AuthServices)
	}
	for _, s := range rep.Spaces {
		fmt.Fprintf(o.IO.Out, "\nspace %s\n", s.Space)
		tw := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  STREAM\tMESSAGES\tBYTES\tLEADER\tREPLICAS")
		for _, st := range s.Streams {
			if st.Missing {
				fmt.Fprintf(tw, "  %s\tmissing\t\t\t\n", st.Name)
				continue
			}
			var reps []string
			for _, r := range st.Replicas {
				state := "current"
				if !r.Current {
					state = fmt.Sprintf("lag %d", r.Lag)
				}
				reps = append(reps, r.Name+" "+state)
			}
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\n", st.Name, st.Messages, st.Bytes, cmp.Or(st.Leader, "-"), cmp.Or(strings.Join(reps, ", "), "-"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, plane := range wire.Planes {
			if v, ok := s.Planes[plane]; ok {
				fmt.Fprintf(o.IO.Out, "  %s plane: %s\n", plane, v)
			}
		}
		if len(s.Quarantined) > 0 {
			var causes []string
			for _, reason := range slices.Sorted(maps.Keys(s.Quarantined)) {
				causes = append(causes, fmt.Sprintf("%s %d", reason, s.Quarantined[reason]))
			}
			fmt.Fprintf(o.IO.Out, "  quarantined: %s\n", strings.Join(causes, ", "))
		}
		for _, d := range s.Daemons {
			fmt.Fprintf(o.IO.Out, "  %s credential of %s expires %s (in %s)\n", d.Profile, d.Principal, d.Expires.Format(time.RFC3339), d.Expires.Sub(o.Now()).Round(time.Second))
		}
	}
	return nil
}

// maxNotices bounds the warden's notices status reads.
const maxNotices = 10000

// quarantined counts the warden's quarantine notices in space sp's DM stream by reason, read as
// an admin observer, the profile that may read direct messages.
func quarantined(ctx context.Context, o *Options, sp wire.Space) (map[string]int, error) {
	js, closeFn, err := o.JetStream(ctx, sp, authority.ProfileAdmin, "cotal_status")
	if err != nil {
		return nil, err
	}
	defer closeFn()
	filter := meshwire.DMSendGrant(sp, meshwire.WardenPrincipal())
	s, err := js.Stream(ctx, sp.DMStream())
	if err != nil {
		return nil, fmt.Errorf("count quarantines: %w", err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("count quarantines: %w", err)
	}
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	if n == 0 {
		return nil, nil
	}
	cons, err := js.OrderedConsumer(ctx, sp.DMStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return nil, fmt.Errorf("count quarantines: %w", err)
	}
	batch, err := cons.Fetch(min(n, maxNotices), jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		return nil, fmt.Errorf("count quarantines: %w", err)
	}
	out := map[string]int{}
	for msg := range batch.Messages() {
		dl, err := wire.Guard(msg.Subject(), msg.Data())
		if err != nil {
			continue
		}
		if q, ok := meshwire.ParseQuarantineNotice(dl.Sender, dl.Message); ok {
			out[q.Reason]++
		}
	}
	return out, batch.Error()
}
