package authority

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/gocotal/cotal/wire"
)

const testInstance = "instance000000000000000000"

func sampleServe() *ServeRows {
	return &ServeRows{Endpoint: wire.ManagerEndpoint, Instance: testInstance, Epoch: 7, Commands: []string{"status", "ps", "spawn", "despawn", "stop"}}
}

// TestEndpointRowsGolden pins the rows the endpoint surface adds to testdata: an agent carrying
// the spawn capability, a supervisor serving the manager endpoint, and a manager caller with the
// spawn capability.
func TestEndpointRowsGolden(t *testing.T) {
	for _, tt := range []struct {
		name    string
		profile Profile
		edit    func(g *Grant)
	}{
		{"agent-spawn", ProfileAgent, func(g *Grant) { g.Capabilities, g.Generation = []string{CapabilitySpawn}, testGeneration }},
		{"supervisor-serve", ProfileSupervisor, func(g *Grant) { g.Serve = sampleServe() }},
		{"manager-caller-spawn", ProfileManagerCaller, func(g *Grant) { g.Serve, g.Capabilities = sampleServe(), []string{CapabilitySpawn} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := sampleGrant(t)
			tt.edit(&g)
			perms, err := PermissionsFor(tt.profile, g)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tt.name+".golden")
			got := perms.String()
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s rows differ from %s:\n--- got\n%s--- want\n%s", tt.name, path, got, want)
			}
		})
	}
}

// TestAgentEndpointRows checks the agent's baseline caller rows and that only the spawn
// capability adds the spawn family.
func TestAgentEndpointRows(t *testing.T) {
	S := "cotal.main."
	c := testOwner + ".alice." + testUID
	baseline := []string{
		S + "ep.one.*.describe." + c + ".*",
		"$JS.API.DIRECT.GET.EPC_main." + S + "epc.>",
		S + "ep.one.manager.stop.self." + c + ".*",
	}
	spawn := []string{
		S + "ep.one.manager.spawn." + c + ".*",
		S + "ep.one.manager.despawn.owner." + testOwner + "." + c + ".*",
		S + "ep.one.manager.attach.owner." + testOwner + "." + c + ".*",
		S + "ep.one.manager.define-persona." + c + ".*",
		S + "ep.one.manager.inspect." + c + ".*",
		S + "ep.one.manager.list-personas." + c + ".*",
		S + "ep.one.manager.show-persona." + c + ".*",
		S + "ep.inst.manager.*.cancel." + c + ".*",
	}
	progress := S + "epe.manager.*.*.goal." + c + ".>"
	g := sampleGrant(t)
	plain, err := PermissionsFor(ProfileAgent, g)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range baseline {
		if !slices.Contains(plain.PubAllow, row) {
			t.Errorf("the agent baseline lacks %s", row)
		}
	}
	for _, row := range append(spawn, progress) {
		if slices.Contains(plain.PubAllow, row) || slices.Contains(plain.SubAllow, row) {
			t.Errorf("an agent without the spawn capability holds %s", row)
		}
	}
	for _, row := range plain.PubAllow {
		if strings.Contains(row, ".ep.") && !strings.Contains(row, "."+c+".*") {
			t.Errorf("an ep row that does not pin the caller: %s", row)
		}
	}
	g.Capabilities = []string{CapabilitySpawn}
	with, err := PermissionsFor(ProfileAgent, g)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range append(baseline, spawn...) {
		if !slices.Contains(with.PubAllow, row) {
			t.Errorf("an agent with spawn lacks %s", row)
		}
	}
	if !slices.Contains(with.SubAllow, progress) {
		t.Errorf("an agent with spawn lacks the goal progress row %s", progress)
	}
	if len(with.PubAllow) != len(plain.PubAllow)+len(spawn) || len(with.SubAllow) != len(plain.SubAllow)+1 {
		t.Errorf("spawn added %d pub and %d sub rows, want %d and 1", len(with.PubAllow)-len(plain.PubAllow), len(with.SubAllow)-len(plain.SubAllow), len(spawn))
	}
}

