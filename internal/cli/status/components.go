package status

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/cli/exit"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/wire"
)

// Component is one line of `cotal status --components`; the field names are a stable interface.
type Component struct {
	Name string `json:"name"`
	// Space is set for a component a space has of its own (delivery, manager, warden).
	Space  wire.Space `json:"space,omitempty"`
	State  string     `json:"state"`
	Detail string     `json:"detail,omitempty"`
}

// The states of a component.
const (
	// Serving: it answers.
	Serving = "serving"
	// Degraded: it should run and does not answer, or answers that it does not serve.
	Degraded = "degraded"
	// Down: the mesh itself does not answer.
	Down = "down"
	// Unknown: whether it serves could not be told.
	Unknown = "unknown"
)

// The exit codes of `cotal status --components`.
const (
	componentsOK       = 0
	componentsDegraded = 1
	componentsDown     = 2
	componentsUnknown  = 3
)

// ComponentsReport is what `cotal status --components --json` prints.
type ComponentsReport struct {
	Components []Component `json:"components"`
	// Exit is the exit code: 0 every component serves, 1 one is degraded, 2 the mesh is down,
	// 3 whether one serves cannot be told.
	Exit int `json:"exit"`
}

// componentWait bounds each check.
const componentWait = 5 * time.Second

// components checks each component of the mesh: the broker, JetStream, each space's delivery
// and manager by their liveness planes and its warden by the mesh process, the auth service in
// user-auth mode, and the dashboard if one runs.
func components(ctx context.Context, o *Options) error {
	rep := &ComponentsReport{}
	add := func(c Component) { rep.Components = append(rep.Components, c) }
	d, st, err := mesh.Running(o.Target.Dir) // a mesh the registry reaches by its server has no Dir
	switch {
	case errors.Is(err, mesh.ErrNoMesh):
		add(Component{Name: "broker", State: Down, Detail: "no mesh is running (`cotal up` starts one)"})
	case err != nil:
		return err
	default:
		checkMesh(ctx, o, d, st, add)
	}
	rep.Exit = exitOf(rep.Components)
	if err := renderComponents(o, rep); err != nil {
		return err
	}
	if rep.Exit == componentsOK {
		return nil
	}
	var bad []string
	for _, c := range rep.Components {
		if c.State != Serving {
			bad = append(bad, strings.TrimSpace(c.Name+" "+string(c.Space))+" "+c.State)
		}
	}
	return &exit.CodeError{Code: rep.Exit, Err: fmt.Errorf("%w: %s", ErrNotHealthy, strings.Join(bad, ", "))}
}

func checkMesh(ctx context.Context, o *Options, d mesh.Dir, st *mesh.State, add func(Component)) {
	if err := brokerAnswers(ctx, st.URL); err != nil {
		add(Component{Name: "broker", State: Down, Detail: err.Error()})
		return
	}
	add(Component{Name: "broker", State: Serving, Detail: st.URL})
	if st.Keyless {
		add(Component{Name: "jetstream", State: Unknown, Detail: "a node without keys: ask an authority node"})
		return
	}
	var parts []mesh.PartState
	if d.Path != "" && !st.Open {
		pctx, cancel := context.WithTimeout(ctx, componentWait)
		var err error
		parts, err = mesh.RunningParts(pctx, d)
		cancel()
		if err != nil {
			add(Component{Name: "warden", State: Unknown, Detail: err.Error()})
		}
	}
	for i, sp := range st.Spaces {
		// A client per space: a credential acts in one.
		cctx, cancel := context.WithTimeout(ctx, componentWait)
		c, err := o.Client(cctx, sp, authority.ProfileAgent, "cotal_status", cotal.WithPresence(false), cotal.WithConnectAttempts(1))
		cancel()
		if err != nil {
			add(Component{Name: "jetstream", Space: sp, State: Unknown, Detail: "connect to ask: " + err.Error()})
			continue
		}
		if i == 0 {
			add(jetStream(ctx, c))
		}
		if !st.Open {
			for _, plane := range wire.Planes {
				add(probed(ctx, c, sp, plane, parts))
			}
		}
		_ = c.Close(context.WithoutCancel(ctx))
	}
	for _, p := range parts {
		if p.Name != "warden" {
			continue
		}
		state := Serving
		if p.State != mesh.PartServing {
			state = Degraded
		}
		add(Component{Name: "warden", Space: p.Space, State: state, Detail: p.State})
	}
	if st.ExchangeURL != "" {
		add(exchange(ctx, st.ExchangeURL))
	}
	if d.Path != "" {
		if ws, err := d.ReadWebState(); err == nil {
			add(dashboard(ctx, ws))
		}
	}
}

