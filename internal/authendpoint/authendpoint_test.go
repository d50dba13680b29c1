package authendpoint

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gocotal/cotal/wire"
)

// TestContract pins the cluster's shape to the reference's ai.cotal.auth revision 1: one
// ephemeral, exact-mode retire-lifecycle of capability auth.admin, whose schemas are closed.
func TestContract(t *testing.T) {
	c, err := Contract()
	if err != nil {
		t.Fatal(err)
	}
	if c.Document.URN != "ai.cotal.auth" || c.Document.Revision != 1 || len(c.Document.Commands) != 1 {
		t.Fatalf("document: %+v", c.Document)
	}
	cmd := c.Document.Commands[0]
	if cmd.Name != "retire-lifecycle" || cmd.Class != wire.ClassEphemeral || !cmd.Targeted || len(cmd.Modes) != 1 || cmd.Modes[0] != wire.ModeExact || cmd.Capability != "auth.admin" {
		t.Fatalf("command: %+v", cmd)
	}
	// The digests are pinned: a schema edited by mistake changes them, and a caller that pinned
	// them would be refused. They are computed from the reference's schemas (RFC 8785).
	const (
		inputDigest   = "sha256:6d87fc4ef53998c80e6670eba5e0dfb44988421e25cc40fe5b57c69fd39b02db"
		outputDigest  = "sha256:1d166387571a054df00aab485bc3ae5daa80c32830212ee3701a9a3fcfaafbec"
		clusterDigest = "sha256:578c9006c67aa85704abdc6e745525b6d31f07be3b0f78d36ccb331b109f6147"
	)
	if cmd.InputDigest != inputDigest || cmd.OutputDigest != outputDigest || c.Closure.Digest != clusterDigest {
		t.Fatalf("digests: input %s, output %s, cluster %s", cmd.InputDigest, cmd.OutputDigest, c.Closure.Digest)
	}
	in := c.Schemas[cmd.Name].Input
	good := `{"opId":"0123456789abcdef0123456789","serveEndpoint":"manager","serveInstanceId":"abcdefghijklmnopqrstuvwxyz","serveEpoch":0}`
	if err := in.Validate(json.RawMessage(good)); err != nil {
		t.Fatalf("the reference's args refused: %v", err)
	}
	for name, bad := range map[string]string{
		"an unknown field":   strings.Replace(good, `"serveEpoch":0`, `"serveEpoch":0,"target":"x"`, 1),
		"a negative epoch":   strings.Replace(good, `"serveEpoch":0`, `"serveEpoch":-1`, 1),
		"no opId":            strings.Replace(good, `"opId":"0123456789abcdef0123456789",`, ``, 1),
		"an epoch as string": strings.Replace(good, `"serveEpoch":0`, `"serveEpoch":"0"`, 1),
	} {
		if err := in.Validate(json.RawMessage(bad)); err == nil {
			t.Errorf("args with %s accepted", name)
		}
	}
	out, _ := json.Marshal(Retired{Retired: true, LifecycleUID: "abcdefghijklmnopqrstuvwxyz", OpID: "x", EvictedPrincipals: []string{}})
	if err := c.Schemas[cmd.Name].Output.Validate(out); err != nil {
		t.Fatalf("the answer does not fit the output schema: %v", err)
	}
}