// TestControlAdminRows checks the control instrument: every request form of the legacy rail
// pinned to its own instrument triple, no versioned row, its own reply rail and goal progress,
// and a registry watch pinned to svc.>.
func TestControlAdminRows(t *testing.T) {
	perms, err := PermissionsFor(ProfileControlAdmin, sampleGrant(t))
	if err != nil {
		t.Fatal(err)
	}
	S := "cotal.main."
	c := testOwner + ".alice." + testInstrument
	var requests []string
	for _, row := range perms.PubAllow {
		if strings.HasPrefix(row, S+"ep.") {
			requests = append(requests, row)
		}
	}
	want := []string{
		S + "ep.one.*.*." + c + ".*", S + "ep.one.*.*.*." + c + ".*", S + "ep.one.*.*.*.*." + c + ".*", S + "ep.one.*.*.*.*.*.*." + c + ".*",
		S + "ep.all.*.*." + c + ".*", S + "ep.all.*.*.*." + c + ".*", S + "ep.all.*.*.*.*." + c + ".*", S + "ep.all.*.*.*.*.*.*." + c + ".*",
		S + "ep.inst.*.*.*." + c + ".*", S + "ep.inst.*.*.*.*." + c + ".*", S + "ep.inst.*.*.*.*.*." + c + ".*", S + "ep.inst.*.*.*.*.*.*.*." + c + ".*",
	}
	if !slices.Equal(requests, want) {
		t.Errorf("control request rows =\n%s\nwant\n%s", strings.Join(requests, "\n"), strings.Join(want, "\n"))
	}
	// Every request form parses: a subject each row admits is a request of the instrument.
	uid, _ := wire.ParseLifecycleUID(testInstrument)
	p, _ := wire.NewPrincipal(testOwner, "alice")
	caller := wire.Lifecycle{Principal: p, UID: uid}
	for _, r := range []wire.EndpointRoute{
		{Address: wire.AddressOne, Endpoint: "manager", Command: "ps"},
		{Address: wire.AddressAll, Endpoint: "manager", Command: "ps"},
		{Address: wire.AddressInst, Endpoint: "manager", Instance: testInstance, Command: "ps"},
		{Address: wire.AddressOne, Endpoint: "manager", Command: "stop", Mode: wire.ModeSelf},
		{Address: wire.AddressOne, Endpoint: "manager", Command: "despawn", Mode: wire.ModeAny, Target: wire.EndpointTarget{Owner: "local"}},
		{Address: wire.AddressInst, Endpoint: "com.acme.x", Instance: testInstance, Command: "turn", Mode: wire.ModeHandle, Target: wire.EndpointTarget{Owner: "local", Actor: "bob", UID: testUID}},
	} {
		r.Caller, r.Nonce = caller, wire.NewNonce()
		subj, err := wire.Space("main").RequestSubject(r)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(want, func(row string) bool { return natsMatch(row, subj) }) {
			t.Errorf("no control row admits %s", subj)
		}
	}
	wantSub := []string{"_INBOX_" + testConn + ".>", S + "ep.reply.*.*.*." + c + ".*", S + "epe.*.*.*.goal." + c + ".>"}
	if !slices.Equal(perms.SubAllow, wantSub) {
		t.Errorf("control sub.allow = %q, want %q", perms.SubAllow, wantSub)
	}
	watch := "$JS.API.CONSUMER.CREATE.KV_cotal_records_main.*.$KV.cotal_records_main.svc.>"
	for _, row := range []string{watch, "$JS.API.STREAM.MSG.GET.KV_cotal_records_main", "$JS.API.STREAM.INFO.KV_cotal_records_main",
		"$JS.API.DIRECT.GET.EPC_main." + S + "epc.>"} {
		if !slices.Contains(perms.PubAllow, row) {
			t.Errorf("control pub.allow lacks %s", row)
		}
	}
	for _, row := range perms.PubAllow {
		if strings.Contains(row, ".ep.v1.") || strings.Contains(row, testUID) {
			t.Errorf("control holds %s: a versioned row or another lifecycle", row)
		}
		if strings.HasPrefix(row, "$JS.API.CONSUMER.CREATE.") && row != watch {
			t.Errorf("control holds an unpinned consumer create %s", row)
		}
	}
}

