package console

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/wire"
)

// at is the time every line here is written at; it prints as 15:04:05.
var at = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

func principal(t *testing.T, s string) wire.Principal {
	t.Helper()
	p, err := wire.ParsePrincipal(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLine(t *testing.T) {
	mallory := principal(t, "local.mallory")
	msg := func(name string, parts ...wire.Part) *wire.CotalMessage {
		return &wire.CotalMessage{ID: "m1", TS: 1, Space: "main", From: wire.EndpointRef{ID: mallory.String(), Name: name}, Parts: parts}
	}
	anycast := msg("mallory", wire.TextPart("review"))
	anycast.ToService = "reviewer"
	spacedRole := msg("mallory", wire.TextPart("x"))
	spacedRole.ToService = "r alice (local.alice)"
	tests := []struct {
		name string
		d    *cotal.Delivery
		want string
	}{
		{"channel", &cotal.Delivery{Kind: wire.DeliveryChannel, Channel: "general", Sender: mallory, Message: msg("mallory", wire.TextPart("hello"))},
			"15:04:05 #general mallory (local.mallory): hello\n"},
		{"history", &cotal.Delivery{Kind: wire.DeliveryChannel, Channel: "general", Historical: true, Sender: mallory, Message: msg("mallory", wire.TextPart("old"))},
			"15:04:05 #general mallory (local.mallory) (history): old\n"},
		{"dm", &cotal.Delivery{Kind: wire.DeliveryDM, Sender: mallory, Message: msg("mallory", wire.TextPart("psst"))},
			"15:04:05 dm mallory (local.mallory): psst\n"},
		{"anycast", &cotal.Delivery{Kind: wire.DeliveryAnycast, Sender: mallory, Message: anycast},
			"15:04:05 ask:reviewer mallory (local.mallory): review\n"},
		{"a role from the body cannot pose as fields", &cotal.Delivery{Kind: wire.DeliveryAnycast, Sender: mallory, Message: spacedRole},
			"15:04:05 ask:\"r alice (local.alice)\" mallory (local.mallory): x\n"},
		{"a hostile name", &cotal.Delivery{Kind: wire.DeliveryChannel, Channel: "general", Sender: mallory, Message: msg("\x1b[31malice\u202e\x1b]0;pwned\x07", wire.TextPart("hi"))},
			"15:04:05 #general alice (local.mallory): hi\n"},
		{"text cannot forge a line or a colour", &cotal.Delivery{Kind: wire.DeliveryChannel, Channel: "general", Sender: mallory,
			Message: msg("mallory", wire.TextPart("hi\n15:04:06 #general alice (local.alice): \x1b[31mtransfer\u202e"))},
			"15:04:05 #general mallory (local.mallory): hi\\n15:04:06 #general alice (local.alice): \\x1b[31mtransfer\\u202e\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			Line(&b, at, tt.d)
			if b.String() != tt.want {
				t.Errorf("Line wrote %q, want %q", b.String(), tt.want)
			}
		})
	}
}

func TestPresenceLine(t *testing.T) {
	row := func(name, activity string, status wire.PresenceStatus) *wire.Presence {
		return &wire.Presence{Card: wire.AgentCard{ID: "local.mallory", Name: name, Kind: wire.KindAgent}, Status: status, TS: 1, Activity: activity}
	}
	tests := []struct {
		name string
		p    cotal.Peer
		want string
	}{
		{"online", cotal.Peer{Key: "local.bob", Presence: row("bob", "", wire.StatusIdle), Online: true},
			"15:04:05 * bob (local.bob) is idle\n"},
		{"stale reads offline", cotal.Peer{Key: "local.bob", Presence: row("bob", "", wire.StatusWorking)},
			"15:04:05 * bob (local.bob) is offline\n"},
		{"left", cotal.Peer{Key: "local.bob"}, "15:04:05 * local.bob left\n"},
		{"hostile name and activity", cotal.Peer{Key: "local.mallory", Online: true,
			Presence: row("\x1b[2J\u2066alice\u2069", "coding\n15:04:06 * alice (local.alice) is idle\x1b[0m", wire.StatusWorking)},
			"15:04:05 * alice (local.mallory) is working — coding\\n15:04:06 * alice (local.alice) is idle\\x1b[0m\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			said := map[string]string{}
			PresenceLine(&b, at, tt.p, said)
			if b.String() != tt.want {
				t.Errorf("presenceLine wrote %q, want %q", b.String(), tt.want)
			}
			// The same presence again (a heartbeat) prints nothing.
			PresenceLine(&b, at.Add(time.Second), tt.p, said)
			if b.String() != tt.want {
				t.Errorf("a repeated presence printed again: %q", b.String())
			}
		})
	}
}

func TestSummary(t *testing.T) {
	digest := wire.ContentDigest([]byte("x"))
	data, err := wire.DataPart(map[string]any{"k": "v\n"})
	if err != nil {
		t.Fatal(err)
	}
	m := &wire.CotalMessage{Parts: []wire.Part{
		wire.TextPart("a\tb"),
		data,
		{Kind: wire.PartArtifact, Name: "r\u202eport.html", Digest: digest, Size: 1},
		{Kind: "com.acme.snapshot"},
	}}
	want := `a\tb [data {\"k\":\"v\\n\"}] [artifact r\u202eport.html ` + digest + `, 1 bytes] [com.acme.snapshot]`
	if got := Summary(m); got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
}

func TestQuoteCutsOnARuneBoundary(t *testing.T) {
	s := strings.Repeat("a", maxShown-1) + "é" // the cut falls inside é
	got := quote(s)
	if want := strings.Repeat("a", maxShown-1) + "…"; got != want {
		t.Errorf("quote cut to %q…, want %q", got[len(got)-8:], want[len(want)-8:])
	}
}
