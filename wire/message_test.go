package wire

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sampleMulticast is SPEC §12's sample multicast message.
const sampleMulticast = `{
  "id": "018f1d0a-0000-7000-9000-000000000001",
  "ts": 1710000000000,
  "space": "main",
  "from": {"id": "u_aaaaaaaaaaaaaaaaaaaaaaaaaa.alice", "name": "alice", "role": "planner"},
  "channel": "team.backend",
  "mentions": ["bob"],
  "parts": [{ "kind": "text", "text": "Can you review this?" }],
  "contextId": "ctx-1"
}`

// sampleUnicast is SPEC §12's sample unicast message.
const sampleUnicast = `{
  "id": "018f1d0a-0000-7000-9000-000000000002",
  "ts": 1710000001000,
  "space": "main",
  "from": {"id": "u_aaaaaaaaaaaaaaaaaaaaaaaaaa.alice", "name": "alice"},
  "to": "u_bbbbbbbbbbbbbbbbbbbbbbbbbb.bob",
  "parts": [{ "kind": "text", "text": "Direct note." }]
}`

func TestDecodeSampleMessages(t *testing.T) {
	m, err := DecodeMessage([]byte(sampleMulticast))
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "018f1d0a-0000-7000-9000-000000000001" || m.TS != 1710000000000 || m.Channel != "team.backend" ||
		m.From.Role != "planner" || m.ContextID != "ctx-1" || len(m.Mentions) != 1 || m.Parts[0].Text != "Can you review this?" {
		t.Errorf("decoded %+v", m)
	}
	if err := m.Validate(); err != nil {
		t.Errorf("the SPEC sample must validate: %v", err)
	}
	u, err := DecodeMessage([]byte(sampleUnicast))
	if err != nil || u.To != ownerB+".bob" {
		t.Fatalf("DecodeMessage = %+v, %v", u, err)
	}
	if err := u.Validate(); err != nil {
		t.Errorf("the SPEC sample must validate: %v", err)
	}
}

func TestDecodeMessageShape(t *testing.T) {
	base := map[string]any{
		"id": "m1", "ts": 1, "space": "main",
		"from":  map[string]any{"id": ownerA + ".alice", "name": "alice"},
		"parts": []any{map[string]any{"kind": "text", "text": "hi"}},
	}
	with := func(edit func(m map[string]any)) []byte {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		edit(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name  string
		in    []byte
		field string // "" = must decode
	}{
		{"channel", with(func(m map[string]any) { m["channel"] = "x" }), ""},
		{"empty id is legal on receive", with(func(m map[string]any) { m["channel"] = "x"; m["id"] = "" }), ""},
		{"unknown fields ignored", with(func(m map[string]any) { m["channel"] = "x"; m["future"] = map[string]any{"a": 1} }), ""},
		{"fractional ts", with(func(m map[string]any) { m["channel"] = "x"; m["ts"] = 1.5 }), ""},
		{"no routing", with(func(m map[string]any) {}), "routing"},
		{"two routings", with(func(m map[string]any) { m["channel"] = "x"; m["to"] = "y" }), "routing"},
		{"three routings", with(func(m map[string]any) { m["channel"] = "x"; m["to"] = "y"; m["toService"] = "z" }), "routing"},
		{"missing id", with(func(m map[string]any) { m["channel"] = "x"; delete(m, "id") }), "id"},
		{"null id", with(func(m map[string]any) { m["channel"] = "x"; m["id"] = nil }), "id"},
		{"missing ts", with(func(m map[string]any) { m["channel"] = "x"; delete(m, "ts") }), "ts"},
		{"missing space", with(func(m map[string]any) { m["channel"] = "x"; delete(m, "space") }), "space"},
		{"missing parts", with(func(m map[string]any) { m["channel"] = "x"; delete(m, "parts") }), "parts"},
		{"missing from", with(func(m map[string]any) { m["channel"] = "x"; delete(m, "from") }), "from"},
		{"bare unknown kind", with(func(m map[string]any) {
			m["channel"] = "x"
			m["parts"] = []any{map[string]any{"kind": "image"}}
		}), "parts[0].kind"},
		{"text without text", with(func(m map[string]any) {
			m["channel"] = "x"
			m["parts"] = []any{map[string]any{"kind": "text"}}
		}), "parts[0].text"},
		{"bad digest", with(func(m map[string]any) {
			m["channel"] = "x"
			m["parts"] = []any{map[string]any{"kind": "text", "text": "a"}, map[string]any{"kind": "artifact", "name": "n", "mediaType": "t", "digest": "sha256:ABC", "size": 1}}
		}), "parts[1].digest"},
		{"negative size", with(func(m map[string]any) {
			m["channel"] = "x"
			m["parts"] = []any{map[string]any{"kind": "artifact", "name": "n", "mediaType": "t", "digest": ContentDigest(nil), "size": -1}}
		}), "parts[0].size"},
		{"fractional size", with(func(m map[string]any) {
			m["channel"] = "x"
			m["parts"] = []any{map[string]any{"kind": "artifact", "name": "n", "mediaType": "t", "digest": ContentDigest(nil), "size": 1.5}}
		}), "parts[0].size"},
		{"data without data", with(func(m map[string]any) {
			m["channel"] = "x"
			m["parts"] = []any{map[string]any{"kind": "data"}}
		}), "parts[0].data"},
		{"part not an object", with(func(m map[string]any) { m["channel"] = "x"; m["parts"] = []any{"text"} }), "parts[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeMessage(tt.in)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("DecodeMessage(%s) = %v", tt.in, err)
				}
				return
			}
			var v *ValidationError
			if !errors.As(err, &v) || v.Field != tt.field {
				t.Errorf("DecodeMessage(%s) = %v, want an error on %s", tt.in, err, tt.field)
			}
		})
	}
}