// natsMatch reports whether the NATS pattern p admits the concrete subject s.
func natsMatch(p, s string) bool {
	pt, st := strings.Split(p, "."), strings.Split(s, ".")
	for i, tok := range pt {
		if tok == ">" {
			return len(st) > i
		}
		if i >= len(st) || tok != "*" && tok != st[i] {
			return false
		}
	}
	return len(pt) == len(st)
}

// TestServeRows is SPEC §13.9's testable property 3: a serve credential has exactly one
// queue-qualified ep.one row per command (queue <endpoint>) on each rail, no plain ep.one row and
// no cross-command '>'; and its egress is pinned to its own instance and epoch.
func TestServeRows(t *testing.T) {
	g := sampleGrant(t)
	g.Serve = sampleServe()
	perms, err := PermissionsFor(ProfileSupervisor, g)
	if err != nil {
		t.Fatal(err)
	}
	base, err := PermissionsFor(ProfileSupervisor, sampleGrant(t))
	if err != nil {
		t.Fatal(err)
	}
	S := "cotal.main."
	cmds := append([]string{"describe"}, g.Serve.Commands...)
	for _, rail := range []string{"ep.", "ep.v1."} {
		for _, c := range cmds {
			for _, want := range []string{
				S + rail + "one.manager." + c + ".> manager",
				S + rail + "all.manager." + c + ".>",
				S + rail + "inst.manager." + testInstance + "." + c + ".>",
			} {
				if n := countOf(perms.SubAllow, want); n != 1 {
					t.Errorf("serve sub.allow holds %s %d times, want once", want, n)
				}
			}
		}
	}
	for _, row := range perms.SubAllow {
		subj, queue, queued := strings.Cut(row, " ")
		if strings.Contains(subj, ".one.") && (!queued || queue != "manager") {
			t.Errorf("a class-rail row without the endpoint's queue: %q", row)
		}
		if strings.Contains(subj, ".ep.") && strings.Count(subj, ".") < strings.Count(S+"ep.all.manager.x.>", ".") {
			t.Errorf("a cross-command row: %q", row)
		}
	}
	added := perms.SubAllow[len(base.SubAllow):]
	if len(added) != 6*len(cmds) {
		t.Errorf("serve added %d sub rows, want %d", len(added), 6*len(cmds))
	}
	for _, want := range []string{
		S + "ep.reply.manager." + testInstance + ".7.*.*.*.*",
		S + "ep.v1.reply.manager." + testInstance + ".7.*.*.*.*.*",
		S + "epe.manager." + testInstance + ".7.>",
		S + "epf.manager.goal.*.*.*.*.result",
		S + "epc.*",
		"$KV.cotal_records_main.svc.manager." + testInstance + ".spec",
		"$KV.cotal_records_main.svc.manager." + testInstance + ".status",
		"$JS.API.CONSUMER.CREATE.KV_cotal_records_main.*.$KV.cotal_records_main.svc.manager." + testInstance + ".>",
	} {
		if !slices.Contains(perms.PubAllow, want) {
			t.Errorf("serve pub.allow lacks %s", want)
		}
	}
	// A duplicate or an explicit describe adds no row.
	g.Serve.Commands = append(g.Serve.Commands, "ps", "describe")
	again, err := PermissionsFor(ProfileSupervisor, g)
	if err != nil || !slices.Equal(again.SubAllow, perms.SubAllow) {
		t.Errorf("duplicate commands changed the rows: %v", err)
	}
}

func countOf(rows []string, row string) int {
	n := 0
	for _, r := range rows {
		if r == row {
			n++
		}
	}
	return n
}