// brokerAnswers connects to the broker at u and reads the INFO a NATS server sends first.
func brokerAnswers(ctx context.Context, u string) error {
	first := strings.Split(u, ",")[0]
	pu, err := url.Parse(first)
	if err != nil || pu.Host == "" {
		return fmt.Errorf("the mesh's URL %q: %v", u, err)
	}
	ctx, cancel := context.WithTimeout(ctx, componentWait)
	defer cancel()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", pu.Host)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(componentWait))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "INFO ") {
		return fmt.Errorf("%s does not answer as a NATS server (%v)", pu.Host, err)
	}
	return nil
}

// jetStream asks the broker's JetStream for the account's information.
func jetStream(ctx context.Context, c *cotal.Client) Component {
	js, err := jetstream.New(c.Conn())
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, componentWait)
		defer cancel()
		_, err = js.AccountInfo(ctx)
	}
	if err != nil {
		return Component{Name: "jetstream", State: Degraded, Detail: err.Error()}
	}
	return Component{Name: "jetstream", State: Serving}
}

// probed grades a plane by a peer's liveness probe, with what the mesh process says of its own
// part, when it runs one, as the detail.
func probed(ctx context.Context, c *cotal.Client, sp wire.Space, plane wire.Plane, parts []mesh.PartState) Component {
	comp := Component{Name: string(plane), Space: sp}
	for _, p := range parts {
		if p.Name == string(plane) && p.Space == sp {
			comp.Detail = "this mesh process: " + p.State
		}
	}
	ctx, cancel := context.WithTimeout(ctx, componentWait)
	defer cancel()
	res, err := c.Probe(ctx, plane)
	if err != nil {
		comp.State, comp.Detail = Unknown, err.Error()
		return comp
	}
	switch res.Verdict {
	case wire.ResponderBound:
		comp.State = Serving
	case wire.ResponderUnbound, wire.ResponderStale:
		comp.State = Degraded
		comp.Detail = strings.TrimPrefix(comp.Detail+"; ", "; ") + "probe: " + string(res.Verdict)
	default:
		comp.State = Unknown
		comp.Detail = strings.TrimPrefix(comp.Detail+"; ", "; ") + "probe: " + string(res.Outcome)
	}
	return comp
}

// exchange asks the user-auth exchange for its mesh document.
func exchange(ctx context.Context, base string) Component {
	return answersHTTP(ctx, "auth", strings.TrimSuffix(base, "/")+userauth.PathMesh, userauth.NewHTTPClient())
}

// dashboard asks the dashboard for its page.
func dashboard(ctx context.Context, ws *mesh.WebState) Component {
	c := answersHTTP(ctx, "web", ws.URL, http.DefaultClient)
	if c.State == Serving {
		c.Detail = fmt.Sprintf("%s (pid %d)", ws.URL, ws.PID)
	}
	return c
}

// answersHTTP reports the component name serving when a GET of u gets an answer under 500.
func answersHTTP(ctx context.Context, name, u string, hc *http.Client) Component {
	ctx, cancel := context.WithTimeout(ctx, componentWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Component{Name: name, State: Unknown, Detail: err.Error()}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Component{Name: name, State: Degraded, Detail: err.Error()}
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return Component{Name: name, State: Degraded, Detail: resp.Status}
	}
	return Component{Name: name, State: Serving, Detail: u}
}

// exitOf is the exit code of a report: down, else degraded, else unknown, else 0.
func exitOf(cs []Component) int {
	worst := componentsOK
	for _, c := range cs {
		switch {
		case c.State == Down:
			return componentsDown
		case c.State == Degraded:
			worst = componentsDegraded
		case c.State == Unknown && worst == componentsOK:
			worst = componentsUnknown
		}
	}
	return worst
}

func renderComponents(o *Options, rep *ComponentsReport) error {
	if o.JSON {
		return json.NewEncoder(o.IO.Out).Encode(rep)
	}
	tw := tabwriter.NewWriter(o.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tSPACE\tSTATE\tDETAIL")
	for _, c := range rep.Components {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, string(c.Space), c.State, c.Detail)
	}
	return tw.Flush()
}
