package console

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/termsafe"
	"github.com/gocotal/cotal/internal/who"
	"github.com/gocotal/cotal/wire"
)

// The interactive console: what `cotal console` shows on a terminal. Tabs for every message, each
// channel and the direct messages; the roster with status glyphs; a NEEDS YOU column of the agents
// waiting on a person; and a command line (`:`) whose commands are refused, with a plain reason,
// when the console's credential may not do them.

// Actions are what the command line does beyond the screen; a nil one is refused with its reason.
type Actions struct {
	// Post, DM and Ask send as the console's credential: nil when it is read-only.
	Post func(ctx context.Context, channel, text string) error
	DM   func(ctx context.Context, to, text string) error
	Ask  func(ctx context.Context, role, text string) error
	// Spawn and Stop go through the space's manager as the operator; Attach returns the command
	// that attaches this terminal to an agent. Nil where the console has no control.
	Spawn  func(ctx context.Context, name string, command []string) (string, error)
	Stop   func(ctx context.Context, name string) (string, error)
	Attach func(name string) *exec.Cmd
	// Status describes the console's mesh and credential, for :status.
	Status string
}

// The reasons a command is refused.
const (
	refuseReadOnly  = "read-only - pass --creds to send"
	refuseNoControl = "no control here - run the console in the mesh's directory, without --creds"
)

// The glyphs of the statuses.
var glyphs = map[string]string{"working": "●", "waiting": "◐", "idle": "○", "offline": "⊘"}

// feedLimit bounds the lines the console keeps.
const feedLimit = 1000

// entry is one message as the console keeps it.
type entry struct {
	tab  string // the channel, or tabDMs
	line string
}

// The tabs that are not channels.
const (
	tabAll = "all"
	tabDMs = "dms"
)

// Model is the console's state, a bubbletea model.
type Model struct {
	space   wire.Space
	actions Actions
	now     func() time.Time

	tabs   []string // all, the channels as they appear, dms
	tab    int
	unread map[string]int
	feed   []entry
	peers  map[string]cotal.Peer

	width, height int
	// rail shows the roster and NEEDS YOU full screen (n), as a narrow terminal has no room beside
	// the feed for them.
	rail   bool
	typing bool
	input  []rune
	status string
}

// NewModel returns a console of space with actions, showing peers first.
func NewModel(space wire.Space, actions Actions, peers []cotal.Peer, now func() time.Time) *Model {
	m := &Model{space: space, actions: actions, now: now, tabs: []string{tabAll, tabDMs}, unread: map[string]int{},
		peers: map[string]cotal.Peer{}, width: 120, height: 40}
	for _, p := range peers {
		m.peers[p.Key] = p
	}
	return m
}

// DeliveryMsg brings one delivery to the console.
type DeliveryMsg struct{ D *cotal.Delivery }

// PeerMsg brings one roster change to the console.
type PeerMsg struct{ P cotal.Peer }

// resultMsg is a command's outcome.
type resultMsg struct{ text string }

// Init implements tea.Model.
func (m *Model) Init() tea.Cmd { return nil }

// Update implements tea.Model.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case DeliveryMsg:
		m.add(msg.D)
	case PeerMsg:
		if msg.P.Presence == nil {
			delete(m.peers, msg.P.Key)
		} else {
			m.peers[msg.P.Key] = msg.P
		}
	case resultMsg:
		m.status = msg.text
	case tea.KeyMsg:
		if m.typing {
			return m, m.typed(msg)
		}
		return m, m.key(msg)
	}
	return m, nil
}

// add keeps one delivery, opening a tab for a channel not seen before.
func (m *Model) add(d *cotal.Delivery) {
	tab := tabDMs
	if d.Kind == wire.DeliveryChannel {
		tab = d.Channel
		if !slices.Contains(m.tabs, tab) {
			m.tabs = slices.Insert(m.tabs, len(m.tabs)-1, tab)
			if m.tab >= len(m.tabs)-1 {
				m.tab++ // the dms tab moved right; keep showing it
			}
		}
	}
	m.feed = append(m.feed, entry{tab: tab, line: m.format(d)})
	if len(m.feed) > feedLimit {
		m.feed = m.feed[len(m.feed)-feedLimit:]
	}
	if m.tabs[m.tab] != tab && m.tabs[m.tab] != tabAll {
		m.unread[tab]++
	}
}

// format renders a delivery as one line of peer data, its sender from the subject.
func (m *Model) format(d *cotal.Delivery) string {
	where := "#" + who.Word(d.Channel)
	switch d.Kind {
	case wire.DeliveryDM:
		where = "dm"
	case wire.DeliveryAnycast:
		where = "ask:" + who.Word(d.Message.ToService)
	}
	return fmt.Sprintf("%s %s %s: %s", m.now().Format("15:04:05"), where, who.Is(d.Message.From.Name, d.Sender.String()), Summary(d.Message))
}

