package broker_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/gocotal/cotal/internal/broker"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestRenderCluster: a cluster node's config names the cluster, authorizes routes, carries the
// route credentials in its seed routes and uses the distributed resolver; bad cluster input is
// refused by name.
func TestRenderCluster(t *testing.T) {
	dir := t.TempDir()
	_, tr := trustFor(t, dir, "main")
	cl := &broker.ClusterConfig{Name: "team", Port: 6222, Routes: []string{"nats://10.0.0.2:6222", "nats://10.0.0.3:6222"}, User: "route", Password: "s3cret"}
	conf, err := broker.RenderAuth(broker.Config{ServerName: "n1", StoreDir: filepath.Join(dir, "js"), Cluster: cl}, tr)
	if err != nil {
		t.Fatal(err)
	}
	s := string(conf)
	for _, want := range []string{`name: "team"`, "port: 6222", `user: "route"`, `"nats://route:s3cret@10.0.0.2:6222"`,
		"type: full", `dir: "` + filepath.Join(dir, "jwt") + `"`, "allow_delete: false", "resolver_preload: {"} {
		if !strings.Contains(s, want) {
			t.Errorf("config lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "resolver: MEMORY") {
		t.Error("a cluster node runs the MEMORY resolver")
	}
	for name, c := range map[string]broker.Config{
		"no server name":  {StoreDir: "/x", Cluster: cl},
		"no route secret": {ServerName: "n", StoreDir: "/x", Cluster: &broker.ClusterConfig{Name: "team", Port: 6222}},
		"bad route":       {ServerName: "n", StoreDir: "/x", Cluster: &broker.ClusterConfig{Name: "team", Port: 6222, User: "u", Password: "p", Routes: []string{"http://x:1"}}},
		"route with user": {ServerName: "n", StoreDir: "/x", Cluster: &broker.ClusterConfig{Name: "team", Port: 6222, User: "u", Password: "p", Routes: []string{"nats://a:b@x:1"}}},
		"bad name":        {ServerName: "n", StoreDir: "/x", Cluster: &broker.ClusterConfig{Name: "a.b", Port: 6222, User: "u", Password: "p"}},
		"bad port":        {ServerName: "n", StoreDir: "/x", Cluster: &broker.ClusterConfig{Name: "team", User: "u", Password: "p"}},
	} {
		if _, err := broker.RenderAuth(c, tr); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
	if _, err := broker.RenderOpen(broker.Config{StoreDir: "/x", Cluster: cl}); err == nil {
		t.Error("an open broker joined a cluster")
	}
}

// TestClusterSharesAccounts starts three nodes from rendered configs: they route to each other,
// elect a JetStream meta leader over all three, and an account update pushed on the first (a
// revocation) is stored by the distributed resolver of the third.
func TestClusterSharesAccounts(t *testing.T) {
	dir := t.TempDir()
	kr, tr := trustFor(t, filepath.Join(dir, "auth"), "main")
	ports := meshtest.FreePorts(t, 3)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	var nodes []*broker.Server
	var stores []string
	for i, p := range ports {
		store := filepath.Join(dir, fmt.Sprintf("n%d", i), "js")
		stores = append(stores, store)
		conf, err := broker.RenderAuth(broker.Config{ServerName: fmt.Sprintf("n%d", i), StoreDir: store,
			Cluster: &broker.ClusterConfig{Name: "team", Port: p, Routes: routes, User: "route", Password: "s3cret"}}, tr)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, startFrom(t, conf))
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		for st := n.Cluster(); st.Routes < 2 || st.MetaLeader == "" || st.Size != 3; st = n.Cluster() {
			if time.Now().After(deadline) {
				t.Fatalf("the cluster did not form: %+v", st)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	sk, err := kr.Space("main")
	if err != nil {
		t.Fatal(err)
	}
	acct := sk.AccountPublicKey()
	user, _ := nkeys.CreateUser()
	revoked, _ := user.PublicKey()
	sys, err := kr.MintSystemUser("test-revoker", []string{jsapi.AccountClaimsUpdate(acct)}, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := dial.As(t.Context(), nodes[0].ClientURL(), sys)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	push := func(token string) error {
		rep, err := nc.Request(jsapi.AccountClaimsUpdate(acct), []byte(token), 5*time.Second)
		if err != nil {
			return err
		}
		var res struct{ Error *struct{ Description string } }
		if json.Unmarshal(rep.Data, &res) != nil || res.Error != nil {
			return fmt.Errorf("the push was refused: %s", rep.Data)
		}
		return nil
	}
	if err := kr.RevokeAndPush(t.Context(), wire.Space("main"), []string{revoked}, push); err != nil {
		t.Fatal(err)
	}
	// A push made before the third node's interest reached the first is not lost for good (the
	// resolvers reconcile every interval); the test pushes again rather than wait for that. The
	// stored list names the key with the time it was revoked (IsRevoked at a later time would
	// say no once that second has passed).
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if stored := storedAccount(t, broker.ResolverDir(stores[2]), acct); stored != nil && stored.Revocations[revoked] != 0 {
			return
		}
		if err := kr.RevokeAndPush(t.Context(), wire.Space("main"), nil, push); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the third node's resolver never stored the revocation pushed on the first")
}

// storedAccount reads account acct's JWT from a resolver directory; nil when it is not there.
func storedAccount(t *testing.T, dir, acct string) *jwt.AccountClaims {
	t.Helper()
	var found *jwt.AccountClaims
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(path) != acct+".jwt" {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		if ac, err := jwt.DecodeAccountClaims(string(raw)); err == nil {
			found = ac
		}
		return nil
	})
	return found
}
