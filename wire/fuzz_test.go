package wire

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseSubject checks that no subject makes ParseSubject panic, that a parse is consistent
// with the subject it came from, that it takes exactly the delivery arities, and that a failure is always a *ValidationError. Seeds, in
// testdata/fuzz/FuzzParseSubject too: the SPEC §12 table, each rail at arity ±1, an empty subject
// and a lone root (the shortest inputs), and a dotted-only subject (empty tokens everywhere).
func FuzzParseSubject(f *testing.F) {
	A := ownerA + ".alice"
	for _, s := range []string{
		"cotal.main.chat." + A + ".team.backend",
		"cotal.main.inst." + ownerB + ".bob." + A,
		"cotal.main.svc.reviewer." + A,
		"cotal.main.ctl.manager." + A,
		"cotal.main.chat." + A,
		"cotal.main.chat." + nkey + ".team.backend",
		"cotal.main.inst." + A + ".x",
		"cotal.main.svc.r." + A + ".x",
		"", "cotal", "cotal.", "....", "cotal.main.chat....",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subject string) {
		p, err := ParseSubject(subject)
		tok := strings.Split(subject, ".")
		arity := len(tok) >= 3 && tok[0] == Root &&
			(tok[2] == string(KindChat) && len(tok) >= 6 || tok[2] == string(KindInst) && len(tok) == 7 || tok[2] == string(KindSvc) && len(tok) == 6)
		if (err == nil) != arity {
			t.Fatalf("ParseSubject(%q) = %v for a subject of %d tokens", subject, err, len(tok))
		}
		if err != nil {
			var v *ValidationError
			if !errors.As(err, &v) || v.Field != "subject" {
				t.Fatalf("ParseSubject(%q) error %v is not a subject *ValidationError", subject, err)
			}
			return
		}
		prefix := Root + "." + p.Space + "." + string(p.Kind) + "."
		if !strings.HasPrefix(subject, prefix) {
			t.Fatalf("ParseSubject(%q) = %+v, inconsistent prefix", subject, p)
		}
		var rebuilt string
		switch p.Kind {
		case KindChat:
			rebuilt = prefix + p.Owner + "." + p.Actor + "." + p.Rest
		case KindInst:
			rebuilt = prefix + p.Rest + "." + p.Owner + "." + p.Actor
		case KindSvc:
			rebuilt = prefix + p.Rest + "." + p.Owner + "." + p.Actor
		default:
			t.Fatalf("ParseSubject(%q) returned kind %q", subject, p.Kind)
		}
		if rebuilt != subject {
			t.Fatalf("ParseSubject(%q) = %+v, which rebuilds as %q", subject, p, rebuilt)
		}
	})
}

// FuzzGuard checks that no subject and payload make Guard panic, that every outcome is either a
// delivery whose sender is the subject's and equals from.id, or a *RejectError with one of the
// three reasons. Seeds, in testdata/fuzz/FuzzGuard too: a valid message of each kind, a forged
// sender, an nkey owner, invalid UTF-8, deep nesting, and a bare unknown part kind.
func FuzzGuard(f *testing.F) {
	A := ownerA + ".alice"
	valid := `{"id":"m","ts":1,"space":"main","from":{"id":"` + A + `","name":"a"},"channel":"x","parts":[{"kind":"text","text":"hi"},{"kind":"com.a.b","z":[1]}]}`
	f.Add("cotal.main.chat."+A+".x", []byte(valid))
	f.Add("cotal.main.inst."+ownerB+".bob."+A, []byte(valid))
	f.Add("cotal.main.svc.r."+A, []byte(valid))
	f.Add("cotal.main.chat."+ownerB+".bob.x", []byte(valid))
	f.Add("cotal.main.chat."+nkey+".x.y", []byte(valid))
	f.Add("cotal.main.chat."+A+".x", []byte("{\"id\":\"\xff\"}"))
	f.Add("cotal.main.chat."+A+".x", []byte(strings.Repeat("[", 20000)))
	// A from.name one unit over MaxNameLength: refused on receive as on send.
	f.Add("cotal.main.chat."+A+".x", []byte(`{"id":"m","ts":1,"space":"main","from":{"id":"`+A+`","name":"`+strings.Repeat("n", MaxNameLength+1)+`"},"channel":"x","parts":[]}`))
	f.Add("cotal.main.chat."+A+".x", []byte(`{"id":"m","ts":1e999,"space":"s","from":{"id":"`+A+`","name":"a"},"channel":"x","parts":[{"kind":"bogus"}]}`))
	f.Fuzz(func(t *testing.T, subject string, payload []byte) {
		d, err := Guard(subject, payload)
		// Given the payload to keep, the guard decides the same and decodes the same.
		owned, ownedErr := GuardOwned(subject, bytes.Clone(payload))
		if (err == nil) != (ownedErr == nil) || err != nil && err.Error() != ownedErr.Error() || err == nil && !reflect.DeepEqual(d, owned) {
			t.Fatalf("Guard = %+v, %v; GuardOwned = %+v, %v", d, err, owned, ownedErr)
		}
		if err != nil {
			var rej *RejectError
			if !errors.As(err, &rej) {
				t.Fatalf("Guard error %v is not a *RejectError", err)
			}
			switch rej.Reason {
			case ReasonMalformedSubject, ReasonSenderMismatch, ReasonMalformedJSON:
			default:
				t.Fatalf("Guard reason %q is not one of the SPEC's", rej.Reason)
			}
			return
		}
		if d.Message.From.ID != d.Sender.String() || !d.Sender.HasPrincipalOwner() {
			t.Fatalf("Guard accepted from.id %q on sender %q", d.Message.From.ID, d.Sender)
		}
		if d.Kind == "" {
			t.Fatal("Guard accepted a delivery with no kind")
		}
	})
}

