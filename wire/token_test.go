package wire

import (
	"errors"
	"strings"
	"testing"
)

const (
	ownerA = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	ownerB = "u_bbbbbbbbbbbbbbbbbbbbbbbbbb"
	nkey   = "UAQGWOEVJKMIO4WXSYOTLARXYOZTCXFK67JASEH6AFFFYK6FOPSKQCAD"
	uidA   = "abcdefghijklmnopqrstuvwxyz"
)

func mustPrincipal(t testing.TB, owner, actor string) Principal {
	t.Helper()
	p, err := NewPrincipal(owner, actor)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustLifecycle(t testing.TB, owner, actor, uid string) Lifecycle {
	t.Helper()
	u, err := ParseLifecycleUID(uid)
	if err != nil {
		t.Fatal(err)
	}
	return Lifecycle{Principal: mustPrincipal(t, owner, actor), UID: u}
}

func TestToken(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"safe unchanged", "team-A_1", "team-A_1"},
		{"empty", "", "_"},
		{"blank", "  \t", "_"},
		{"dot and star", "a.b*c>", "a_b_c_"},
		{"space inside", "my space", "my_space"},
		{"trimmed", "  main\n", "main"},
		{"ES trims no-break space", "\u00a0main\u00a0", "main"},
		{"ES trims BOM", "\ufeffmain", "main"},
		{"ES keeps NEL", "\u0085main", "_main"},
		{"BMP char is one unit", "café", "caf_"},
		{"astral char is two units", "go🎉", "go__"},
		{"invalid UTF-8 byte", "a\xffb", "a_b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Token(tt.in); got != tt.want {
				t.Errorf("Token(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestIdentityTokens(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		valid   bool
		derived bool
		owner   bool
	}{
		{"derived owner", ownerA, true, true, true},
		{"dev owner", "local", true, false, true},
		{"nkey is grammatical but no owner", nkey, true, false, false},
		{"actor", "alice_2", true, false, false},
		{"derived with bad alphabet", "u_aaaaaaaaaaaaaaaaaaaaaaaaa1", true, false, false},
		{"derived too short", "u_aaaaaaaaaaaaaaaaaaaaaaaaa", true, false, false},
		{"derived upper", "u_AAAAAAAAAAAAAAAAAAAAAAAAAA", true, false, false},
		{"empty", "", false, false, false},
		{"dash reserved", "a-b", false, false, false},
		{"dot", "a.b", false, false, false},
		{"star", "*", false, false, false},
		{"gt", ">", false, false, false},
		{"space", "a b", false, false, false},
		{"non-ASCII", "é", false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateOwner(tt.in)
			if (err == nil) != tt.valid {
				t.Fatalf("validateOwner(%q) = %v, want valid=%v", tt.in, err, tt.valid)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "owner") {
					t.Errorf("error %q should match ErrInvalid and name the owner", err)
				}
			}
			if err := ValidateActor(tt.in); (err == nil) != tt.valid {
				t.Errorf("ValidateActor(%q) = %v, want valid=%v", tt.in, err, tt.valid)
			}
			if got := IsDerivedOwner(tt.in); got != tt.derived {
				t.Errorf("IsDerivedOwner(%q) = %v", tt.in, got)
			}
			if got := isPrincipalOwner(tt.in); got != tt.owner {
				t.Errorf("isPrincipalOwner(%q) = %v", tt.in, got)
			}
		})
	}
}

func TestPrincipalForms(t *testing.T) {
	p := mustPrincipal(t, ownerA, "alice")
	if got, want := p.String(), ownerA+".alice"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := p.Name(), ownerA+"-alice"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
	if p.Owner() != ownerA || p.Actor() != "alice" || p.IsZero() || !p.HasPrincipalOwner() {
		t.Errorf("accessors of %v wrong", p)
	}
	back, err := ParsePrincipal(p.String())
	if err != nil || back != p {
		t.Errorf("ParsePrincipal(%q) = %v, %v", p.String(), back, err)
	}
	var zero Principal
	if !zero.IsZero() || zero.String() != "" || zero.Name() != "" {
		t.Error("zero principal must render empty")
	}
}

