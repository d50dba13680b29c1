package wire_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/gocotal/cotal/wire"
)

// TestControlReplyErr: a refusal decodes into a *ControlError that callers reach with errors.As
// through wrapping, whose Retry follows the code; a reply without a code (the reference daemon's)
// is a refusal not to be retried, and an ok reply is no error.
func TestControlReplyErr(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		code       string
		retry      bool
	}{
		{"retry", `{"ok":false,"error":"delivery: too many control requests are waiting; retry","code":"retry"}`, wire.ControlCodeRetry, true},
		{"refused", `{"ok":false,"error":"channel \"x\" is not within your read ACL","code":"refused"}`, wire.ControlCodeRefused, false},
		{"no code", `{"ok":false,"error":"sender mismatch - request rejected"}`, "", false},
		{"unknown code", `{"ok":false,"error":"later","code":"later"}`, "later", false},
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
			if ce.Op != wire.OpDurableJoin || ce.Code != tt.code || ce.Message != rep.Error || ce.Retry() != tt.retry {
				t.Errorf("got %+v (retry %t), want code %q, retry %t", ce, ce.Retry(), tt.code, tt.retry)
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
