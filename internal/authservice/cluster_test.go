package authservice_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/internal/userauth"
)

// TestSecretsTravel: an authority node's user-auth secrets, exported into another node's
// directory, are the same files; a directory holding other secrets refuses them, and a broken
// export writes nothing.
func TestSecretsTravel(t *testing.T) {
	t.Parallel()
	from := filepath.Join(t.TempDir(), "from")
	s, err := authservice.ExportSecrets(from, "main")
	if err != nil {
		t.Fatal(err)
	}
	s.IdP = &authservice.IdP{Issuer: "http://127.0.0.1:4780", ClientID: "cotal-cli"}
	to := filepath.Join(t.TempDir(), "to")
	if err := authservice.ImportSecrets(to, "main", s); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"owner-secret.json", "issuer.json", "dev-idp-key.json"} {
		a, _ := os.ReadFile(filepath.Join(from, name))
		b, err := os.ReadFile(filepath.Join(to, name))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs after the import: %v", name, err)
		}
	}
	if idp, err := authservice.PinnedIdP(to); err != nil || idp != *s.IdP {
		t.Errorf("the imported pin: %+v %v", idp, err)
	}
	if err := authservice.ImportSecrets(to, "main", s); err != nil {
		t.Errorf("importing the same secrets again: %v", err)
	}
	other, err := authservice.ExportSecrets(filepath.Join(t.TempDir(), "other"), "main")
	if err != nil {
		t.Fatal(err)
	}
	if err := authservice.ImportSecrets(to, "main", other); err == nil || !strings.Contains(err.Error(), "owner-secret.json") {
		t.Errorf("importing another mesh's secrets: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	broken := *s
	broken.Issuer = []byte(`{"ver":1,"keys":[]}`)
	if err := authservice.ImportSecrets(empty, "main", &broken); err == nil || !strings.Contains(err.Error(), "issuer.json") {
		t.Errorf("importing a broken issuer: %v", err)
	}
	if _, err := os.Stat(empty); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused import left %s behind", empty)
	}
	// Checking and importing leave the secrets as they were, though their bytes end in spaces
	// whose room a newline could take: one bundle's secrets are read by every node started from
	// it.
	spaced := *s
	spaced.OwnerSecret = append(bytes.TrimSpace(slices.Clone(s.OwnerSecret)), "  "...)
	before := slices.Clone(spaced.OwnerSecret)
	if err := authservice.CheckSecrets(to, "main", &spaced); err != nil {
		t.Fatal(err)
	}
	if err := authservice.ImportSecrets(to, "main", &spaced); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(spaced.OwnerSecret, before) {
		t.Errorf("the owner secret changed under the check: %q, was %q", spaced.OwnerSecret, before)
	}
}

// TestNodeRecords: the auth service records itself in the user-auth store, and its mesh document
// lists every node recorded there: another node's exchange and broker come after its own.
func TestNodeRecords(t *testing.T) {
	t.Parallel()
	r := start(t)
	ctx := t.Context()
	nodes, err := authservice.ReadNodes(ctx, r.kv)
	if err != nil || len(nodes) != 1 || nodes[0].ExchangeURL != r.ready.PublicURL || !nodes[0].Callout || !nodes[0].Fresh(time.Now()) {
		t.Fatalf("the node records: %+v %v", nodes, err)
	}
	if r.doc.ExchangeURLs[0] != r.ready.PublicURL || len(r.doc.Servers) != 1 {
		t.Fatalf("the mesh document of one node: %+v", r.doc)
	}
	// Another node records itself; the next beat lists it.
	other := authservice.NodeRecord{Node: "node-b", Server: "nats://127.0.0.1:1", ExchangeURL: "http://127.0.0.1:2",
		ManagerAuthorityURL: "http://127.0.0.1:2/manager-service-authority", Callout: true, SeenAt: time.Now().UTC()}
	putNode(t, r, other)
	meshtest.Eventually(t, 2*authservice.NodeBeat, "the other node in the mesh document", func() bool {
		doc, err := authservice.FetchMeshDocument(ctx, userauth.NewHTTPClient(), r.ready.PublicURL)
		return err == nil && len(doc.ExchangeURLs) == 2 && doc.ExchangeURLs[0] == r.ready.PublicURL &&
			doc.ExchangeURLs[1] == other.ExchangeURL && doc.Servers[1] == other.Server && doc.ManagerAuthorityURLs[1] == other.ManagerAuthorityURL
	})
	// A node silent for a day is forgotten, and a record that is not one is passed over.
	other.SeenAt = time.Now().Add(-authservice.NodeForgotten - time.Minute)
	putNode(t, r, other)
	if _, err := r.kv.Put(ctx, "node.node-c", []byte(`{"node":"node-d"}`)); err != nil {
		t.Fatal(err)
	}
	if nodes, err := authservice.ReadNodes(ctx, r.kv); err != nil || len(nodes) != 1 || nodes[0].ExchangeURL != r.ready.PublicURL {
		t.Fatalf("the records with a forgotten and a broken one: %+v %v", nodes, err)
	}
}

func putNode(t *testing.T, r *rig, n authservice.NodeRecord) {
	t.Helper()
	raw, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.kv.Put(t.Context(), "node."+n.Node, raw); err != nil {
		t.Fatal(err)
	}
}

// TestForgetNode: a node taken out of the cluster is forgotten at once; a running one, a name
// with no record and a name that cannot be a node's are refused.
func TestForgetNode(t *testing.T) {
	t.Parallel()
	r := start(t)
	ctx := t.Context()
	gone := authservice.NodeRecord{Node: "node-b", Server: "nats://127.0.0.1:1", ExchangeURL: "http://127.0.0.1:2",
		ManagerAuthorityURL: "http://127.0.0.1:2/manager-service-authority", SeenAt: time.Now().Add(-time.Hour).UTC()}
	putNode(t, r, gone)
	if nodes, err := authservice.ReadNodes(ctx, r.kv); err != nil || len(nodes) != 2 {
		t.Fatalf("before forgetting: %+v %v", nodes, err)
	}
	if err := authservice.ForgetNode(ctx, r.kv, "node-b", time.Now()); err != nil {
		t.Fatal(err)
	}
	nodes, err := authservice.ReadNodes(ctx, r.kv)
	if err != nil || len(nodes) != 1 || nodes[0].Node == "node-b" {
		t.Fatalf("after forgetting node-b: %+v %v", nodes, err)
	}
	if err := authservice.ForgetNode(ctx, r.kv, nodes[0].Node, time.Now()); !errors.Is(err, authservice.ErrNodeRunning) {
		t.Errorf("forgetting the running node: %v, want ErrNodeRunning", err)
	}
	for _, name := range []string{"node-b", "", "node.b", "node-*"} {
		if err := authservice.ForgetNode(ctx, r.kv, name, time.Now()); err == nil || errors.Is(err, authservice.ErrNodeRunning) {
			t.Errorf("forgetting %q: %v, want an error naming it", name, err)
		}
	}
}
