package authority

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const (
	testOwner      = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	testUID        = "abcdefghijklmnopqrstuvwxyz"
	testInstrument = "instrument0000000000000000"
	testGeneration = "0123456789abcdef0123456789abcdef"
	testConn       = "UCONNECTIONNKEYAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	// testRunActor is a workflow run's caller actor, derived from its run id by the host.
	testRunActor = "wf_0123456789ab"
)

func sampleGrant(t testing.TB) Grant {
	t.Helper()
	p, err := wire.NewPrincipal(testOwner, "alice")
	if err != nil {
		t.Fatal(err)
	}
	target, err := wire.ParseLifecycle("local.bob." + testUID)
	if err != nil {
		t.Fatal(err)
	}
	return Grant{
		Space: "main", Principal: p, ConnID: testConn, LifecycleUID: testUID,
		AllowPublish: []string{"team.backend", "general"}, AllowSubscribe: []string{"team.>", "general"},
		Role: "reviewer", Target: target, Channels: []string{"team.backend"},
		Session:    SessionRails{Endpoint: "search", SessionID: "sEsSiOn_iD-0123456789abcdef", Epoch: 3},
		Run:        RunReplay{RunID: "r-1", TakeoverID: "tk1"},
		Instrument: testInstrument,
	}
}

// TestPermissionsGolden pins every profile's rows, in order, to testdata/<profile>.golden. The
// golden files are the reviewed record of what each credential may do; `go test -update`
// rewrites them after a deliberate change.
func TestPermissionsGolden(t *testing.T) {
	for _, p := range Profiles {
		t.Run(string(p), func(t *testing.T) {
			g := sampleGrant(t)
			if p == ProfileAgent {
				g.Generation = testGeneration
			}
			remoteGrant(t, p, &g)
			perms, err := PermissionsFor(p, g)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", string(p)+".golden")
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
				t.Errorf("%s rows differ from %s:\n--- got\n%s--- want\n%s", p, path, got, want)
			}
		})
	}
}

