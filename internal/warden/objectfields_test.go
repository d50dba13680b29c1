package warden

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

// objectFieldsCorpus holds bodies of every shape the warden meets: rows, entries, hand-offs,
// acknowledgements, API responses, and what is not a JSON object at all.
var objectFieldsCorpus = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a" : [1, {"b": "}"}], "c" : "x\"y", "d": null, "e": true, "f": -1.5e3}`,
	`{"stream":"CHAT","seq":7}`, `{"stream":"CHAT","seq":7,"duplicate":true}`,
	`{"error":{"code":503,"description":"no"}}`, `{"stream":"CHAT","seq":7,"msg":{}}`,
	`{"type":"io.nats.jetstream.api.v1.stream_info_response","config":{}}`,
	`{"type":"io.nats.jetstream.api.v1.x","type":"other"}`, `{"type":"other","type":"io.nats.jetstream.y"}`,
	`{"type":7}`, `{"\u0074ype":"io.nats.jetstream.z"}`, `{"str\"eam":1}`, `{"a\\":{"b":[[],{}]},"stream":"s"}`,
	`{"msg":{"id":"m1","parts":[{"kind":"text","text":"a,b}]"}]},"channel":"c","seq":1,"reason":"durable-channel","generation":1}`,
	`null`, `[]`, `"x"`, `12`, `{`, `{"a":}`, `{"a":1,}`, `{"a":1} x`, ``, ` `, "{\"\xff\":1}",
}

// TestObjectFieldsMatchesDecoding: the scan finds exactly the keys and values decoding into a
// map finds, and tells a JSON object from anything else alike.
func TestObjectFieldsMatchesDecoding(t *testing.T) {
	for _, body := range objectFieldsCorpus {
		checkObjectFields(t, []byte(body))
	}
}

func FuzzObjectFields(f *testing.F) {
	for _, body := range objectFieldsCorpus {
		f.Add([]byte(body))
	}
	f.Fuzz(checkObjectFields)
}

func checkObjectFields(t *testing.T, body []byte) {
	var want map[string]json.RawMessage
	isObject := json.Unmarshal(body, &want) == nil && want != nil
	got := map[string]json.RawMessage{}
	ok := objectFields(body, func(key string, value []byte) { got[key] = value })
	if ok != isObject {
		t.Fatalf("%q: object %v, decoding says %v", body, ok, isObject)
	}
	if !ok {
		return
	}
	if !maps.EqualFunc(got, want, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
		t.Fatalf("%q: fields %q, decoding finds %q", body, got, want)
	}
	if gotErr, wantErr := jetStreamReply(body), jetStreamReplyByDecoding(body); (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%q: judged %v, by decoding %v", body, gotErr, wantErr)
	}
}

// jetStreamReplyByDecoding is jetStreamReply's verdict reached by decoding the whole body into a
// map: the oracle the scan is held to.
func jetStreamReplyByDecoding(body []byte) error {
	var fields map[string]json.RawMessage
	if len(body) == 0 || json.Unmarshal(body, &fields) != nil || fields == nil {
		return errNotObject
	}
	var typ string
	if raw, ok := fields["type"]; ok && json.Unmarshal(raw, &typ) == nil && len(typ) >= 18 && typ[:18] == "io.nats.jetstream." {
		return errNotObject
	}
	_, stream := fields["stream"]
	_, failed := fields["error"]
	if !stream && !failed {
		return nil
	}
	for f := range fields {
		if !slices.Contains(ackFields, f) {
			return nil
		}
	}
	return errNotObject
}

var errNotObject = &json.SyntaxError{}

func BenchmarkJetStreamReply(b *testing.B) {
	body := []byte(objectFieldsCorpus[len(objectFieldsCorpus)-12])
	b.ReportAllocs()
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			_ = jetStreamReply(body)
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			_ = jetStreamReplyByDecoding(body)
		}
	})
}