// key handles a key outside the command line.
func (m *Model) key(k tea.KeyMsg) tea.Cmd {
	// Keys typed fast, or pasted, arrive as one run of runes: a ':' opens the command line with
	// the rest already typed.
	if k.Type == tea.KeyRunes && len(k.Runes) > 1 && k.Runes[0] == ':' {
		m.typing, m.input = true, slices.Clone(k.Runes[1:])
		return nil
	}
	switch k.String() {
	case "q", "ctrl+c":
		return tea.Quit
	case ":":
		m.typing, m.input = true, nil
	case "n":
		m.rail = !m.rail
	case "esc", "b":
		m.rail = false
	case "tab", "]":
		m.show((m.tab + 1) % len(m.tabs))
	case "shift+tab", "[":
		m.show((m.tab + len(m.tabs) - 1) % len(m.tabs))
	default:
		if s := k.String(); len(s) == 1 && s[0] >= '1' && s[0] <= '9' {
			if i := int(s[0] - '1'); i < len(m.tabs) {
				m.show(i)
			}
		}
	}
	return nil
}

// show switches to tab i and clears its unread count.
func (m *Model) show(i int) {
	m.tab = i
	delete(m.unread, m.tabs[i])
}

// typed handles a key on the command line.
func (m *Model) typed(k tea.KeyMsg) tea.Cmd {
	switch k.Type {
	case tea.KeyEsc:
		m.typing = false
	case tea.KeyEnter:
		m.typing = false
		return m.run(string(m.input))
	case tea.KeyBackspace:
		if len(m.input) > 0 {
			m.input = m.input[:len(m.input)-1]
		}
	case tea.KeyCtrlC:
		return tea.Quit
	case tea.KeySpace:
		m.input = append(m.input, ' ')
	case tea.KeyRunes:
		m.input = append(m.input, k.Runes...)
	}
	return nil
}

// commandTimeout bounds one command.
const commandTimeout = 45 * time.Second

// run parses and runs one command line, answering at once for a refusal and later for the rest.
func (m *Model) run(line string) tea.Cmd {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return nil
	}
	name, args := fields[0], fields[1:]
	rest := func(n int) string { return strings.Join(args[min(n, len(args)):], " ") }
	do := func(f func(ctx context.Context) (string, error)) tea.Cmd {
		m.status = name + "…"
		return func() tea.Msg {
			ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
			defer cancel()
			out, err := f(ctx)
			if err != nil {
				return resultMsg{name + ": " + termsafe.Sanitize(err.Error())}
			}
			return resultMsg{out}
		}
	}
	usage := func(u string) tea.Cmd { m.status = "usage: :" + name + " " + u; return nil }
	switch name {
	case "msg", "dm", "ask":
		send := map[string]func(context.Context, string, string) error{"msg": m.actions.Post, "dm": m.actions.DM, "ask": m.actions.Ask}[name]
		switch {
		case send == nil:
			m.status = refuseReadOnly
			return nil
		case len(args) < 2:
			return usage(map[string]string{"msg": "#CHANNEL TEXT", "dm": "NAME TEXT", "ask": "ROLE TEXT"}[name])
		}
		to := strings.TrimPrefix(args[0], "#")
		return do(func(ctx context.Context) (string, error) { return "sent to " + args[0], send(ctx, to, rest(1)) })
	case "spawn":
		dash := slices.Index(args, "--")
		switch {
		case m.actions.Spawn == nil:
			m.status = refuseNoControl
			return nil
		case len(args) < 3 || dash != 1:
			return usage("NAME -- COMMAND [ARGS...]")
		}
		return do(func(ctx context.Context) (string, error) { return m.actions.Spawn(ctx, args[0], args[2:]) })
	case "stop":
		switch {
		case m.actions.Stop == nil:
			m.status = refuseNoControl
			return nil
		case len(args) != 1:
			return usage("NAME")
		}
		return do(func(ctx context.Context) (string, error) { return m.actions.Stop(ctx, args[0]) })
	case "attach":
		switch {
		case m.actions.Attach == nil:
			m.status = refuseNoControl
			return nil
		case len(args) != 1:
			return usage("NAME")
		}
		m.status = "attached to " + args[0] + " (Ctrl-] detaches)"
		return tea.ExecProcess(m.actions.Attach(args[0]), func(err error) tea.Msg {
			if err != nil {
				return resultMsg{"attach: " + err.Error()}
			}
			return resultMsg{"detached from " + args[0]}
		})
	case "status":
		m.status = m.actions.Status
		return nil
	case "q", "quit":
		return tea.Quit
	}
	m.status = "unknown command: " + termsafe.Sanitize(name)
	return nil
}

