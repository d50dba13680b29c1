package wire

import (
	"errors"
	"strings"
	"testing"
)

const (
	testUID  LifecycleUID = "abcdefghijklmnopqrstuvwxyz"
	testUID2 LifecycleUID = "zyxwvutsrqponmlkjihgfedcba23"
	testGen               = "0123456789abcdef0123456789abcdef"
)

func testCaller(t *testing.T) Lifecycle {
	t.Helper()
	p, err := NewPrincipal("local", "alice")
	if err != nil {
		t.Fatal(err)
	}
	return Lifecycle{Principal: p, UID: testUID}
}

func TestEndpointNameCodec(t *testing.T) {
	for _, tc := range []struct {
		name, token string
		reserved    bool
	}{
		{"manager", "manager", true},
		{"com.acme.deploy", "com_acme_deploy", false},
		{"a-b.c9", "a-b_c9", false},
	} {
		n, err := ParseEndpointName(tc.name)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n.Token() != tc.token || n.reserved() != tc.reserved {
			t.Errorf("%s: token %q reserved %v", tc.name, n.Token(), n.reserved())
		}
		back, err := ParseEndpointToken(n.Token())
		if err != nil || back != n {
			t.Errorf("%s: round trip gave %q, %v", tc.name, back, err)
		}
	}
	for _, bad := range []string{"", "a_b", "-a", "a-", "a..b", ".a", "A", "a.b-", "a b", strings.Repeat("a", 65)} {
		if _, err := ParseEndpointName(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseEndpointName(%q) = %v, want invalid", bad, err)
		}
	}
}

