package wire

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestValidateChannelPattern(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
		concrete bool
	}{
		{"simple", "general", true, true},
		{"dotted", "team.backend", true, true},
		{"dash and underscore", "a-b_c", true, true},
		{"star", "team.*", true, false},
		{"subtree", "team.>", true, false},
		{"all", ">", true, false},
		{"gt not last", "team.>.x", false, false},
		{"slash would be rewritten", "foo/bar", false, false},
		{"space would be rewritten", "foo bar", false, false},
		{"empty", "", false, false},
		{"leading dot", ".team", false, false},
		{"trailing dot", "team.", false, false},
		{"double dot", "team..backend", false, false},
		{"partial wildcard", "team*", false, false},
		{"too long", strings.Repeat("a", maxChannelLength+1), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateChannelPattern(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidateChannelPattern(%q) = %v, want ok=%v", shorten(tt.in), err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v should match ErrInvalid", err)
			}
			if cerr := ValidateChannel(tt.in); (cerr == nil) != (tt.ok && tt.concrete) {
				t.Errorf("ValidateChannel(%q) = %v, want ok=%v", shorten(tt.in), cerr, tt.ok && tt.concrete)
			}
		})
	}
}

func TestChannelInAllow(t *testing.T) {
	allow := []string{"general", "team.>", "*.alerts"}
	for ch, want := range map[string]bool{
		"general": true, "team.backend": true, "team.a.b": true, "ops.alerts": true,
		"team": false, "secret": false, "a.b.alerts": false,
	} {
		if got := ChannelInAllow(allow, ch); got != want {
			t.Errorf("ChannelInAllow(%q) = %v, want %v", ch, got, want)
		}
	}
	if ChannelInAllow(nil, "general") {
		t.Error("an empty ACL allows nothing")
	}
}

func TestResolveChannel(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name     string
		ch       *ChannelConfig
		defaults *ChannelDefaults
		want     EffectiveChannel
	}{
		{"nothing set", nil, nil, EffectiveChannel{Replay: true, DeliveryClass: ClassDurable}},
		{"defaults apply", &ChannelConfig{}, &ChannelDefaults{Replay: &no, DeliveryClass: ClassLive, ReplayWindow: "1h"},
			EffectiveChannel{Replay: false, DeliveryClass: ClassLive, ReplayWindow: time.Hour}},
		{"channel wins", &ChannelConfig{Replay: &yes, DeliveryClass: ClassDurable, ReplayWindow: "30m"},
			&ChannelDefaults{Replay: &no, DeliveryClass: ClassLive, ReplayWindow: "1h"},
			EffectiveChannel{Replay: true, DeliveryClass: ClassDurable, ReplayWindow: 30 * time.Minute}},
		{"channel false is not unset", &ChannelConfig{Replay: &no}, &ChannelDefaults{Replay: &yes},
			EffectiveChannel{Replay: false, DeliveryClass: ClassDurable}},
		{"partial channel", &ChannelConfig{DeliveryClass: ClassLive}, &ChannelDefaults{Replay: &no},
			EffectiveChannel{Replay: false, DeliveryClass: ClassLive}},
		{"defaults only class", nil, &ChannelDefaults{DeliveryClass: ClassLive},
			EffectiveChannel{Replay: true, DeliveryClass: ClassLive}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResolveChannel(tt.ch, tt.defaults); got != tt.want {
				t.Errorf("ResolveChannel = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseReplayWindow(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30s": 30 * time.Second, "5m": 5 * time.Minute, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "0s": 0,
	} {
		if got, err := parseReplayWindow(in); err != nil || got != want {
			t.Errorf("parseReplayWindow(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "h", "24", "1.5h", "-1h", "1w", "24H", " 1h", "1h ", "99999999999999999999d"} {
		_, err := parseReplayWindow(bad)
		var v *ValidationError
		if !errors.As(err, &v) || v.Field != "replayWindow" {
			t.Errorf("parseReplayWindow(%q) = %v, want a replayWindow error", bad, err)
		}
	}
}

func TestChannelConfigDecode(t *testing.T) {
	c, err := DecodeChannelConfig([]byte(`{"replay":false,"replayWindow":"24h","deliveryClass":"live","description":"d","future":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Replay == nil || *c.Replay || c.ReplayWindow != "24h" || c.DeliveryClass != ClassLive {
		t.Errorf("decoded %+v", c)
	}
	for name, tt := range map[string]struct{ in, field string }{
		"bad class":          {`{"deliveryClass":"sometimes"}`, "deliveryClass"},
		"bad window":         {`{"replayWindow":"soon"}`, "replayWindow"},
		"long description":   {`{"description":"` + strings.Repeat("x", maxChannelDescription+1) + `"}`, "description"},
		"long instructions":  {`{"instructions":"` + strings.Repeat("x", maxChannelInstructions+1) + `"}`, "instructions"},
		"replay not boolean": {`{"replay":"yes"}`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeChannelConfig([]byte(tt.in))
			if err == nil {
				t.Fatal("want an error")
			}
			var v *ValidationError
			if tt.field != "" && (!errors.As(err, &v) || v.Field != tt.field) {
				t.Errorf("error %v should name %s", err, tt.field)
			}
		})
	}
	d, err := DecodeChannelDefaults([]byte(`{"deliveryClass":"durable"}`))
	if err != nil || d.DeliveryClass != ClassDurable {
		t.Errorf("DecodeChannelDefaults = %+v, %v", d, err)
	}
	if _, err := DecodeChannelDefaults([]byte(`{"deliveryClass":"x"}`)); err == nil {
		t.Error("bad defaults must be refused")
	}
}

func TestNormalizeMentions(t *testing.T) {
	tests := []struct {
		in   []string
		want []string
	}{
		{nil, nil},
		{[]string{}, nil},
		{[]string{" ", ""}, nil},
		{[]string{" Bob ", "bob", "ALICE", "\u00a0carol"}, []string{"bob", "alice", "carol"}},
	}
	for _, tt := range tests {
		if got := NormalizeMentions(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("NormalizeMentions(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