// Styles.
var (
	activeTab = lipgloss.NewStyle().Bold(true).Reverse(true)
	dim       = lipgloss.NewStyle().Faint(true)
	waitStyle = lipgloss.NewStyle().Foreground(lipgloss.Color("3"))
)

// sideWidth is the roster and NEEDS YOU column's width; it shows from wideEnough columns.
const (
	sideWidth  = 34
	wideEnough = 100
)

// View implements tea.Model.
func (m *Model) View() string {
	var top []string
	for i, t := range m.tabs {
		label := t
		if n := m.unread[t]; n > 0 {
			label += fmt.Sprintf(" (%d)", n)
		}
		if i == m.tab {
			label = activeTab.Render(" " + label + " ")
		} else {
			label = " " + label + " "
		}
		top = append(top, label)
	}
	counts, waiting := m.counts()
	tiles := fmt.Sprintf("● %d working  ◐ %d waiting  ○ %d idle  ⊘ %d offline   space %s",
		counts["working"], counts["waiting"], counts["idle"], counts["offline"], m.space)
	bodyHeight := max(1, m.height-5)
	feedWidth := m.width
	var feed, side []string
	switch {
	case m.rail:
		feed = m.side(waiting, bodyHeight, m.width)
	case m.width >= wideEnough:
		feedWidth = m.width - sideWidth - 1
		side = m.side(waiting, bodyHeight, sideWidth)
		fallthrough
	default:
		feed = m.visible(bodyHeight, feedWidth)
	}
	var body []string
	for i := range bodyHeight {
		left := ""
		if i < len(feed) {
			left = feed[i]
		}
		row := pad(left, feedWidth)
		if side != nil {
			right := ""
			if i < len(side) {
				right = side[i]
			}
			row += "│" + right
		}
		body = append(body, row)
	}
	hints := ": command   tab switch   1-9 jump   n roster and needs-you   q quit"
	switch {
	case m.rail:
		hints = "n or esc back to the feed   : command   q quit"
	case m.width < wideEnough && len(waiting) > 0:
		hints = fmt.Sprintf("n NEEDS YOU · %d   : command   tab switch   q quit", len(waiting))
	}
	prompt := dim.Render(hints)
	if m.typing {
		prompt = ":" + string(m.input) + "█"
	}
	return strings.Join(append(append([]string{strings.Join(top, ""), tiles, strings.Repeat("─", m.width)}, body...), m.status, prompt), "\n")
}

// counts tallies the roster's statuses, and lists the agents waiting on a person.
func (m *Model) counts() (map[string]int, []cotal.Peer) {
	counts := map[string]int{}
	var waiting []cotal.Peer
	for _, p := range m.peers {
		st := statusOf(p)
		counts[st]++
		if st == "waiting" {
			waiting = append(waiting, p)
		}
	}
	slices.SortFunc(waiting, func(a, b cotal.Peer) int { return strings.Compare(a.Key, b.Key) })
	return counts, waiting
}

func statusOf(p cotal.Peer) string {
	if !p.Online || p.Presence == nil {
		return "offline"
	}
	return string(p.Presence.Status)
}

// side renders the roster and the NEEDS YOU column, width wide.
func (m *Model) side(waiting []cotal.Peer, height, width int) []string {
	out := []string{" ROSTER"}
	keys := make([]string, 0, len(m.peers))
	for k := range m.peers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := m.peers[k]
		out = append(out, " "+glyphs[statusOf(p)]+" "+cut(who.Is(p.Presence.Card.Name, p.Key), width-4))
	}
	out = append(out, "")
	if len(waiting) == 0 {
		out = append(out, " NEEDS YOU · all clear")
	} else {
		out = append(out, waitStyle.Render(fmt.Sprintf(" NEEDS YOU · %d", len(waiting))))
		for _, p := range waiting {
			what := p.Presence.Activity
			if what == "" {
				what = "waiting for input"
			}
			out = append(out, " ◐ "+cut(who.Word(p.Presence.Card.Name)+" is waiting", width-4), "   "+cut(quote(what), width-4))
		}
	}
	if len(out) > height {
		out = out[:height]
	}
	return out
}

// visible is the tail of the current tab's feed that fits the body.
func (m *Model) visible(height, width int) []string {
	tab := m.tabs[m.tab]
	var lines []string
	for _, e := range m.feed {
		if tab == tabAll || e.tab == tab {
			lines = append(lines, cut(e.line, width))
		}
	}
	if len(lines) > height {
		lines = lines[len(lines)-height:]
	}
	return lines
}

// cut shortens s to width runes.
func cut(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:max(0, width-1)]) + "…"
}

// pad fills s to width runes.
func pad(s string, width int) string {
	if n := utf8.RuneCountInString(s); n < width {
		return s + strings.Repeat(" ", width-n)
	}
	return s
}