func TestValidateCommand(t *testing.T) {
	for _, ok := range []string{"describe", "spawn", "run-start", "a", strings.Repeat("x", 32)} {
		if err := ValidateCommand(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Spawn", "a_b", "a.b", "*", ">", strings.Repeat("x", 33)} {
		if err := ValidateCommand(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRequestSubjectRefusals(t *testing.T) {
	sp := Space("main")
	caller := testCaller(t)
	good := EndpointRoute{Address: AddressOne, Endpoint: "manager", Command: "ps", Caller: caller, Nonce: NewNonce()}
	bad := map[string]func(*EndpointRoute){
		"unknown addressing": func(r *EndpointRoute) { r.Address = "some" },
		"instance off inst":  func(r *EndpointRoute) { r.Instance = testUID2 },
		"inst without id":    func(r *EndpointRoute) { r.Address = AddressInst },
		"bad endpoint":       func(r *EndpointRoute) { r.Endpoint = "a_b" },
		"bad command":        func(r *EndpointRoute) { r.Command = "Ps" },
		"unknown mode":       func(r *EndpointRoute) { r.Mode = "mine"; r.Target.Owner = "local" },
		"self with target":   func(r *EndpointRoute) { r.Mode = ModeSelf; r.Target.Owner = "local" },
		"owner w/o target":   func(r *EndpointRoute) { r.Mode = ModeOwner },
		"owner with actor":   func(r *EndpointRoute) { r.Mode = ModeOwner; r.Target = EndpointTarget{Owner: "local", Actor: "bob"} },
		"handle partial": func(r *EndpointRoute) {
			r.Mode = ModeHandle
			r.Target = EndpointTarget{Owner: "local", Actor: "bob"}
		},
		"untargeted with target": func(r *EndpointRoute) { r.Target.Owner = "local" },
		"short nonce":            func(r *EndpointRoute) { r.Nonce = "abc" },
		"nonce with dot":         func(r *EndpointRoute) { r.Nonce = strings.Repeat("a", 22) + ".b" },
		"long nonce":             func(r *EndpointRoute) { r.Nonce = strings.Repeat("a", 65) },
		"bad generation":         func(r *EndpointRoute) { r.Generation = "0123456789ABCDEF0123456789abcdef" },
		"short generation":       func(r *EndpointRoute) { r.Generation = "abc" },
		"long actor": func(r *EndpointRoute) {
			r.Target = EndpointTarget{}
			r.Caller.Principal.actor = strings.Repeat("a", 65)
		},
		"caller owner is a word": func(r *EndpointRoute) { r.Caller.Principal.owner = "self" },
		"bad caller uid":         func(r *EndpointRoute) { r.Caller.UID = "short" },
	}
	for name, f := range bad {
		r := good
		f(&r)
		if s, err := sp.RequestSubject(r); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: built %q, %v", name, s, err)
		}
	}
	// A long space makes a subject exceed 1024 bytes even when every token is within its bound.
	long := Space(strings.Repeat("s", 64))
	r := good
	r.Address, r.Instance = AddressInst, testUID2
	r.Mode, r.Target = ModeHandle, EndpointTarget{Owner: "local", Actor: strings.Repeat("b", 64), UID: testUID2}
	r.Caller.Principal.actor = strings.Repeat("a", 64)
	r.Endpoint = EndpointName(strings.Repeat("e", 30) + "." + strings.Repeat("f", 33))
	r.Nonce = strings.Repeat("n", 64)
	r.Generation = testGen
	if s, err := long.RequestSubject(r); err != nil || len(s) > maxEndpointSubjectLength {
		t.Fatalf("the largest form: %d bytes, %v", len(s), err)
	}
}

func TestReplySubjectIsDerived(t *testing.T) {
	sp := Space("main")
	caller := testCaller(t)
	r := EndpointRoute{Address: AddressOne, Endpoint: "com.acme.deploy", Command: "ps", Caller: caller, Nonce: NewNonce()}
	got, err := sp.ReplySubject(r, testUID2, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := "cotal.main.ep.reply.com_acme_deploy." + string(testUID2) + ".7.local.alice." + string(testUID) + "." + r.Nonce
	if got != want {
		t.Fatalf("reply %q, want %q", got, want)
	}
	if n := strings.Count(got, ".") + 1; n != 11 {
		t.Errorf("reply has %d tokens, want 11", n)
	}
	if !SubjectMatches(sp.ReplyReadGrant(caller, ""), got) {
		t.Errorf("the caller's read grant misses %q", got)
	}
	from, err := sp.ParseReplySubject(got)
	if err != nil || from != (EndpointReplyFrom{Endpoint: "com.acme.deploy", Instance: testUID2, Epoch: 7}) {
		t.Errorf("ParseReplySubject = %+v, %v", from, err)
	}

	r.Generation = testGen
	got, err = sp.ReplySubject(r, testUID2, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "cotal.main.ep.v1.reply.") || strings.Count(got, ".")+1 != 13 {
		t.Errorf("versioned reply %q", got)
	}
	if !SubjectMatches(sp.ReplyReadGrant(caller, testGen), got) {
		t.Errorf("the versioned read grant misses %q", got)
	}
	if SubjectMatches(sp.ReplyReadGrant(caller, ""), got) {
		t.Errorf("the legacy read grant covers the versioned reply %q", got)
	}
	if from, err := sp.ParseReplySubject(got); err != nil || from.Epoch != 7 {
		t.Errorf("ParseReplySubject(v1) = %+v, %v", from, err)
	}
	for _, bad := range []string{"cotal.main.ep.reply.manager.short.1.a.b.c.d", "cotal.main.ep.reply.manager." + string(testUID2) + ".-1.a.b.c.d", "cotal.main.ep.reply.manager." + string(testUID2) + ".01.a.b.c.d"} {
		if _, err := sp.ParseReplySubject(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestNonce(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		n := NewNonce()
		if err := validateNonce(n); err != nil || seen[n] {
			t.Fatalf("nonce %q: %v (seen %v)", n, err, seen[n])
		}
		seen[n] = true
	}
}

func TestPlaneSubjects(t *testing.T) {
	sp := Space("main")
	caller := testCaller(t)
	ev, err := sp.EventSubject("manager", testUID2, 3, GoalProgressTopic(caller, "g1")...)
	if err != nil || ev != "cotal.main.epe.manager."+string(testUID2)+".3.goal.local.alice."+string(testUID)+".g1.progress" {
		t.Errorf("EventSubject = %q, %v", ev, err)
	}
	if !SubjectMatches(sp.GoalProgressFilter("manager", caller), ev) || !SubjectMatches("cotal.main.epe.manager."+string(testUID2)+".3.>", ev) {
		t.Errorf("filters miss %q", ev)
	}
	fact, err := sp.FactSubject("manager", GoalResultTopic(caller, "g1")...)
	if err != nil || fact != "cotal.main.epf.manager.goal.local.alice."+string(testUID)+".g1.result" {
		t.Errorf("FactSubject = %q, %v", fact, err)
	}
	for name, f := range map[string]func() error{
		"event bad uid":   func() error { _, err := sp.EventSubject("manager", "x", 1, "a"); return err },
		"event no topic":  func() error { _, err := sp.EventSubject("manager", testUID2, 1); return err },
		"event neg epoch": func() error { _, err := sp.EventSubject("manager", testUID2, -1, "a"); return err },
		"event wildcard":  func() error { _, err := sp.EventSubject("manager", testUID2, 1, "*"); return err },
		"fact bad name":   func() error { _, err := sp.FactSubject("Manager", "a"); return err },
	} {
		if err := f(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
}
