package meshwire

import (
	"testing"

	"github.com/gocotal/cotal/wire"
)

// TestQuarantineNotice: a notice is a valid DM from the warden that reads back as what it says,
// and the same part from anyone else is no notice.
func TestQuarantineNotice(t *testing.T) {
	to := testCaller(t).Principal
	q := Quarantined{ID: "m1", Subject: "cotal.main.chat.local.alice.general", Stream: "CHAT_main", Seq: 7, Reason: "sender-mismatch", Detail: "from.id"}
	m, err := QuarantineNotice("main", to, q)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := wire.EncodeMessage(m, 0)
	if err != nil {
		t.Fatalf("the notice is not a valid message: %v", err)
	}
	dl, err := wire.Guard(wire.Space("main").DMSubject(to, WardenPrincipal()), raw)
	if err != nil {
		t.Fatalf("the guard refuses the notice: %v", err)
	}
	got, ok := ParseQuarantineNotice(dl.Sender, dl.Message)
	if !ok || *got != q {
		t.Errorf("read back %+v, %v; want %+v", got, ok, q)
	}
	if _, ok := ParseQuarantineNotice(to, dl.Message); ok {
		t.Error("a notice from someone other than the warden was taken for one")
	}
}