// TestServeCredentialSize mints the manager's serving credential: the commands this manager
// serves fit the size gate with room, and the reference's full manager contract (29 commands, on
// both rails) is refused loudly rather than dropped by the broker.
func TestServeCredentialSize(t *testing.T) {
	_, keys := testKeys(t)
	p, _ := wire.NewPrincipal("local", "cotal_manager")
	mint := func(cmds []string) (*Credential, error) {
		return keys.Mint(MintRequest{Profile: ProfileSupervisor, Grant: Grant{Principal: p, Serve: &ServeRows{
			Endpoint: wire.ManagerEndpoint, Instance: wire.NewLifecycleUID(), Epoch: 123, Commands: cmds}}})
	}
	served := []string{"status", "ps", "inspect", "spawn", "despawn", "stop"}
	cred, err := mint(served)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the %d-command serving credential is %d bytes of %d", len(served), len(cred.JWT), MaxJWTSize)
	reference := []string{"status", "ps", "inspect", "models", "resolve-cwd", "spawn", "despawn", "attach", "input", "turn",
		"turn-pending", "turn-yield", "stop", "run-start", "run-resume", "run-answer", "run-status", "run-ps", "define-persona",
		"list-personas", "show-persona", "purge", "launch", "resume-preserved", "commit-resume", "finalize-resume",
		"prepare-preservation", "commit-preservation", "abort-preservation"}
	fits := 0
	for n := len(served); n <= len(reference); n++ {
		if _, err := mint(reference[:n]); err != nil {
			var tooLarge *JWTTooLargeError
			if !errors.As(err, &tooLarge) {
				t.Fatalf("minting %d commands: %v", n, err)
			}
			break
		}
		fits = n
	}
	t.Logf("up to %d of the reference's %d manager commands fit one serving credential", fits, len(reference))
	if fits < 2*len(served) {
		t.Errorf("only %d commands fit; the manager's %d must fit with room", fits, len(served))
	}
}

// TestCapabilityTags: each capability is stamped once into the JWT as a tag, and an agent without
// any carries none.
func TestCapabilityTags(t *testing.T) {
	_, keys := testKeys(t)
	p, _ := wire.NewPrincipal("local", "alice")
	for _, tt := range []struct {
		caps []string
		want []string
	}{
		{nil, nil},
		{[]string{"spawn", "spawn"}, []string{"capability:spawn"}},
	} {
		cred, err := keys.Mint(MintRequest{Profile: ProfileAgent, Grant: Grant{Principal: p, LifecycleUID: wire.NewLifecycleUID(), Capabilities: tt.caps}})
		if err != nil {
			t.Fatal(err)
		}
		uc, err := jwt.DecodeUserClaims(cred.JWT)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tag := range uc.Tags {
			if strings.HasPrefix(tag, TagCapability) {
				got = append(got, tag)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("capabilities %q: tags %q, want %q", tt.caps, got, tt.want)
		}
	}
}

// TestControlInstrumentIsFreshPerMint: every control credential pins a lifecycle of its own.
func TestControlInstrumentIsFreshPerMint(t *testing.T) {
	_, keys := testKeys(t)
	p, _ := wire.NewPrincipal("local", "operator")
	seen := map[string]bool{}
	for range 3 {
		cred, err := keys.Mint(MintRequest{Profile: ProfileControlAdmin, Grant: Grant{Principal: p}})
		if err != nil {
			t.Fatal(err)
		}
		uc, err := jwt.DecodeUserClaims(cred.JWT)
		if err != nil {
			t.Fatal(err)
		}
		reply := uc.Permissions.Sub.Allow[1]
		if seen[reply] {
			t.Errorf("two control credentials share the reply rail %s", reply)
		}
		seen[reply] = true
		if time.Until(cred.Expires) > OneShotLifetime {
			t.Errorf("a control credential lives until %s, more than a one-shot", cred.Expires)
		}
	}
}