// remoteGrant sets on g the coordinates a remote manager's host passes to mint p: the identity
// of the instance (sampleServe) the profile belongs to, and a run's caller, run and target.
func remoteGrant(t testing.TB, p Profile, g *Grant) {
	t.Helper()
	actors := meshwire.RemoteManagerActorsOf(testInstance)
	actor := ""
	switch p {
	case ProfileRemoteManager:
		actor = actors.Supervisor
	case ProfileEndpointServe, ProfileTransferReader, ProfileRetirementRequester:
		actor = actors.Serve
	case ProfileGoalWriter:
		actor = actors.GoalWriter
	case ProfileSessionLedger:
		actor = actors.SessionLedger
	case ProfileRunDriver, ProfileRunMediator, ProfileRunAdmitter:
		actor = testRunActor
	case ProfileManagerCaller:
		g.Serve = sampleServe() // a person's view: the principal is the person's own
		return
	default:
		return
	}
	var err error
	if g.Principal, err = wire.NewPrincipal(testOwner, actor); err != nil {
		t.Fatal(err)
	}
	if p != ProfileSessionLedger && p != ProfileRetirementRequester {
		g.Serve = sampleServe()
	}
	if p == ProfileRunAdmitter {
		g.Run.TakeoverID = "" // an admission outlives every takeover
	}
	if p == ProfileRetirementRequester {
		if g.Target, err = wire.ParseLifecycle(testOwner + ".bob." + testUID); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAgentRows(t *testing.T) {
	g := sampleGrant(t)
	perms, err := PermissionsFor(ProfileAgent, g)
	if err != nil {
		t.Fatal(err)
	}
	S := "cotal.main."
	me := testOwner + ".alice"
	must := []string{
		S + "chat." + me + ".team.backend",
		S + "inst.*.*." + me,
		S + "svc.*." + me,
		S + "live.manager." + me,
		S + "live.delivery." + me,
		"$JS.API.CONSUMER.CREATE.CHAT_main.chathist_" + testOwner + "-alice-" + testUID + "." + S + "chat.*.*.team.>",
		"$JS.API.CONSUMER.MSG.NEXT.DM_main.dm_" + testOwner + "-alice-" + testUID,
		"$KV.cotal_presence_main." + me,
		"$JS.ACK.TASK_main.svc_reviewer.>",
		"$JS.API.CONSUMER.CREATE.KV_cotal_presence_main.*.$KV.cotal_presence_main.>",
		"$JS.API.CONSUMER.CREATE.KV_cotal_channels_main.*.$KV.cotal_channels_main.>",
	}
	for _, row := range must {
		if !slices.Contains(perms.PubAllow, row) {
			t.Errorf("agent pub.allow lacks %s", row)
		}
	}
	if len(perms.PubDeny) != 9 {
		t.Errorf("agent pub.deny has %d rows, want the nine consumer-create denies", len(perms.PubDeny))
	}
	for _, row := range perms.PubAllow {
		if strings.Contains(row, "live.") && strings.Contains(row, "*") {
			t.Errorf("agent may not serve or answer a liveness plane: %s", row)
		}
	}
	wantSub := []string{"_INBOX_" + testConn + ".>", S + "ctl.delivery." + me + ".>", S + "live.manager." + me + ".>", S + "live.delivery." + me + ".>", S + "chat.*.*.team.>", S + "chat.*.*.general",
		S + "ep.reply.*.*.*." + me + "." + testUID + ".*"}
	if !slices.Equal(perms.SubAllow, wantSub) {
		t.Errorf("agent sub.allow = %q, want %q", perms.SubAllow, wantSub)
	}
	g.Role = ""
	perms, err = PermissionsFor(ProfileAgent, g)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range perms.PubAllow {
		if strings.Contains(row, "TASK_") {
			t.Errorf("an agent without a role holds %s", row)
		}
	}
}

// TestWatchCreatesArePinned is SPEC §13.9's grep test ("every filter or Direct-Get tail is fully
// qualified") over the bucket watch creates of the profiles that watch a bucket for a client: each
// names one consumer token and the bucket's own full filter tail, so no create without a filter in
// its subject, or with a filter outside the bucket, is admitted.
func TestWatchCreatesArePinned(t *testing.T) {
	tests := []struct {
		profile Profile
		buckets []string // the buckets it watches
	}{
		{ProfileAgent, []string{"cotal_presence_main", "cotal_channels_main"}},
		{ProfileObserver, []string{"cotal_presence_main", "cotal_channels_main", "cotal_membership_main"}},
		{ProfileAdmin, []string{"cotal_presence_main", "cotal_channels_main", "cotal_membership_main"}},
		{ProfileOperator, []string{"cotal_presence_main", "cotal_channels_main"}},
		{ProfileSupervisor, []string{"cotal_presence_main"}},
		{ProfileTeardown, []string{"cotal_presence_main", "cotal_channels_main"}},
		{ProfileDeployer, []string{"cotal_presence_main", "cotal_channels_main", "cotal_membership_main"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.profile), func(t *testing.T) {
			perms, err := PermissionsFor(tt.profile, sampleGrant(t))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, row := range perms.PubAllow {
				if strings.HasPrefix(row, "$JS.API.CONSUMER.CREATE.KV_") {
					got = append(got, row)
				}
			}
			var want []string
			for _, b := range tt.buckets {
				want = append(want, "$JS.API.CONSUMER.CREATE.KV_"+b+".*.$KV."+b+".>")
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s watch creates = %q, want %q", tt.profile, got, want)
			}
		})
	}
}

func TestPermissionsRefuseBadGrants(t *testing.T) {
	tests := []struct {
		name    string
		profile Profile
		edit    func(g *Grant)
		want    string
	}{
		{"wildcard allow-publish", ProfileAgent, func(g *Grant) { g.AllowPublish = []string{"team.>"} }, "allow-publish"},
		{"rewritable channel", ProfileAgent, func(g *Grant) { g.AllowSubscribe = []string{"foo/bar"} }, "allow-subscribe"},
		{"empty channel segment", ProfileAgent, func(g *Grant) { g.AllowSubscribe = []string{"a..b"} }, "allow-subscribe"},
		{"no lifecycle", ProfileAgent, func(g *Grant) { g.LifecycleUID = "" }, "lifecycleUid"},
		{"connId widening the inbox", ProfileObserver, func(g *Grant) { g.ConnID = "abcdefgh.>" }, "connId"},
		{"no principal", ProfileOperator, func(g *Grant) { g.Principal = wire.Principal{} }, "principal"},
		{"bad space", ProfileProbe, func(g *Grant) { g.Space = "a.b" }, "space"},
		{"blank role", ProfileAgent, func(g *Grant) { g.Role = " " }, "role"},
		{"deprovisioner without target", ProfileDeprovisioner, func(g *Grant) { g.Target = wire.Lifecycle{} }, "target"},
		{"deprovisioner wildcard channel", ProfileDeprovisioner, func(g *Grant) { g.Channels = []string{"team.*"} }, "channel"},
		{"unknown capability", ProfileAgent, func(g *Grant) { g.Capabilities = []string{"spawn", "root"} }, "capability"},
		{"capability on an operator", ProfileOperator, func(g *Grant) { g.Capabilities = []string{"spawn"} }, "capabilities"},
		{"control without instrument", ProfileControlAdmin, func(g *Grant) { g.Instrument = "" }, "lifecycleUid"},
		{"control with a wildcard instrument", ProfileControlAdmin, func(g *Grant) { g.Instrument = "*" }, "lifecycleUid"},
		{"serve on an agent", ProfileAgent, func(g *Grant) { g.Serve = sampleServe() }, "serve"},
		{"serve a wildcard command", ProfileSupervisor, func(g *Grant) { g.Serve = sampleServe(); g.Serve.Commands = []string{">"} }, "command"},
		{"serve a wildcard instance", ProfileSupervisor, func(g *Grant) { g.Serve = sampleServe(); g.Serve.Instance = "*" }, "lifecycleUid"},
		{"serve a negative epoch", ProfileSupervisor, func(g *Grant) { g.Serve = sampleServe(); g.Serve.Epoch = -1 }, "epoch"},
		{"serve a dotted endpoint token", ProfileSupervisor, func(g *Grant) { g.Serve = sampleServe(); g.Serve.Endpoint = "a_b" }, "endpoint"},
		{"goal writer without an endpoint", ProfileGoalWriter, func(g *Grant) {}, "serve"},
		{"goal writer of a wildcard endpoint", ProfileGoalWriter, func(g *Grant) { g.Serve = sampleServe(); g.Serve.Endpoint = "*" }, "endpoint"},
		{"session ledger with an instance", ProfileSessionLedger, func(g *Grant) { g.Serve = sampleServe() }, "serve"},
		{"transfer reader of another endpoint", ProfileTransferReader, func(g *Grant) { g.Serve = sampleServe(); g.Serve.Endpoint = "com.acme.x" }, "manager"},
		{"transfer reader of a wildcard instance", ProfileTransferReader, func(g *Grant) { g.Serve = sampleServe(); g.Serve.Instance = ">" }, "lifecycleUid"},
		{"retirement without a target", ProfileRetirementRequester, func(g *Grant) { g.Target = wire.Lifecycle{} }, "target"},
		{"retirement of another owner", ProfileRetirementRequester, func(g *Grant) {}, "own owner"},
		{"retirement without a caller uid", ProfileRetirementRequester, func(g *Grant) { g.LifecycleUID = "" }, "lifecycleUid"},
		{"run driver without a run", ProfileRunDriver, func(g *Grant) { g.Serve = sampleServe(); g.Run.RunID = "" }, "runId"},
		{"run driver of a wildcard run", ProfileRunDriver, func(g *Grant) { g.Serve = sampleServe(); g.Run.RunID = "*" }, "runId"},
		{"run mediator without a takeover", ProfileRunMediator, func(g *Grant) { g.Serve = sampleServe(); g.Run.TakeoverID = "" }, "takeoverId"},
		{"run mediator without a caller uid", ProfileRunMediator, func(g *Grant) { g.Serve = sampleServe(); g.LifecycleUID = "" }, "lifecycleUid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := sampleGrant(t)
			tt.edit(&g)
			_, err := PermissionsFor(tt.profile, g)
			if !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PermissionsFor = %v, want an ErrInvalid naming %q", err, tt.want)
			}
		})
	}
	if _, err := PermissionsFor("manager", sampleGrant(t)); err == nil || !strings.Contains(err.Error(), "profile") {
		t.Errorf("an unknown profile must be refused, got %v", err)
	}
}

func TestParseProfile(t *testing.T) {
	for _, p := range Profiles {
		if got, err := ParseProfile(string(p)); err != nil || got != p {
			t.Errorf("ParseProfile(%q) = %q, %v", p, got, err)
		}
	}
	if _, err := ParseProfile("root"); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("ParseProfile(root) = %v", err)
	}
}
