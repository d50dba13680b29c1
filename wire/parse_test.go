package wire

import (
	"errors"
	"strings"
	"testing"
)

// TestParseSubjectSpecVectors is the subject-parsing table of SPEC §12.
func TestParseSubjectSpecVectors(t *testing.T) {
	tests := []struct {
		name    string
		subject string
		ok      bool
		kind    SubjectKind
		sender  string
		rest    string
	}{
		{"chat", "cotal.main.chat." + ownerA + ".alice.team.backend", true, KindChat, ownerA + ".alice", "team.backend"},
		{"inst", "cotal.main.inst." + ownerB + ".bob." + ownerA + ".alice", true, KindInst, ownerA + ".alice", ownerB + ".bob"},
		{"svc", "cotal.main.svc.reviewer." + ownerA + ".alice", true, KindSvc, ownerA + ".alice", "reviewer"},
		{"ctl has no sender", "cotal.main.ctl.manager." + ownerA + ".alice", false, "", "", ""},
		{"chat without channel", "cotal.main.chat." + ownerA + ".alice", false, "", "", ""},
		{"old-shape alias split-parses", "cotal.main.chat." + nkey + ".team.backend", true, KindChat, nkey + ".team", "backend"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSubject(tt.subject)
			if !tt.ok {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("ParseSubject(%q) = %+v, %v; want no sender", tt.subject, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSubject(%q): %v", tt.subject, err)
			}
			if got.Kind != tt.kind || got.Sender() != tt.sender || got.Rest != tt.rest || got.Space != "main" {
				t.Errorf("ParseSubject(%q) = %+v (sender %q), want kind=%s sender=%s rest=%s", tt.subject, got, got.Sender(), tt.kind, tt.sender, tt.rest)
			}
		})
	}
}

func TestParseSubjectArity(t *testing.T) {
	A := ownerA + ".alice"
	for _, tt := range []struct {
		name, subject, rule string
	}{
		{"wrong root", "nats.main.chat." + A + ".x", "must start with"},
		{"too short", "cotal.main", "must start with"},
		{"empty", "", "must start with"},
		{"inst too short", "cotal.main.inst." + ownerB + ".bob." + ownerA, "exactly"},
		{"inst too long", "cotal.main.inst." + ownerB + ".bob." + A + ".x", "exactly"},
		{"inst far too long", "cotal.main.inst." + ownerB + ".bob." + A + ".x.y.z", "exactly"},
		{"svc too long", "cotal.main.svc.reviewer." + A + ".x", "exactly"},
		{"svc too short", "cotal.main.svc.reviewer." + ownerA, "exactly"},
		{"live", "cotal.main.live.manager." + A, "carries no delivery"},
		{"dinbox", "cotal.main.dinbox." + A + "." + uidA, "carries no delivery"},
		{"trace", "cotal.main.trace.x", "carries no delivery"},
		{"ep", "cotal.main.ep.one.x", "carries no delivery"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSubject(tt.subject)
			if err == nil || !strings.Contains(err.Error(), tt.rule) {
				t.Errorf("ParseSubject(%q) = %v, want an error saying %q", tt.subject, err, tt.rule)
			}
		})
	}
	p, err := ParseSubject("cotal.main.chat." + A + ".a.b.c.d")
	if err != nil || p.Rest != "a.b.c.d" {
		t.Errorf("a deep channel parses whole: %+v, %v", p, err)
	}
	if pr, err := p.Principal(); err != nil || pr.String() != A {
		t.Errorf("Principal() = %v, %v", pr, err)
	}
}