func TestDecodeMessageNotJSON(t *testing.T) {
	for _, in := range []string{"", "null", "[]", "{", `{"id":1}`, "\xff{}", `"text"`} {
		if _, err := DecodeMessage([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("DecodeMessage(%q) = %v, want ErrInvalid", in, err)
		}
	}
}

func TestPartsRoundTrip(t *testing.T) {
	art, err := ArtifactPart("report.html", "text/html", ContentDigest([]byte("hello")), 5)
	if err != nil {
		t.Fatal(err)
	}
	data, err := DataPart(map[string]any{"a": []int{1, 2}, "b": nil})
	if err != nil {
		t.Fatal(err)
	}
	in := `{"id":"m","ts":1,"space":"main","from":{"id":"` + ownerA + `.alice","name":"alice"},"toService":"reviewer","parts":[` +
		`{"kind":"text","text":"hi","extra":true},` +
		`{"kind":"data","data":{"a":[1,2],"b":null}},` +
		`{"kind":"artifact","name":"report.html","mediaType":"text/html","digest":"` + art.Digest + `","size":5},` +
		`{"kind":"com.acme.snapshot","rev":7,"nested":{"x":[true]}}]}`
	m, err := DecodeMessage([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Parts[1]; string(got.Data) != string(data.Data) {
		t.Errorf("data part = %s, want %s", got.Data, data.Data)
	}
	if got := m.Parts[2]; got.Kind != art.Kind || got.Name != art.Name || got.MediaType != art.MediaType || got.Digest != art.Digest || got.Size != art.Size {
		t.Errorf("artifact part = %+v, want %+v", got, art)
	}
	ext := m.Parts[3]
	if ext.Kind != "com.acme.snapshot" || string(ext.Extra["rev"]) != "7" || string(ext.Extra["nested"]) != `{"x":[true]}` {
		t.Errorf("extension part = %+v", ext)
	}
	out, err := EncodeMessage(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The extension part keeps every field; the text part drops the unknown one.
	if !strings.Contains(string(out), `{"kind":"com.acme.snapshot","nested":{"x":[true]},"rev":7}`) {
		t.Errorf("extension part not kept on the round trip: %s", out)
	}
	if strings.Contains(string(out), "extra") {
		t.Errorf("unknown field of a core part re-emitted: %s", out)
	}
	again, err := DecodeMessage(out)
	if err != nil {
		t.Fatal(err)
	}
	reout, err := EncodeMessage(again, 0)
	if err != nil || string(reout) != string(out) {
		t.Errorf("second round trip differs:\n%s\n%s (%v)", out, reout, err)
	}
}

func TestDataPartRefusesNonJSON(t *testing.T) {
	type point struct {
		X float64 `json:"x"`
		Y float64 `json:"y"`
	}
	tests := []struct {
		name string
		v    any
		path string
	}{
		{"top-level NaN", math.NaN(), "data"},
		{"nested infinity", map[string]any{"points": []point{{1, 2}, {3, math.Inf(1)}}}, "data.points[1].y"},
		{"channel", map[string]any{"c": make(chan int)}, "data.c"},
		{"function in slice", []any{1, func() {}}, "data[1]"},
		{"complex", struct{ Z complex128 }{1i}, "data.Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DataPart(tt.v)
			var v *ValidationError
			if !errors.As(err, &v) || v.Field != tt.path {
				t.Errorf("DataPart = %v, want an error at %s", err, tt.path)
			}
		})
	}
	p, err := DataPart([]byte("raw"))
	if err != nil || string(p.Data) != `"cmF3"` {
		t.Errorf("DataPart([]byte) = %s, %v", p.Data, err)
	}
}

func TestMessageValidate(t *testing.T) {
	good := func() *CotalMessage {
		return &CotalMessage{
			ID: NewMessageID(), TS: MillisOf(time.Now()), Space: "main",
			From:    EndpointRef{ID: ownerA + ".alice", Name: "alice"},
			Channel: "team.backend", Parts: []Part{TextPart("hi")},
		}
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		edit  func(m *CotalMessage)
		field string
	}{
		{"empty id", func(m *CotalMessage) { m.ID = "" }, "id"},
		{"no ts", func(m *CotalMessage) { m.TS = 0 }, "ts"},
		{"no space", func(m *CotalMessage) { m.Space = "" }, "space"},
		{"bad from.id", func(m *CotalMessage) { m.From.ID = "alice" }, "from.id"},
		{"no from.name", func(m *CotalMessage) { m.From.Name = "" }, "from.name"},
		{"long from.name", func(m *CotalMessage) { m.From.Name = strings.Repeat("n", MaxNameLength+1) }, "from.name"},
		{"two routings", func(m *CotalMessage) { m.To = ownerB + ".bob" }, "routing"},
		{"no routing", func(m *CotalMessage) { m.Channel = "" }, "routing"},
		{"wildcard channel", func(m *CotalMessage) { m.Channel = "team.>" }, "channel"},
		{"bad to", func(m *CotalMessage) { m.Channel, m.To = "", "bob" }, "to"},
		{"blank service", func(m *CotalMessage) { m.Channel, m.ToService = "", " " }, "toService"},
		{"bare kind", func(m *CotalMessage) { m.Parts = []Part{{Kind: "image"}} }, "parts[0].kind"},
		{"invalid data", func(m *CotalMessage) { m.Parts = []Part{{Kind: PartData, Data: json.RawMessage("{")}} }, "parts[0].data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := good()
			tt.edit(m)
			err := m.Validate()
			var v *ValidationError
			if !errors.As(err, &v) || v.Field != tt.field {
				t.Errorf("Validate() = %v, want an error on %s", err, tt.field)
			}
			if _, err := EncodeMessage(m, 0); err == nil {
				t.Error("EncodeMessage must refuse what Validate refuses")
			}
		})
	}
	big := good()
	big.Parts = []Part{TextPart(strings.Repeat("x", 2000))}
	if _, err := EncodeMessage(big, 1000); err == nil || !strings.Contains(err.Error(), "artifact") {
		t.Errorf("an oversized message must be refused with advice, got %v", err)
	}
}

func TestNewMessageID(t *testing.T) {
	id := NewMessageID()
	if len(id) != 36 || id[14] != '7' || !strings.ContainsRune("89ab", rune(id[19])) {
		t.Errorf("NewMessageID() = %q, not a UUIDv7", id)
	}
	if NewMessageID() == id {
		t.Error("ids repeat")
	}
}

func TestVerifyArtifact(t *testing.T) {
	p, err := ArtifactPart("a", "text/plain", ContentDigest([]byte("abc")), 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyArtifact(&p, []byte("abc")); err != nil {
		t.Errorf("true bytes refused: %v", err)
	}
	if err := VerifyArtifact(&p, []byte("abd")); !errors.Is(err, ErrInvalid) {
		t.Errorf("tampered bytes accepted: %v", err)
	}
	text := TextPart("x")
	if err := VerifyArtifact(&text, nil); err == nil {
		t.Error("a text part is not an artifact")
	}
	if _, err := ArtifactPart("a", "t", "sha256:"+strings.Repeat("A", 64), 1); err == nil {
		t.Error("an upper-case digest must be refused")
	}
}

func TestEpochMillis(t *testing.T) {
	var m EpochMillis
	for in, want := range map[string]EpochMillis{"1710000000000": 1710000000000, "1.9": 1, "1e3": 1000, "-5": -5} {
		if err := json.Unmarshal([]byte(in), &m); err != nil || m != want {
			t.Errorf("unmarshal %s = %d, %v", in, m, err)
		}
	}
	for _, bad := range []string{`"1"`, "1e400", "true"} {
		if err := json.Unmarshal([]byte(bad), &m); err == nil {
			t.Errorf("unmarshal %s must fail", bad)
		}
	}
	now := time.UnixMilli(1710000000000)
	if MillisOf(now).Time() != now {
		t.Error("MillisOf and Time must round-trip")
	}
}

// TestMarshalMessage holds the message encoder to json.Marshal, byte for byte, for every kind of
// part and text that needs escaping.
func TestMarshalMessage(t *testing.T) {
	for _, text := range []string{"", "hi", `<a href="x">&amp;</a>`, "line\nnext\ttab\\\"", "\u2028\u2029é\U0001F600", "bad \xff utf-8", `"parts":null`} {
		checkMarshalMessage(t, text, text)
	}
}

func FuzzMarshalMessage(f *testing.F) {
	f.Add("hi", "alice")
	f.Add("<&>\n\"parts\":null", "\xffname")
	f.Fuzz(checkMarshalMessage)
}

func checkMarshalMessage(t *testing.T, text, name string) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, parts := range [][]Part{
		nil, {}, {TextPart(text)},
		{TextPart(text), {Kind: PartData, Data: json.RawMessage(`{"k": [1, "<x>"]}`)}, {Kind: PartArtifact, Name: text, MediaType: "text/plain", Digest: digest, Size: 3}},
		{{Kind: "com.acme.snap", Extra: map[string]json.RawMessage{"b": json.RawMessage(`"<&>"`), "a": json.RawMessage(`2`)}}, TextPart(text)},
	} {
		m := &CotalMessage{ID: "m<1>", TS: 1, Space: "main", From: EndpointRef{ID: "local.alice", Name: name, Role: text},
			Channel: "general", Mentions: []string{name, "parts"}, Parts: parts, ReplyTo: text, ContextID: text}
		want, werr := json.Marshal(m)
		got, gerr := marshalMessage(m)
		if (werr == nil) != (gerr == nil) || string(got) != string(want) {
			t.Fatalf("marshalMessage = %s, %v; json.Marshal = %s, %v", got, gerr, want, werr)
		}
	}
}

func BenchmarkEncodeMessage(b *testing.B) {
	for _, size := range []int{128, 4096} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			m := &CotalMessage{ID: NewMessageID(), TS: 1, Space: "main", Channel: "general",
				From: EndpointRef{ID: "local.alice", Name: "alice"}, Parts: []Part{TextPart(strings.Repeat("x", size))}}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := EncodeMessage(m, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
