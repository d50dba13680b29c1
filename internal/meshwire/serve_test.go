package meshwire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gocotal/cotal/wire"
)

const testGen = "0123456789abcdef0123456789abcdef"

// TestRequestSubjectsParseBack builds every form of the grammar table of SPEC §13.2 on both rails
// and parses it back to the same route.
func TestRequestSubjectsParseBack(t *testing.T) {
	sp := wire.Space("main")
	base := wire.EndpointRoute{Address: wire.AddressOne, Endpoint: "manager", Command: "spawn", Caller: testCaller(t), Nonce: wire.NewNonce()}
	with := func(f func(*wire.EndpointRoute)) wire.EndpointRoute { r := base; f(&r); return r }
	handle := wire.EndpointTarget{Owner: "local", Actor: "bob", UID: testUID2}
	routes := map[string]wire.EndpointRoute{
		"untargeted": base,
		"self":       with(func(r *wire.EndpointRoute) { r.Mode = wire.ModeSelf; r.Command = "stop" }),
		"owner":      with(func(r *wire.EndpointRoute) { r.Mode = wire.ModeOwner; r.Target.Owner = "local" }),
		"any":        with(func(r *wire.EndpointRoute) { r.Mode = wire.ModeAny; r.Target.Owner = "u_abcdefghijklmnopqrstuvwxyz" }),
		"child":      with(func(r *wire.EndpointRoute) { r.Mode = wire.ModeChild; r.Target.Owner = "local" }),
		"ledger":     with(func(r *wire.EndpointRoute) { r.Mode = wire.ModeLedger; r.Target.Owner = "local" }),
		"handle":     with(func(r *wire.EndpointRoute) { r.Mode = wire.ModeHandle; r.Target = handle }),
		"exact":      with(func(r *wire.EndpointRoute) { r.Mode = wire.ModeExact; r.Target = handle }),
		"scatter":    with(func(r *wire.EndpointRoute) { r.Address = wire.AddressAll; r.Command = "ps" }),
		"scatter owner": with(func(r *wire.EndpointRoute) {
			r.Address = wire.AddressAll
			r.Mode = wire.ModeOwner
			r.Target.Owner = "local"
		}),
		"instance": with(func(r *wire.EndpointRoute) { r.Address = wire.AddressInst; r.Instance = testUID2 }),
		"instance handle": with(func(r *wire.EndpointRoute) {
			r.Address, r.Instance, r.Mode, r.Target = wire.AddressInst, testUID2, wire.ModeHandle, handle
		}),
		"reverse-DNS": with(func(r *wire.EndpointRoute) { r.Endpoint = "com.acme.deploy" }),
	}
	for name, r := range routes {
		for _, gen := range []string{"", testGen} {
			r.Generation = gen
			subj, err := sp.RequestSubject(r)
			if err != nil {
				t.Fatalf("%s (generation %q): %v", name, gen, err)
			}
			back, err := ParseRequestSubject(sp, subj)
			if err != nil || back != r {
				t.Errorf("%s: %q parsed as %+v, %v; want %+v", name, subj, back, err, r)
			}
		}
	}
}

func TestParseRequestSubjectRefusesShapes(t *testing.T) {
	sp := wire.Space("main")
	n := wire.NewNonce()
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
		if r, err := ParseRequestSubject(sp, subj); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("%q parsed as %+v, %v", subj, r, err)
		}
	}
}

