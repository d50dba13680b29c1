package wire

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func TestGuard(t *testing.T) {
	A, B := ownerA+".alice", ownerB+".bob"
	msg := func(fromID, routing string) string {
		return `{"id":"m1","ts":1,"space":"main","from":{"id":"` + fromID + `","name":"alice"},` + routing + `,"parts":[{"kind":"text","text":"hi"}],"unknown":{"x":1}}`
	}
	chat := "cotal.main.chat." + A + ".team.backend"
	tests := []struct {
		name    string
		subject string
		payload string
		reason  Reason // "" = accepted
		kind    DeliveryKind
	}{
		{"multicast", chat, msg(A, `"channel":"team.backend"`), "", DeliveryChannel},
		{"dm", "cotal.main.inst." + B + "." + A, msg(A, `"to":"`+B+`"`), "", DeliveryDM},
		{"anycast", "cotal.main.svc.reviewer." + A, msg(A, `"toService":"reviewer"`), "", DeliveryAnycast},
		{"kind from subject, not payload", "cotal.main.inst." + B + "." + A, msg(A, `"channel":"team.backend"`), "", DeliveryDM},
		{"local owner", "cotal.main.chat.local.dev1.general", msg("local.dev1", `"channel":"general"`), "", DeliveryChannel},
		{"unparseable subject", "cotal.main.chat." + A, msg(A, `"channel":"x"`), ReasonMalformedSubject, ""},
		{"retired ctl", "cotal.main.ctl.manager." + A, msg(A, `"channel":"x"`), ReasonMalformedSubject, ""},
		{"old-shape nkey owner", "cotal.main.chat." + nkey + ".team.backend", msg(nkey+".team", `"channel":"backend"`), ReasonMalformedSubject, ""},
		{"bad actor token", "cotal.main.svc.reviewer." + ownerA + ".al-ice", msg(ownerA+".al-ice", `"toService":"reviewer"`), ReasonMalformedSubject, ""},
		{"forged from.id", chat, msg(B, `"channel":"team.backend"`), ReasonSenderMismatch, ""},
		{"missing from", chat, `{"id":"m1","ts":1,"space":"main","channel":"x","parts":[]}`, ReasonSenderMismatch, ""},
		{"from without id", chat, `{"id":"m1","ts":1,"space":"main","from":{"name":"a"},"channel":"x","parts":[]}`, ReasonSenderMismatch, ""},
		{"not JSON", chat, `{"id":`, ReasonMalformedJSON, ""},
		{"not UTF-8", chat, "{\"id\":\"\xff\"}", ReasonMalformedJSON, ""},
		{"id not a string", chat, `{"id":5,"ts":1,"space":"main","from":{"id":"` + A + `","name":"a"},"channel":"x","parts":[]}`, ReasonMalformedJSON, ""},
		{"missing id", chat, `{"ts":1,"space":"main","from":{"id":"` + A + `","name":"a"},"channel":"x","parts":[]}`, ReasonMalformedJSON, ""},
		{"two routing fields", chat, msg(A, `"channel":"x","to":"`+B+`"`), ReasonMalformedJSON, ""},
		{"bare unknown part kind", chat, `{"id":"m","ts":1,"space":"main","from":{"id":"` + A + `","name":"a"},"channel":"x","parts":[{"kind":"video"}]}`, ReasonMalformedJSON, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Guard(tt.subject, []byte(tt.payload))
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("Guard: %v", err)
				}
				if d.Kind != tt.kind || d.Sender.String() != d.Message.From.ID {
					t.Errorf("Guard = %+v, want kind %s", d, tt.kind)
				}
				return
			}
			var rej *RejectError
			if !errors.As(err, &rej) || rej.Reason != tt.reason || !errors.Is(err, ErrRejected) {
				t.Fatalf("Guard = %v, %v; want reason %s", d, err, tt.reason)
			}
			if !strings.Contains(err.Error(), string(tt.reason)) {
				t.Errorf("error %q does not name its reason", err)
			}
		})
	}
}

