package console

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/wire"
)

// TestCommandLine: each command refused with its reason when the console may not run it, usage
// named when its arguments are wrong, an unknown one named, and a send run with what it was given.
func TestCommandLine(t *testing.T) {
	readOnly := NewModel("main", Actions{Status: "space main as local.cotal_console (read-only observer)"}, nil, time.Now)
	for line, want := range map[string]string{
		"msg #general hi": refuseReadOnly,
		"dm bob hi":       refuseReadOnly,
		"ask reviewer x":  refuseReadOnly,
		"spawn a -- true": refuseNoControl,
		"stop a":          refuseNoControl,
		"attach a":        refuseNoControl,
		"frobnicate":      "unknown command: frobnicate",
		"status":          "space main as local.cotal_console (read-only observer)",
	} {
		readOnly.status = ""
		if cmd := readOnly.run(line); cmd != nil || readOnly.status != want {
			t.Errorf(":%s shows %q (command %v), want %q", line, readOnly.status, cmd != nil, want)
		}
	}
	var to, text string
	sending := NewModel("main", Actions{
		Post: func(_ context.Context, channel, body string) error { to, text = channel, body; return nil },
		Stop: func(context.Context, string) (string, error) { return "", errors.New("no such agent") },
	}, nil, time.Now)
	for line, want := range map[string]string{"msg #general": "usage: :msg #CHANNEL TEXT", "stop": "usage: :stop NAME"} {
		if sending.run(line); sending.status != want {
			t.Errorf(":%s shows %q, want %q", line, sending.status, want)
		}
	}
	if msg := sending.run("msg #general hello there")(); to != "general" || text != "hello there" || msg.(resultMsg).text != "sent to #general" {
		t.Errorf("msg sent %q to %q and answered %+v", text, to, msg)
	}
	if msg := sending.run("stop bob")(); msg.(resultMsg).text != "stop: no such agent" {
		t.Errorf("a refused stop answered %+v", msg)
	}
}

// TestTabs: a channel speaking opens its tab before dms, numbers select tabs, and a tab not shown
// counts its unread messages.
func TestTabs(t *testing.T) {
	m := NewModel("main", Actions{}, nil, time.Now)
	bob, _ := wire.ParsePrincipal("local.bob")
	post := func(channel string) {
		m.Update(DeliveryMsg{D: &cotal.Delivery{Kind: wire.DeliveryChannel, Channel: channel, Sender: bob,
			Message: &wire.CotalMessage{ID: channel, From: wire.EndpointRef{ID: "local.bob", Name: "bob"}, Parts: []wire.Part{wire.TextPart("hi")}}}})
	}
	post("general")
	post("team")
	if got := m.tabs; len(got) != 4 || got[0] != tabAll || got[1] != "general" || got[2] != "team" || got[3] != tabDMs {
		t.Fatalf("tabs %v", got)
	}
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("3")})
	if m.tabs[m.tab] != "team" {
		t.Fatalf("3 selected %s", m.tabs[m.tab])
	}
	post("general")
	if m.unread["general"] != 1 || m.unread["team"] != 0 {
		t.Errorf("unread %v", m.unread)
	}
}

// TestNarrowNeedsYou: a terminal too narrow for the side column names who waits on the prompt
// line, and n shows the roster and NEEDS YOU full screen until esc.
func TestNarrowNeedsYou(t *testing.T) {
	bob := cotal.Peer{Key: "local.bob", Online: true, Presence: &wire.Presence{Status: wire.StatusWaiting, Activity: "needs a decision",
		Card: wire.AgentCard{ID: "local.bob", Name: "bob"}}}
	m := NewModel("main", Actions{}, []cotal.Peer{bob}, time.Now)
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 20})
	view := m.View()
	if strings.Contains(view, "bob is waiting") || !strings.Contains(view, "n NEEDS YOU · 1") || !strings.Contains(view, "q quit") {
		t.Fatalf("a narrow console, before n:\n%s", view)
	}
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("n")})
	if view = m.View(); !strings.Contains(view, "◐ bob is waiting") || !strings.Contains(view, "needs a decision") {
		t.Fatalf("after n:\n%s", view)
	}
	m.Update(tea.KeyMsg{Type: tea.KeyEsc})
	if view = m.View(); strings.Contains(view, "bob is waiting") {
		t.Fatalf("after esc:\n%s", view)
	}
}