func FuzzParseRequestSubject(f *testing.F) {
	sp := wire.Space("main")
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
		r, err := ParseRequestSubject(sp, subj)
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

func TestServeFiltersCoverEveryForm(t *testing.T) {
	sp := wire.Space("main")
	caller := testCaller(t)
	one, all, inst := ServeFilters(sp, "manager", testUID2, "despawn", false)
	one1, all1, inst1 := ServeFilters(sp, "manager", testUID2, "despawn", true)
	for _, r := range []wire.EndpointRoute{
		{Address: wire.AddressOne, Mode: wire.ModeOwner, Target: wire.EndpointTarget{Owner: "local"}},
		{Address: wire.AddressAll},
		{Address: wire.AddressInst, Instance: testUID2, Mode: wire.ModeAny, Target: wire.EndpointTarget{Owner: "local"}},
	} {
		r.Endpoint, r.Command, r.Caller, r.Nonce = "manager", "despawn", caller, wire.NewNonce()
		legacy, _ := sp.RequestSubject(r)
		r.Generation = testGen
		versioned, _ := sp.RequestSubject(r)
		hits := 0
		for _, f := range []string{one, all, inst} {
			if wire.SubjectMatches(f, legacy) {
				hits++
			}
			if wire.SubjectMatches(f, versioned) {
				t.Errorf("legacy filter %q covers %q", f, versioned)
			}
		}
		for _, f := range []string{one1, all1, inst1} {
			if wire.SubjectMatches(f, versioned) {
				hits++
			}
		}
		if hits != 2 {
			t.Errorf("%s: %d filters match, want one per rail", r.Address, hits)
		}
	}
	if _, _, other := ServeFilters(sp, "manager", testUID, "despawn", false); wire.SubjectMatches(other, "cotal.main.ep.inst.manager."+string(testUID2)+".despawn.local.alice."+string(testUID)+"."+wire.NewNonce()) {
		t.Error("another instance's filter covers the request")
	}
	if QueueGroup("com.acme.deploy") != "com_acme_deploy" {
		t.Errorf("queue group %q", QueueGroup("com.acme.deploy"))
	}
}

// TestReplyPublishGrant: an instance's reply row admits the replies it derives at its own epoch on
// its own rail, and nothing at another epoch or on the other rail.
func TestReplyPublishGrant(t *testing.T) {
	sp := wire.Space("main")
	r := wire.EndpointRoute{Address: wire.AddressOne, Endpoint: "com.acme.deploy", Command: "ps", Caller: testCaller(t), Nonce: wire.NewNonce()}
	legacy, err := sp.ReplySubject(r, testUID2, 7)
	if err != nil {
		t.Fatal(err)
	}
	r.Generation = testGen
	versioned, err := sp.ReplySubject(r, testUID2, 7)
	if err != nil {
		t.Fatal(err)
	}
	grant := func(epoch int64, v1 bool) string {
		return ReplyPublishGrant(sp, "com.acme.deploy", testUID2, epoch, v1)
	}
	if want := "cotal.main.ep.reply.com_acme_deploy." + string(testUID2) + ".7.*.*.*.*"; grant(7, false) != want {
		t.Errorf("legacy row %q, want %q", grant(7, false), want)
	}
	for _, tc := range []struct {
		reply string
		row   string
		want  bool
	}{
		{legacy, grant(7, false), true},
		{versioned, grant(7, true), true},
		{legacy, grant(8, false), false},
		{versioned, grant(7, false), false},
		{legacy, grant(7, true), false},
	} {
		if got := wire.SubjectMatches(tc.row, tc.reply); got != tc.want {
			t.Errorf("%q admits %q: %v, want %v", tc.row, tc.reply, got, tc.want)
		}
	}
}

// TestRequestGrant: a caller's request row admits its own requests of the route's arity and none
// of another caller's.
func TestRequestGrant(t *testing.T) {
	sp := wire.Space("main")
	caller := testCaller(t)
	r := wire.EndpointRoute{Address: wire.AddressOne, Endpoint: "manager", Command: "spawn", Caller: caller, Nonce: wire.NewNonce()}
	own, _ := sp.RequestSubject(r)
	row := RequestGrant(sp, caller, "", wire.AddressOne, "manager", "*")
	if want := "cotal.main.ep.one.manager.*.local.alice." + string(testUID) + ".*"; row != want {
		t.Errorf("row %q, want %q", row, want)
	}
	if !wire.SubjectMatches(row, own) {
		t.Errorf("%q does not admit the caller's own %q", row, own)
	}
	r.Mode, r.Target.Owner = wire.ModeOwner, "local"
	if targeted, _ := sp.RequestSubject(r); wire.SubjectMatches(row, targeted) {
		t.Errorf("%q admits the longer %q", row, targeted)
	}
	r.Generation = testGen
	v1row := RequestGrant(sp, caller, testGen, wire.AddressOne, "manager", "spawn", string(wire.ModeOwner), "*")
	if versioned, _ := sp.RequestSubject(r); !wire.SubjectMatches(v1row, versioned) || wire.SubjectMatches(row, versioned) {
		t.Errorf("the rows split the rails wrongly for %q", versioned)
	}
}

func TestReplyHelpers(t *testing.T) {
	ok := OKReply("r1", nil)
	b, err := json.Marshal(ok)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"v":1,"id":"r1","ok":true,"data":null}` {
		t.Errorf("OKReply(nil) encodes as %s", b)
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("OKReply(nil).Validate() = %v", err)
	}
	e := wire.NewEndpointError(wire.CodeExpired, wire.OutcomeNotExecuted, "epoch %d is gone", 3).WithDetail(wire.DetailBindRefused)
	b, err = json.Marshal(ErrorReply("r1", e))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"v":1,"id":"r1","ok":false,"error":{"code":"expired","message":"epoch 3 is gone",` +
		`"details":[{"kind":"ai.cotal.ep.bind-refused"}],"outcome":"not-executed"}}`
	if string(b) != want {
		t.Errorf("ErrorReply encodes as\n %s\nwant\n %s", b, want)
	}
}

