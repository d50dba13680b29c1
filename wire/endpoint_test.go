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
		if n.Token() != tc.token || n.Reserved() != tc.reserved || n.QueueGroup() != tc.token {
			t.Errorf("%s: token %q reserved %v", tc.name, n.Token(), n.Reserved())
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

// TestRequestSubjectForms builds every form of the grammar table of SPEC §13.2 on both rails,
// checks its token count, and parses it back to the same route.
func TestRequestSubjectForms(t *testing.T) {
	sp := Space("main")
	caller := testCaller(t)
	nonce := NewNonce()
	base := EndpointRoute{Address: AddressOne, Endpoint: "manager", Command: "spawn", Caller: caller, Nonce: nonce}
	with := func(f func(*EndpointRoute)) EndpointRoute { r := base; f(&r); return r }
	cases := []struct {
		name   string
		route  EndpointRoute
		tokens int
		want   string
	}{
		{"untargeted", base, 10, "cotal.main.ep.one.manager.spawn.local.alice." + string(testUID) + "." + nonce},
		{"self", with(func(r *EndpointRoute) { r.Mode = ModeSelf; r.Command = "stop" }), 11, ""},
		{"owner", with(func(r *EndpointRoute) { r.Mode = ModeOwner; r.Target.Owner = "local" }), 12,
			"cotal.main.ep.one.manager.spawn.owner.local.local.alice." + string(testUID) + "." + nonce},
		{"any", with(func(r *EndpointRoute) { r.Mode = ModeAny; r.Target.Owner = "u_abcdefghijklmnopqrstuvwxyz" }), 12, ""},
		{"child", with(func(r *EndpointRoute) { r.Mode = ModeChild; r.Target.Owner = "local" }), 12, ""},
		{"ledger", with(func(r *EndpointRoute) { r.Mode = ModeLedger; r.Target.Owner = "local" }), 12, ""},
		{"handle", with(func(r *EndpointRoute) {
			r.Mode = ModeHandle
			r.Target = EndpointTarget{Owner: "local", Actor: "bob", UID: testUID2}
		}), 14, ""},
		{"exact", with(func(r *EndpointRoute) {
			r.Mode = ModeExact
			r.Target = EndpointTarget{Owner: "local", Actor: "bob", UID: testUID2}
		}), 14, ""},
		{"scatter", with(func(r *EndpointRoute) { r.Address = AddressAll; r.Command = "ps" }), 10, ""},
		{"scatter owner", with(func(r *EndpointRoute) { r.Address = AddressAll; r.Mode = ModeOwner; r.Target.Owner = "local" }), 12, ""},
		{"instance", with(func(r *EndpointRoute) { r.Address = AddressInst; r.Instance = testUID2 }), 11,
			"cotal.main.ep.inst.manager." + string(testUID2) + ".spawn.local.alice." + string(testUID) + "." + nonce},
		{"instance handle", with(func(r *EndpointRoute) {
			r.Address = AddressInst
			r.Instance = testUID2
			r.Mode = ModeHandle
			r.Target = EndpointTarget{Owner: "local", Actor: "bob", UID: testUID2}
		}), 15, ""},
		{"reverse-DNS", with(func(r *EndpointRoute) { r.Endpoint = "com.acme.deploy" }), 10,
			"cotal.main.ep.one.com_acme_deploy.spawn.local.alice." + string(testUID) + "." + nonce},
	}
	for _, tc := range cases {
		for _, versioned := range []bool{false, true} {
			r := tc.route
			wantTokens := tc.tokens
			if versioned {
				r.Generation = testGen
				wantTokens += 2 // "v1" and the generation
			}
			subj, err := sp.RequestSubject(r)
			if err != nil {
				t.Fatalf("%s (v1 %v): %v", tc.name, versioned, err)
			}
			if n := strings.Count(subj, ".") + 1; n != wantTokens {
				t.Errorf("%s (v1 %v): %q has %d tokens, want %d", tc.name, versioned, subj, n, wantTokens)
			}
			if tc.want != "" && !versioned && subj != tc.want {
				t.Errorf("%s: %q, want %q", tc.name, subj, tc.want)
			}
			if versioned && !strings.HasPrefix(subj, "cotal.main.ep.v1.") || versioned && !strings.HasSuffix(subj, "."+testGen+"."+nonce) {
				t.Errorf("%s: versioned subject %q", tc.name, subj)
			}
			back, err := sp.ParseRequestSubject(subj)
			if err != nil {
				t.Fatalf("%s: parse %q: %v", tc.name, subj, err)
			}
			if back != r {
				t.Errorf("%s: parsed %+v, want %+v", tc.name, back, r)
			}
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

func TestParseRequestSubjectRefusesShapes(t *testing.T) {
	sp := Space("main")
	n := NewNonce()
	uid := string(testUID)
	for _, subj := range []string{
		"cotal.other.ep.one.manager.ps.local.alice." + uid + "." + n,           // another space
		"cotal.main.ep.one.manager.ps.local.alice." + uid,                      // no nonce
		"cotal.main.ep.one.manager.ps.local.alice." + uid + "." + n + ".x",     // one token too many
		"cotal.main.ep.one.manager.ps.mine.local.local.alice." + uid + "." + n, // unknown mode word read as the owner
		"cotal.main.ep.one.manager.ps.owner.local.alice." + uid + "." + n,      // owner mode, missing a token
		"cotal.main.ep.one.manager.ps.handle.local.bob.local.alice." + uid + "." + n,
		"cotal.main.ep.reply.manager." + uid + ".1.local.alice." + uid + "." + n,    // a reply is not a request
		"cotal.main.ep.inst.manager.ps.local.alice." + uid + "." + n,                // inst without an instance id
		"cotal.main.ep.one.com_acme__x.ps.local.alice." + uid + "." + n,             // empty label
		"cotal.main.ep.v1.one.manager.ps.local.alice." + uid + "." + n,              // v1 without a generation
		"cotal.main.ep.one.manager.ps.local.alice." + uid + "." + testGen + "." + n, // a generation off v1
		"cotal.main.ep.one.manager.ps.local.alice." + uid + "." + strings.Repeat("n", 1024),
		"cotal.main.chat.local.alice.x",
	} {
		if r, err := sp.ParseRequestSubject(subj); err == nil {
			t.Errorf("%q parsed as %+v", subj, r)
		}
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
	if !SubjectMatches(sp.ReplyReadGrant(caller, ""), got) || !SubjectMatches(sp.ReplyPublishGrant("com.acme.deploy", testUID2, 7, false), got) {
		t.Errorf("the caller's read grant or the responder's publish grant misses %q", got)
	}
	if SubjectMatches(sp.ReplyPublishGrant("com.acme.deploy", testUID2, 8, false), got) {
		t.Error("another epoch's grant covers the reply")
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
	if !SubjectMatches(sp.ReplyReadGrant(caller, testGen), got) || !SubjectMatches(sp.ReplyPublishGrant("com.acme.deploy", testUID2, 7, true), got) {
		t.Errorf("the versioned grants miss %q", got)
	}
	if SubjectMatches(sp.ReplyReadGrant(caller, ""), got) || SubjectMatches(sp.ReplyPublishGrant("com.acme.deploy", testUID2, 7, false), got) {
		t.Errorf("a legacy grant covers the versioned reply %q", got)
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

func TestServeFiltersCoverEveryForm(t *testing.T) {
	sp := Space("main")
	caller := testCaller(t)
	one, all, inst := sp.ServeFilters("manager", testUID2, "despawn", false)
	one1, all1, inst1 := sp.ServeFilters("manager", testUID2, "despawn", true)
	for _, r := range []EndpointRoute{
		{Address: AddressOne, Mode: ModeOwner, Target: EndpointTarget{Owner: "local"}},
		{Address: AddressAll},
		{Address: AddressInst, Instance: testUID2, Mode: ModeAny, Target: EndpointTarget{Owner: "local"}},
	} {
		r.Endpoint, r.Command, r.Caller, r.Nonce = "manager", "despawn", caller, NewNonce()
		legacy, _ := sp.RequestSubject(r)
		r.Generation = testGen
		versioned, _ := sp.RequestSubject(r)
		hits := 0
		for _, f := range []string{one, all, inst} {
			if SubjectMatches(f, legacy) {
				hits++
			}
			if SubjectMatches(f, versioned) {
				t.Errorf("legacy filter %q covers %q", f, versioned)
			}
		}
		for _, f := range []string{one1, all1, inst1} {
			if SubjectMatches(f, versioned) {
				hits++
			}
		}
		if hits != 2 {
			t.Errorf("%s: %d filters match, want one per rail", r.Address, hits)
		}
	}
	if _, _, other := sp.ServeFilters("manager", testUID, "despawn", false); SubjectMatches(other, "cotal.main.ep.inst.manager."+string(testUID2)+".despawn.local.alice."+string(testUID)+"."+NewNonce()) {
		t.Error("another instance's filter covers the request")
	}
}

func TestNonce(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		n := NewNonce()
		if err := ValidateNonce(n); err != nil || seen[n] {
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
	sub, err := sp.SubmissionSubject(EndpointRoute{Address: AddressOne, Endpoint: "com.acme.x", Command: "run", Mode: ModeOwner, Target: EndpointTarget{Owner: "local"}, Caller: caller})
	if err != nil || sub != "cotal.main.epj.com_acme_x.run.owner.local.local.alice."+string(testUID) {
		t.Errorf("SubmissionSubject = %q, %v", sub, err)
	}
	tm, err := sp.TimerSubject("manager", testUID2, 1, "t1", TimerArmed)
	if err != nil || tm != "cotal.main.ept.manager."+string(testUID2)+".1.t1.armed" {
		t.Errorf("TimerSubject = %q, %v", tm, err)
	}
	rec, err := sp.RecordWriteSubject("manager", testUID2, 1, "svc", "status")
	if err != nil || rec != "cotal.main.epr.manager."+string(testUID2)+".1.svc.status" {
		t.Errorf("RecordWriteSubject = %q, %v", rec, err)
	}
	for name, f := range map[string]func() error{
		"event bad uid":   func() error { _, err := sp.EventSubject("manager", "x", 1, "a"); return err },
		"event no topic":  func() error { _, err := sp.EventSubject("manager", testUID2, 1); return err },
		"event neg epoch": func() error { _, err := sp.EventSubject("manager", testUID2, -1, "a"); return err },
		"event wildcard":  func() error { _, err := sp.EventSubject("manager", testUID2, 1, "*"); return err },
		"fact bad name":   func() error { _, err := sp.FactSubject("Manager", "a"); return err },
		"timer phase":     func() error { _, err := sp.TimerSubject("manager", testUID2, 1, "t", "later"); return err },
		"timer id":        func() error { _, err := sp.TimerSubject("manager", testUID2, 1, "a.b", TimerFire); return err },
		"submission mode": func() error {
			_, err := sp.SubmissionSubject(EndpointRoute{Address: AddressOne, Endpoint: "m", Command: "c", Mode: ModeOwner, Caller: caller})
			return err
		},
	} {
		if err := f(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
}

func FuzzParseRequestSubject(f *testing.F) {
	sp := Space("main")
	n := "AAAAAAAAAAAAAAAAAAAAAA"
	uid := string(testUID)
	for _, s := range []string{
		"cotal.main.ep.one.manager.ps.local.alice." + uid + "." + n,
		"cotal.main.ep.v1.inst.manager." + uid + ".despawn.owner.local.local.alice." + uid + "." + testGen + "." + n,
		"cotal.main.ep.all.a_b.c.handle.local.b." + uid + ".local.alice." + uid + "." + n,
		"cotal.main.ep.one.x.y.self.local.a." + uid + "." + n,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subj string) {
		r, err := sp.ParseRequestSubject(subj)
		if err != nil {
			return
		}
		// Whatever parses rebuilds to the same subject: the grammar has one spelling per route.
		back, err := sp.RequestSubject(r)
		if err != nil || back != subj {
			t.Fatalf("%q parsed to %+v, rebuilt as %q, %v", subj, r, back, err)
		}
	})
}

// TestGoalBindGrant pins the bind grant's spelling, and shows it admits a real bind and nothing of
// its sibling result leaf.
func TestGoalBindGrant(t *testing.T) {
	s := Space("main")
	caller := testCaller(t)
	grant := s.GoalBindGrant(ManagerEndpoint)
	if want := "cotal.main.epf.manager.goal.*.*.*.*.bind"; grant != want {
		t.Errorf("goal bind grant = %q, want %q", grant, want)
	}
	bind, err := s.FactSubject(ManagerEndpoint, GoalBindTopic(caller, "g1")...)
	if err != nil {
		t.Fatal(err)
	}
	if !SubjectMatches(grant, bind) {
		t.Errorf("the bind grant does not admit %s", bind)
	}
	result, _ := s.FactSubject(ManagerEndpoint, GoalResultTopic(caller, "g1")...)
	if SubjectMatches(grant, result) {
		t.Errorf("the bind grant admits the result fact %s", result)
	}
}
