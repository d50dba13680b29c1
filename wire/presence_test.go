package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func samplePresence() *Presence {
	return &Presence{
		Card: AgentCard{
			ID: ownerA + ".alice", Name: "alice", Kind: KindAgent, Owner: ownerA, Actor: "alice",
			Role: "planner", ProtocolVersion: ProtocolVersion, Skills: []AgentSkill{{ID: "go", Name: "Go"}},
			Meta: map[string]any{"model": "m"},
		},
		Status: StatusWorking, TS: 1710000000000, Attention: AttentionFocus,
		ChannelModes: map[string]ChannelMode{"team.backend": ChannelQuiet},
		Condition:    &PresenceCondition{Code: ConditionRateLimit, Source: "429"},
		LifecycleUID: uidA, ActiveAt: 1710000000000,
	}
}

func TestPresenceRoundTrip(t *testing.T) {
	p := samplePresence()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodePresence(ownerA+".alice", b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusWorking || got.Card.Role != "planner" || got.ChannelModes["team.backend"] != ChannelQuiet ||
		got.Condition.Code != ConditionRateLimit || got.LifecycleUID != uidA {
		t.Errorf("decoded %+v", got)
	}
	if strings.Contains(string(b), "statusSince") || strings.Contains(string(b), "environment") {
		t.Errorf("unset optional fields must be omitted: %s", b)
	}
}

func TestDecodePresenceRefuses(t *testing.T) {
	good, err := json.Marshal(samplePresence())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodePresence(ownerB+".bob", good); err == nil || !strings.Contains(err.Error(), "card.id") {
		t.Errorf("a row under another key must be dropped, got %v", err)
	}
	tests := []struct {
		name  string
		edit  func(p *Presence)
		field string
	}{
		{"bad status", func(p *Presence) { p.Status = "busy" }, "status"},
		{"no ts", func(p *Presence) { p.TS = 0 }, "ts"},
		{"bad kind", func(p *Presence) { p.Card.Kind = "bot" }, "card.kind"},
		{"long name", func(p *Presence) { p.Card.Name = strings.Repeat("n", MaxNameLength+1) }, "card.name"},
		{"owner disagrees with id", func(p *Presence) { p.Card.Owner = ownerB }, "card.owner"},
		{"bad attention", func(p *Presence) { p.Attention = "away" }, "attention"},
		{"bad channel mode", func(p *Presence) { p.ChannelModes = map[string]ChannelMode{"x": "loud"} }, "channelModes.x"},
		{"wildcard channel mode key", func(p *Presence) { p.ChannelModes = map[string]ChannelMode{"x.>": ChannelMuted} }, "channelModes.channel"},
		{"bad condition", func(p *Presence) { p.Condition = &PresenceCondition{Code: "tired"} }, "condition.code"},
		{"bad lifecycle", func(p *Presence) { p.LifecycleUID = "X" }, "lifecycleUid"},
		{"skill without name", func(p *Presence) { p.Card.Skills = []AgentSkill{{ID: "x"}} }, "card.skills[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := samplePresence()
			tt.edit(p)
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			_, err = DecodePresence(p.Card.ID, b)
			var v *ValidationError
			if !errors.As(err, &v) || v.Field != tt.field {
				t.Errorf("DecodePresence = %v, want an error on %s", err, tt.field)
			}
		})
	}
	if _, err := DecodePresence("k", []byte("{")); !errors.Is(err, ErrInvalid) {
		t.Errorf("non-JSON row: %v", err)
	}
}

func TestPresenceStale(t *testing.T) {
	p := samplePresence()
	at := p.TS.Time()
	if p.Stale(at.Add(LivenessWindow)) {
		t.Error("a row exactly at the window is still live")
	}
	if !p.Stale(at.Add(LivenessWindow + time.Millisecond)) {
		t.Error("a row past the window is offline")
	}
}
