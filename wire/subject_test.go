package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestSubjectBuilders(t *testing.T) {
	sp := Space("main")
	alice := mustPrincipal(t, ownerA, "alice")
	bob := mustPrincipal(t, ownerB, "bob")
	must := func(s string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	A := ownerA + ".alice"
	tests := []struct{ name, got, want string }{
		{"prefix", sp.Prefix(), "cotal.main"},
		{"chat all", sp.KindAll(KindChat), "cotal.main.chat.>"},
		{"chat", must(sp.ChatSubject(alice, "team.backend")), "cotal.main.chat." + A + ".team.backend"},
		{"chat sanitised segments", must(sp.ChatSubject(alice, " team . back end ")), "cotal.main.chat." + A + ".team.back_end"},
		{"chat empty segments dropped", must(sp.ChatSubject(alice, "team..backend.")), "cotal.main.chat." + A + ".team.backend"},
		{"chat filter", must(sp.ChatFilter("team.backend")), "cotal.main.chat.*.*.team.backend"},
		{"chat filter subtree", must(sp.ChatFilter("team.>")), "cotal.main.chat.*.*.team.>"},
		{"chat filter star", must(sp.ChatFilter("*.alerts")), "cotal.main.chat.*.*.*.alerts"},
		{"chat publish grant", must(sp.ChatPattern(ownerA, "alice", "team.>")), "cotal.main.chat." + A + ".team.>"},
		{"dm", sp.DMSubject(bob, alice), "cotal.main.inst." + ownerB + ".bob." + A},
		{"anycast", must(sp.AnycastSubject("reviewer", alice)), "cotal.main.svc.reviewer." + A},
		{"anycast sanitised role", must(sp.AnycastSubject("code review", alice)), "cotal.main.svc.code_review." + A},
		{"anycast filter", must(sp.AnycastFilter("reviewer")), "cotal.main.svc.reviewer.>"},
		{"ctl", sp.ControlSubject(ControlDelivery, alice), "cotal.main.ctl.delivery." + A},
		{"live", sp.LivenessSubject(PlaneManager, alice), "cotal.main.live.manager." + A},
		{"reply", ReplySubject("cotal.main.live.manager."+A, "n1"), "cotal.main.live.manager." + A + ".reply.n1"},
		{"space sanitised", Space("my space").Prefix(), "cotal.my_space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestChatSubjectErrors(t *testing.T) {
	sp := Space("main")
	alice := mustPrincipal(t, ownerA, "alice")
	tests := []struct{ name, channel, rule string }{
		{"empty", "", "at least one segment"},
		{"only dots", "..", "at least one segment"},
		{"star in publish", "team.*", "concrete"},
		{"gt in publish", "team.>", "concrete"},
		{"too long", strings.Repeat("a", maxChannelLength+1), "limit is 4096"},
		{"too long in UTF-16 units", strings.Repeat("🎉", maxChannelLength/2+1), "limit is 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sp.ChatSubject(alice, tt.channel)
			var v *ValidationError
			if !errors.As(err, &v) || v.Field != "channel" || !strings.Contains(v.Rule, tt.rule) {
				t.Errorf("ChatSubject(%q) = %v, want a channel error saying %q", shorten(tt.channel), err, tt.rule)
			}
		})
	}
	if _, err := sp.ChatSubject(alice, strings.Repeat("a", maxChannelLength)); err != nil {
		t.Errorf("a channel of exactly %d characters is allowed: %v", maxChannelLength, err)
	}
	if _, err := sp.ChatPattern("*", "*", "a.>.b"); err == nil || !strings.Contains(err.Error(), "last segment") {
		t.Errorf("'>' before the end must be refused, got %v", err)
	}
	if _, err := sp.ChatPattern("a-b", "*", "x"); err == nil || !strings.Contains(err.Error(), "owner") {
		t.Errorf("a bad owner must be refused, got %v", err)
	}
	if _, err := sp.AnycastSubject("  ", alice); err == nil || !strings.Contains(err.Error(), "role") {
		t.Errorf("a blank role must be refused, got %v", err)
	}
}

func TestParseSpace(t *testing.T) {
	for _, ok := range []string{"main", "team-1", "A_b", strings.Repeat("s", maxSpaceLength)} {
		if _, err := ParseSpace(ok); err != nil {
			t.Errorf("ParseSpace(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "my space", "a.b", "*", strings.Repeat("s", maxSpaceLength+1)} {
		if _, err := ParseSpace(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseSpace(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestParsePlaneAndService(t *testing.T) {
	for _, p := range Planes {
		if got, err := ParsePlane(string(p)); err != nil || got != p {
			t.Errorf("ParsePlane(%q) = %q, %v", p, got, err)
		}
	}
	for _, bad := range []string{"", "auth", "Manager", "manager.x", "*"} {
		if _, err := ParsePlane(bad); err == nil || !strings.Contains(err.Error(), "liveness plane") {
			t.Errorf("ParsePlane(%q) = %v, want a liveness plane error", bad, err)
		}
	}
	for _, ok := range []ControlService{ControlDelivery, ControlDeliveryAdmin} {
		if _, err := parseControlService(string(ok)); err != nil {
			t.Errorf("parseControlService(%q) = %v", ok, err)
		}
	}
	if _, err := parseControlService("manager"); err == nil {
		t.Error("the manager's ctl service is retired and must be refused")
	}
}

func TestSubjectMatches(t *testing.T) {
	tests := []struct {
		pattern, subject string
		want             bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{">", "a", true},
		{"*", "a", true},
		{"*", "a.b", false},
		{"a.*.c", "a.b.c", true},
		{"a.b.c", "a.b", false},
		{"a", "a.b", false},
		{"team.>", "team.backend", true},
		{"team", "team.backend", false},
	}
	for _, tt := range tests {
		if got := SubjectMatches(tt.pattern, tt.subject); got != tt.want {
			t.Errorf("SubjectMatches(%q, %q) = %v, want %v", tt.pattern, tt.subject, got, tt.want)
		}
	}
}

func TestNames(t *testing.T) {
	sp := Space("main")
	life := mustLifecycle(t, ownerA, "alice", uidA)
	lname := ownerA + "-alice-" + uidA
	task, err := TaskDurable("code review")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, got, want string }{
		{"chat stream", sp.ChatStream(), "CHAT_main"},
		{"dm stream", sp.DMStream(), "DM_main"},
		{"task stream", sp.TaskStream(), "TASK_main"},
		{"dlv stream", sp.DLVStream(), "DLV_main"},
		{"presence", string(sp.PresenceBucket()), "cotal_presence_main"},
		{"channels", string(sp.ChannelsBucket()), "cotal_channels_main"},
		{"kv stream", sp.PresenceBucket().Stream(), "KV_cotal_presence_main"},
		{"presence put", sp.PresenceBucket().Subject(PresenceKey(life.Principal)), "$KV.cotal_presence_main." + ownerA + ".alice"},
		{"dm durable", DMDurable(life), "dm_" + lname},
		{"dlv durable", DLVDurable(life), "dlv_" + lname},
		{"chathist", ChatHistConsumer(life), "chathist_" + lname},
		{"task durable", task, "svc_code_review"},
		{"defaults key", ChannelDefaultsKey, "=defaults"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
	if _, err := TaskDurable(""); err == nil {
		t.Error("an empty role has no durable")
	}
}
