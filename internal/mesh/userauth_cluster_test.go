package mesh_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/userauth"
)

// userAuthNodes starts three authority nodes of a cluster in user-auth mode with the development
// IdP, in this process: the first, then the two others from its authority bundle once it holds
// its callout keys.
func userAuthNodes(t *testing.T) ([]mesh.Dir, []*mesh.Mesh) {
	t.Helper()
	base := t.TempDir()
	ports := meshtest.FreePorts(t, 10)
	var routes []string
	for _, p := range ports[3:6] {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	idp := fmt.Sprintf("127.0.0.1:%d", ports[9])
	dirs := []mesh.Dir{{Path: filepath.Join(base, "a", ".cotal")}, {Path: filepath.Join(base, "b", ".cotal")}, {Path: filepath.Join(base, "c", ".cotal")}}
	ctx := t.Context()
	nodes := make([]*mesh.Mesh, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	up := func(i int, b *mesh.Bundle) {
		o := mesh.Options{Port: ports[i], Cluster: &mesh.ClusterOptions{Name: "team", Port: ports[3+i], Routes: routes,
			ServerName: fmt.Sprintf("node-%c", 'a'+i), Bundle: b},
			UserAuth: &mesh.UserAuthOptions{DevIdP: true, DevIdPAddr: idp, PublicAddr: fmt.Sprintf("127.0.0.1:%d", ports[6+i])}}
		wg.Go(func() { nodes[i], errs[i] = mesh.Up(ctx, dirs[i], o) })
	}
	up(0, nil)
	meshtest.Eventually(t, 30*time.Second, "the first node's callout keys", func() bool {
		_, err := os.Stat(filepath.Join(dirs[0].AuthDir(), "space.main.auth.xkey.nk"))
		return err == nil
	})
	path := filepath.Join(base, "authority.json")
	if err := dirs[0].WriteBundle(path, "team", nil, true); err != nil {
		t.Fatal(err)
	}
	b, err := mesh.ReadBundle(path)
	if err != nil {
		t.Fatal(err)
	}
	up(1, b)
	up(2, b)
	wg.Wait()
	meshtest.StopNodes(t, nodes)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	return dirs, nodes
}

// TestUserAuthClusterNodes: every authority node of a user-auth cluster serves the exchange, and
// each one's mesh document lists all three.
func TestUserAuthClusterNodes(t *testing.T) {
	meshtest.Long(t, "a cluster of several nodes")
	_, nodes := userAuthNodes(t)
	for _, n := range nodes {
		url := n.State().ExchangeURL
		meshtest.Eventually(t, 2*authservice.NodeBeat, url+"'s mesh document listing every node", func() bool {
			doc, err := authservice.FetchMeshDocument(t.Context(), userauth.NewHTTPClient(), url)
			return err == nil && len(doc.ExchangeURLs) == 3 && doc.ExchangeURLs[0] == url && len(doc.Servers) == 3
		})
	}
}

// TestUserAuthBundleChecked: the bundles of a mesh that served in user-auth mode carry its auth
// accounts, and the authority bundle its callout keys and user-auth secrets (version 3); another
// mesh's bundle stays at version 2 without them. A bundle whose callout keys are not the auth
// account it names, or a version 2 bundle carrying user-auth fields, is refused on read.
func TestUserAuthBundleChecked(t *testing.T) {
	base := t.TempDir()
	ua, plain := mesh.Dir{Path: filepath.Join(base, "ua")}, mesh.Dir{Path: filepath.Join(base, "plain")}
	kr, err := ua.OpenKeyring()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Callout("main"); err != nil { // as `cotal up --user-auth` makes them
		t.Fatal(err)
	}
	read := func(d mesh.Dir, name string, keys bool) *mesh.Bundle {
		t.Helper()
		path := filepath.Join(base, name)
		if err := d.WriteBundle(path, "team", nil, keys); err != nil {
			t.Fatal(err)
		}
		b, err := mesh.ReadBundle(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	auth := read(ua, "ua-authority.json", true)
	if auth.Version != mesh.BundleVersion || len(auth.AuthAccounts) != 1 || auth.Keys.Spaces["main"].Callout == nil || auth.UserAuth["main"] == nil {
		t.Fatalf("a user-auth mesh's authority bundle: %+v", auth)
	}
	if keyless := read(ua, "ua.json", false); len(keyless.AuthAccounts) != 1 || keyless.Keys != nil || keyless.UserAuth != nil {
		t.Fatalf("a user-auth mesh's bundle without keys carries %+v", keyless)
	}
	if p := read(plain, "plain.json", true); p.Version != mesh.BundleVersion-1 || p.AuthAccounts != nil || p.UserAuth != nil {
		t.Fatalf("another mesh's bundle: version %d, %d auth accounts", p.Version, len(p.AuthAccounts))
	}
	write := func(b *mesh.Bundle) string {
		raw, _ := json.Marshal(b)
		path := filepath.Join(base, "tampered.json")
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	other := read(plain, "plain.json", true)
	swapped := *auth
	keys := *auth.Keys
	keys.Spaces = maps.Clone(keys.Spaces)
	ss := keys.Spaces["main"]
	c := *ss.Callout
	c.Account = other.Keys.Spaces["main"].Signing // an account seed, of another account
	ss.Callout = &c
	keys.Spaces["main"] = ss
	swapped.Keys = &keys
	if _, err := mesh.ReadBundle(write(&swapped)); err == nil || !strings.Contains(err.Error(), "auth account") {
		t.Fatalf("callout keys of another auth account: %v", err)
	}
	old := *auth
	old.Version = mesh.BundleVersion - 1
	if _, err := mesh.ReadBundle(write(&old)); err == nil || !strings.Contains(err.Error(), "no user-auth") {
		t.Fatalf("a version 2 bundle with user-auth fields: %v", err)
	}
}
