package wire_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/gocotal/cotal/wire"
)

// TestControlReplyErr: a refusal decodes into a *ControlError that callers reach with errors.As
// through wrapping, carrying the code; a reply without a code (the reference daemon's) is a refusal
// with none, and an ok reply is no error.
func TestControlReplyErr(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		code       string
	}{
		{"retry", `{"ok":false,"error":"delivery: too many control requests are waiting; retry","code":"retry"}`, wire.ControlCodeRetry},
		{"refused", `{"ok":false,"error":"channel \"x\" is not within your read ACL","code":"refused"}`, wire.ControlCodeRefused},
		{"no code", `{"ok":false,"error":"sender mismatch - request rejected"}`, ""},
		{"unknown code", `{"ok":false,"error":"later","code":"later"}`, "later"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var rep wire.ControlReply
			if err := json.Unmarshal([]byte(tt.body), &rep); err != nil {
				t.Fatal(err)
			}
			err := fmt.Errorf("join x: %w", rep.Err(wire.OpDurableJoin))
			var ce *wire.ControlError
			if !errors.As(err, &ce) {
				t.Fatalf("%v is not a *ControlError", err)
			}
			if ce.Op != wire.OpDurableJoin || ce.Code != tt.code || ce.Message != rep.Error {
				t.Errorf("got %+v, want code %q", ce, tt.code)
			}
		})
	}
	ok := wire.ControlReply{OK: true, Data: json.RawMessage(`{}`)}
	if err := ok.Err(wire.OpDurableLeave); err != nil {
		t.Errorf("an ok reply: %v", err)
	}
	// The code rides beside the reference's three fields, and only on a refusal.
	if raw, _ := json.Marshal(ok); string(raw) != `{"ok":true,"data":{}}` {
		t.Errorf("ok reply encodes as %s", raw)
	}
	raw, _ := json.Marshal(wire.ControlReply{Error: "busy", Code: wire.ControlCodeRetry})
	if string(raw) != `{"ok":false,"error":"busy","code":"retry"}` {
		t.Errorf("refusal encodes as %s", raw)
	}
}