func TestGuardEmptyIDsStayDistinct(t *testing.T) {
	A := ownerA + ".alice"
	payload := []byte(`{"id":"","ts":1,"space":"main","from":{"id":"` + A + `","name":"a"},"channel":"x","parts":[]}`)
	d1, err1 := Guard("cotal.main.chat."+A+".x", payload)
	d2, err2 := Guard("cotal.main.chat."+A+".x", payload)
	if err1 != nil || err2 != nil || d1.Message.ID != "" || d1.Message == d2.Message {
		t.Errorf("two id:\"\" messages must both surface: %v %v", err1, err2)
	}
}

// BenchmarkGuard is the receive guard on a channel message with one text part, as every member
// runs it on every live message.
// BenchmarkGuard runs the receive guard on a copy of the payload (Guard) and on the payload
// given away (GuardOwned, as the SDK's receivers run it).
func BenchmarkGuard(b *testing.B) {
	for _, g := range []struct {
		name  string
		guard func(string, []byte) (*Delivery, error)
	}{{"copy", Guard}, {"owned", GuardOwned}} {
		for _, size := range []int{128, 4096} {
			b.Run(g.name+"/"+strconv.Itoa(size), func(b *testing.B) {
				sender, _ := NewPrincipal("local", "alice")
				subject, _ := Space("main").ChatSubject(sender, "general")
				m := &CotalMessage{ID: NewMessageID(), TS: 1, Space: "main", Channel: "general",
					From: EndpointRef{ID: sender.String(), Name: "alice"}, Parts: []Part{TextPart(strings.Repeat("x", size))}}
				payload, err := EncodeMessage(m, 0)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(payload)))
				for b.Loop() {
					if _, err := g.guard(subject, payload); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestGuardDecoded holds the decoded guard to Guard's verdicts on the subject and the sender.
func TestGuardDecoded(t *testing.T) {
	alice, _ := NewPrincipal("local", "alice")
	bob, _ := NewPrincipal("local", "bob")
	subject, _ := Space("main").ChatSubject(alice, "general")
	m := &CotalMessage{ID: "m1", TS: 1, Space: "main", Channel: "general", From: EndpointRef{ID: alice.String(), Name: "alice"}, Parts: []Part{TextPart("hi")}}
	payload, err := EncodeMessage(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	forged := *m
	forged.From = EndpointRef{ID: bob.String(), Name: "bob"}
	for _, tt := range []struct {
		name    string
		subject string
		msg     *CotalMessage
		reason  Reason
	}{
		{"sound", subject, m, ""},
		{"forged sender", subject, &forged, ReasonSenderMismatch},
		{"not a delivery subject", "cotal.main.nope", m, ReasonMalformedSubject},
	} {
		dl, err := GuardDecoded(tt.subject, tt.msg)
		var rej *RejectError
		switch {
		case tt.reason == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.reason != "" && (!errors.As(err, &rej) || rej.Reason != tt.reason):
			t.Errorf("%s: %v, want %s", tt.name, err, tt.reason)
		case tt.reason == "":
			want, _ := Guard(tt.subject, payload)
			if dl.Kind != want.Kind || dl.Sender != want.Sender || dl.Subject != want.Subject {
				t.Errorf("%s: %+v, Guard gives %+v", tt.name, dl, want)
			}
		}
	}
}

// TestEnvelopeFastTakesWhatClientsWrite checks that the one-pass decoder takes the messages
// EncodeMessage writes, so receiving them costs no reflection.
func TestEnvelopeFastTakesWhatClientsWrite(t *testing.T) {
	alice, _ := NewPrincipal("local", "alice")
	from := EndpointRef{ID: alice.String(), Name: "alice", Role: "reviewer"}
	digest := "sha256:" + strings.Repeat("a", 64)
	for _, m := range []*CotalMessage{
		{ID: "m1", TS: 1, Space: "main", Channel: "general", From: from, Parts: []Part{TextPart("hi")}},
		{ID: "m2", TS: 2, Space: "main", To: "local.bob", From: from, Mentions: []string{"bob"}, ReplyTo: "m1", ContextID: "c",
			Parts: []Part{TextPart("hi"), {Kind: PartArtifact, Name: "a.txt", MediaType: "text/plain", Digest: digest, Size: 3}}},
		{ID: "m3", TS: 3, Space: "main", ToService: "reviewer", From: from, Parts: []Part{TextPart(strings.Repeat("x", 4096))}},
		{ID: "m4", TS: 4, Space: "main", Channel: "general", From: from,
			Parts: []Part{TextPart("line one\nsays \"a < b && c\"\ttabbed, été, \u2028 and 🚀")}},
	} {
		payload, err := EncodeMessage(m, 0)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := decodeEnvelopeFast(payload, false)
		if !ok {
			t.Errorf("the fast path refused %s", payload)
			continue
		}
		for i, raw := range e.Parts {
			if m.Parts[i].Kind != PartText {
				continue
			}
			if text, ok := plainTextPart(raw); !ok || text != m.Parts[i].Text {
				t.Errorf("the text fast path read %s as %q, %v", raw, text, ok)
			}
		}
	}
}

// TestReceiveRefusesLongNames holds receivers to the name limit senders keep (SPEC §6,
// MAX_NAME_LENGTH): a from.name or card.name over 128 UTF-16 units never surfaces, whichever
// decoder reads it.
func TestReceiveRefusesLongNames(t *testing.T) {
	A := ownerA + ".alice"
	chat := "cotal.main.chat." + A + ".general"
	payload := func(name string) []byte {
		return []byte(`{"id":"m1","ts":1,"space":"main","from":{"id":"` + A + `","name":"` + name + `"},"channel":"general","parts":[]}`)
	}
	for _, tt := range []struct {
		name   string
		sender string // as written in the JSON string
		ok     bool
	}{
		{"128 ASCII", strings.Repeat("n", MaxNameLength), true},
		{"empty, as the schema allows", "", true},
		{"64 astral runes are 128 units", strings.Repeat("🎉", MaxNameLength/2), true},
		{"129 ASCII", strings.Repeat("n", MaxNameLength+1), false},
		{"200 ASCII", strings.Repeat("n", 200), false},
		{"65 astral runes are 130 units", strings.Repeat("🎉", MaxNameLength/2+1), false},
		{"200 escaped", strings.Repeat(`\u006e`, 200), false},                             // escapes: the fast decoder hands the token to encoding/json
		{"200 beside an unknown from field", strings.Repeat("n", 200) + `","x":"`, false}, // only encoding/json decodes it
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := payload(tt.sender)
			_, err := Guard(chat, data)
			if tt.ok {
				if err != nil {
					t.Fatalf("Guard: %v", err)
				}
				return
			}
			var rej *RejectError
			var v *ValidationError
			if !errors.As(err, &rej) || rej.Reason != ReasonMalformedJSON || !errors.As(err, &v) || v.Field != "from.name" {
				t.Fatalf("Guard = %v, want %s on from.name", err, ReasonMalformedJSON)
			}
			if _, err := DecodeMessage(data); !errors.As(err, &v) || v.Field != "from.name" {
				t.Errorf("DecodeMessage = %v, want an error on from.name", err)
			}
			// Both decoders must bring the same envelope to the same verdict.
			slow, err := decodeEnvelopeJSON(data)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := slow.message(); err == nil {
				t.Error("the encoding/json path accepts the name")
			}
			if fast, ok := decodeEnvelopeFast(data, false); ok {
				if _, err := fast.message(); err == nil {
					t.Error("the fast path accepts the name")
				}
			}
		})
	}

	p := samplePresence()
	p.Card.Name = strings.Repeat("n", 200)
	row, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var v *ValidationError
	if _, err := DecodePresence(p.Card.ID, row); !errors.As(err, &v) || v.Field != "card.name" {
		t.Errorf("DecodePresence of a 200-character card.name = %v, want an error on card.name", err)
	}
}

// TestGuardAllocations holds receiving a text message to a fixed number of allocations, whatever
// its fields: one copy of the payload the strings share, the id's own copy, the envelope, the
// message and the delivery.
func TestGuardAllocations(t *testing.T) {
	sender, _ := NewPrincipal("local", "alice")
	subject, _ := Space("main").ChatSubject(sender, "general")
	m := &CotalMessage{ID: NewMessageID(), TS: 1, Space: "main", Channel: "general", Mentions: []string{"bob"},
		From: EndpointRef{ID: sender.String(), Name: "alice", Role: "writer"}, Parts: []Part{TextPart("hello")}}
	payload, err := EncodeMessage(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := Guard(subject, payload); err != nil {
			t.Fatal(err)
		}
	}); n > 6 {
		t.Errorf("Guard allocates %.0f times per message, want at most 6", n)
	}
	// Given the payload, the guard copies nothing of it.
	if n := testing.AllocsPerRun(100, func() {
		if _, err := GuardOwned(subject, payload); err != nil {
			t.Fatal(err)
		}
	}); n > 5 {
		t.Errorf("GuardOwned allocates %.0f times per message, want at most 5", n)
	}
}

// TestKeptStringsDoNotPinThePayload checks that the strings a receiver keeps past a message (its
// id in the de-duplication ring, replyTo and contextId for correlation) are copies of their own,
// while the rest are cut from one shared copy of the payload.
func TestKeptStringsDoNotPinThePayload(t *testing.T) {
	sender, _ := NewPrincipal("local", "alice")
	subject, _ := Space("main").ChatSubject(sender, "general")
	m := &CotalMessage{ID: "m-kept", TS: 1, Space: "main", Channel: "general", ReplyTo: "m-asked", ContextID: "ctx-kept",
		From: EndpointRef{ID: sender.String(), Name: "alice"}, Parts: []Part{TextPart(strings.Repeat("x", 4096))}}
	payload, err := EncodeMessage(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Guard(subject, payload)
	if err != nil {
		t.Fatal(err)
	}
	// The shared copy is found from the channel, which is cut from it at its offset in payload.
	at := strings.Index(string(payload), `"channel":"general"`) + len(`"channel":"`)
	start := uintptr(unsafe.Pointer(unsafe.StringData(d.Message.Channel))) - uintptr(at)
	within := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return p >= start && p < start+uintptr(len(payload))
	}
	if !within(d.Message.Parts[0].Text) || !within(d.Message.From.Name) {
		t.Fatal("the text and the name are not cut from the shared copy, so this test finds nothing")
	}
	for name, s := range map[string]string{"id": d.Message.ID, "replyTo": d.Message.ReplyTo, "contextId": d.Message.ContextID} {
		if within(s) {
			t.Errorf("%s %q is cut from the payload's copy: keeping it pins %d bytes", name, s, len(payload))
		}
	}

	// GuardOwned cuts the same strings from the payload itself, and still copies the kept ones.
	d, err = GuardOwned(subject, payload)
	if err != nil {
		t.Fatal(err)
	}
	start = uintptr(unsafe.Pointer(unsafe.SliceData(payload)))
	if !within(d.Message.Parts[0].Text) || !within(d.Message.From.Name) || !within(d.Message.Channel) {
		t.Error("GuardOwned copied the payload it was given")
	}
	for name, s := range map[string]string{"id": d.Message.ID, "replyTo": d.Message.ReplyTo, "contextId": d.Message.ContextID} {
		if within(s) {
			t.Errorf("GuardOwned: %s %q is cut from the payload: keeping it pins %d bytes", name, s, len(payload))
		}
	}
}