func TestRequireDigests(t *testing.T) {
	full := wire.EndpointRequest{Op: wire.EndpointOp{Endpoint: "manager", Command: "spawn",
		InputDigest: "sha256:" + strings.Repeat("a", 64), OutputDigest: "sha256:" + strings.Repeat("b", 64)}}
	if err := RequireDigests(&full); err != nil {
		t.Errorf("RequireDigests with both digests = %v", err)
	}
	for field, edit := range map[string]func(*wire.EndpointRequest){
		"op.inputDigest":  func(r *wire.EndpointRequest) { r.Op.InputDigest = "" },
		"op.outputDigest": func(r *wire.EndpointRequest) { r.Op.OutputDigest = "" },
	} {
		r := full
		edit(&r)
		var e *wire.EndpointError
		if err := RequireDigests(&r); !errors.As(err, &e) || e.Code != wire.CodeContractMismatch || e.Outcome != wire.OutcomeNotExecuted || !strings.Contains(e.Message, field) {
			t.Errorf("without %s: %v", field, err)
		}
	}
}

func TestNewGeneration(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		g := NewGeneration()
		if err := wire.ValidateGeneration(g); err != nil || seen[g] {
			t.Fatalf("generation %q: %v (seen %v)", g, err, seen[g])
		}
		seen[g] = true
	}
}

// TestGoalGrants pins the goal rows' spelling, and shows each admits its own leaf of any caller's
// goal and nothing of its sibling's.
func TestGoalGrants(t *testing.T) {
	s := wire.Space("main")
	caller := testCaller(t)
	bind, _ := s.FactSubject(wire.ManagerEndpoint, wire.GoalBindTopic(caller, "g1")...)
	result, _ := s.FactSubject(wire.ManagerEndpoint, wire.GoalResultTopic(caller, "g1")...)
	for _, tc := range []struct{ grant, want, admits, refuses string }{
		{GoalBindGrant(s, wire.ManagerEndpoint), "cotal.main.epf.manager.goal.*.*.*.*.bind", bind, result},
		{GoalResultGrant(s, wire.ManagerEndpoint), "cotal.main.epf.manager.goal.*.*.*.*.result", result, bind},
	} {
		if tc.grant != tc.want {
			t.Errorf("grant %q, want %q", tc.grant, tc.want)
		}
		if !wire.SubjectMatches(tc.grant, tc.admits) || wire.SubjectMatches(tc.grant, tc.refuses) {
			t.Errorf("%q admits %s: %v, %s: %v", tc.grant, tc.admits, wire.SubjectMatches(tc.grant, tc.admits), tc.refuses, wire.SubjectMatches(tc.grant, tc.refuses))
		}
	}
}