func TestParsePrincipalErrors(t *testing.T) {
	tests := []struct{ name, in, field string }{
		{"no dot", "alice", "principal"},
		{"three tokens", "a.b.c", "principal.actor"},
		{"empty owner", ".alice", "principal.owner"},
		{"empty actor", ownerA + ".", "principal.actor"},
		{"dash in actor", ownerA + ".al-ice", "principal.actor"},
		{"wildcard", "*.alice", "principal.owner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePrincipal(tt.in)
			var v *ValidationError
			if !errors.As(err, &v) {
				t.Fatalf("ParsePrincipal(%q) = %v, want *ValidationError", tt.in, err)
			}
			if v.Field != tt.field {
				t.Errorf("Field = %q, want %q (%v)", v.Field, tt.field, err)
			}
		})
	}
}

func TestLifecycleUID(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		ok       bool
	}{
		{"26 chars", uidA, true},
		{"32 chars", strings.Repeat("a1", 16), true},
		{"25 chars", uidA[:25], false},
		{"33 chars", strings.Repeat("a", 33), false},
		{"upper case", strings.ToUpper(uidA), false},
		{"dash", uidA[:25] + "-", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseLifecycleUID(tt.in)
			if (err == nil) != tt.ok {
				t.Errorf("ParseLifecycleUID(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "lifecycleUid") {
				t.Errorf("error %q does not name the field", err)
			}
		})
	}
	seen := map[LifecycleUID]bool{}
	for range 100 {
		u := NewLifecycleUID()
		if _, err := ParseLifecycleUID(string(u)); err != nil {
			t.Fatalf("NewLifecycleUID() = %q: %v", u, err)
		}
		if seen[u] {
			t.Fatalf("NewLifecycleUID repeated %q", u)
		}
		seen[u] = true
	}
}

func TestLifecycleForms(t *testing.T) {
	l := mustLifecycle(t, ownerA, "alice", uidA)
	if got, want := l.String(), ownerA+".alice."+uidA; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := l.Name(), ownerA+"-alice-"+uidA; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
	back, err := ParseLifecycle(l.String())
	if err != nil || back != l {
		t.Errorf("ParseLifecycle(%q) = %v, %v", l.String(), back, err)
	}
	for _, bad := range []string{"", "alice", ownerA + ".alice", ownerA + ".alice.SHORT", "a-b.c." + uidA} {
		if _, err := ParseLifecycle(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseLifecycle(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestConnID(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		ok       bool
	}{
		{"nkey", nkey, true},
		{"8 chars", "abcd_-12", true},
		{"120 chars", strings.Repeat("x", 120), true},
		{"7 chars", "abcdefg", false},
		{"121 chars", strings.Repeat("x", 121), false},
		{"gt would widen the grant", "abcdefgh>", false},
		{"dot would widen the grant", "abcd.efgh", false},
		{"star", "abcdefg*", false},
		{"space", "abcd efgh", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConnID(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("ParseConnID(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err == nil && c.InboxPrefix() != "_INBOX_"+tt.in {
				t.Errorf("InboxPrefix() = %q", c.InboxPrefix())
			}
		})
	}
	c := NewConnID()
	if _, err := ParseConnID(string(c)); err != nil {
		t.Fatalf("NewConnID() = %q: %v", c, err)
	}
	if c.InboxPrefix() != "_INBOX_"+string(c) {
		t.Errorf("InboxPrefix() = %q", c.InboxPrefix())
	}
}

func TestValidationErrorShortensValue(t *testing.T) {
	err := validateOwner(strings.Repeat("é", 100))
	if len(err.Error()) > 200 {
		t.Errorf("error repeats a long value in full: %d bytes", len(err.Error()))
	}
}