// FuzzPlainTextPart checks the text-part fast path against the general decoder: whatever it
// accepts, the general decoder decodes to the same part.
func FuzzPlainTextPart(f *testing.F) {
	for _, s := range []string{`{"kind":"text","text":"hi"}`, `{"kind":"text","text":""}`, `{"kind":"text","text":"a\"b"}`, `{"kind":"text","text":"x","y":1}`, "{\"kind\":\"text\",\"text\":\"\x01\"}",
		`{"kind":"text","text":"a\nb \u003c \"q\" \ud83d\ude80 \ud800"}`, `{"kind":"text","text":"\"}`, `{"kind":"text","text":"x\"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		text, ok := plainTextPart(data)
		if !ok {
			return
		}
		var want Part
		if err := want.decodeFields(data); err != nil {
			t.Fatalf("fast path took %q, which the general decoder refuses: %v", data, err)
		}
		if want.Kind != PartText || want.Text != text {
			t.Fatalf("fast path read %q as %q; the general decoder as %+v", data, text, want)
		}
	})
}

// FuzzEnvelopeFast holds the one-pass envelope decoder to encoding/json: whatever it decodes,
// the general decoder decodes too, to the same envelope.
func FuzzEnvelopeFast(f *testing.F) {
	for _, s := range []string{
		`{"id":"m1","ts":1700000000000,"space":"main","from":{"id":"local.alice","name":"alice"},"channel":"general","parts":[{"kind":"text","text":"hi"}]}`,
		` { "parts" : [ { "kind" : "artifact" , "size" : 12 , "name" : "a" } , {} ] , "to" : "local.bob" , "from" : { "role" : "r" , "id" : "x" } , "mentions" : [ "a" , "b" ] , "ts" : -0 } `,
		`{"id":"m1","ID":"m2"}`, `{"id":"m1","id":"m2"}`, `{"id":"a\"b"}`, `{"ts":1e3}`, `{"ts":01}`, `{"mentions":[]}`, `{"parts":[]}`,
		`{"parts":[{"kind":"data","data":{"x":[1,2]}}]}`, `{"parts":[{"kind":"text","text": "a\u00e9\n"},{"kind":"text","text":"b" },{"kind":"text","text":"c"}]}`, `{"\u0069d":"a\nb","id":"c"}`, `{"id":"\ud800\u00e9"}`, `{"parts":[{"k\"":"v\\"}]}`, `{"from":{}}`, `{"replyTo":null}`, `{}`, `[]`, `{"id":"m1"} x`, "{\"id\":\"\x01\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) {
			return // decodeEnvelope refuses it before either decoder
		}
		fast, ok := decodeEnvelopeFast(data, false)
		if !ok {
			return
		}
		slow, err := decodeEnvelopeJSON(data)
		if err != nil {
			t.Fatalf("fast path took %q, which encoding/json refuses: %v", data, err)
		}
		// The parts read as text in the same pass are the parts decoded from their bytes.
		for i, p := range fast.texts {
			if p.Kind == "" {
				continue
			}
			var want Part
			if err := want.UnmarshalJSON(fast.Parts[i]); err != nil || !reflect.DeepEqual(p, want) {
				t.Fatalf("%q: part %d read as %+v, decoded as %+v (%v)", data, i, p, want, err)
			}
		}
		// What the fields point at is compared; where it is stored is the decoder's business. The
		// copies still point into the originals' storage.
		fv, sv := *fast, *slow
		fv.texts, sv.texts, fv.own, sv.own = nil, nil, ownValues{}, ownValues{}
		if !reflect.DeepEqual(fv, sv) {
			t.Fatalf("%q: fast path %+v, encoding/json %+v", data, fast, slow)
		}
	})
}
