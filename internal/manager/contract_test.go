package manager_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/gocotal/cotal/internal/manager"
)

// TestTheContractIsTheReferences: the manager's cluster document hashes to the digests the
// reference's revision 17 does (testdata/cluster_vector.json, computed from the reference's
// declarations by another RFC 8785 implementation): every command's input and output closure,
// in its order, the document and the closure a service record names.
func TestTheContractIsTheReferences(t *testing.T) {
	raw, err := os.ReadFile("testdata/cluster_vector.json")
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		URN            string `json:"urn"`
		Revision       int64  `json:"revision"`
		DocumentDigest string `json:"documentDigest"`
		ClosureDigest  string `json:"closureDigest"`
		Commands       []struct {
			Name         string `json:"name"`
			InputDigest  string `json:"inputDigest"`
			OutputDigest string `json:"outputDigest"`
		} `json:"commands"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	c, err := manager.Contract()
	if err != nil {
		t.Fatal(err)
	}
	if c.Document.URN != want.URN || c.Document.Revision != want.Revision || len(c.Document.Commands) != len(want.Commands) {
		t.Fatalf("the cluster is %s rev %d with %d commands; the reference's is %s rev %d with %d",
			c.Document.URN, c.Document.Revision, len(c.Document.Commands), want.URN, want.Revision, len(want.Commands))
	}
	for i, w := range want.Commands {
		got := c.Document.Commands[i]
		if got.Name != w.Name || got.InputDigest != w.InputDigest || got.OutputDigest != w.OutputDigest {
			t.Errorf("command %d is %s (%s, %s); the reference's is %s (%s, %s)", i, got.Name, got.InputDigest, got.OutputDigest, w.Name, w.InputDigest, w.OutputDigest)
		}
	}
	if c.Closure.Root != want.DocumentDigest || c.Closure.Digest != want.ClosureDigest {
		t.Errorf("the document hashes to %s, its closure to %s; the reference's to %s and %s", c.Closure.Root, c.Closure.Digest, want.DocumentDigest, want.ClosureDigest)
	}
}
