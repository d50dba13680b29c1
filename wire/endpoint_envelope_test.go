package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const (
	envUID    = "abcdefghijklmnopqrstuvwxyz"
	envUID2   = "zyxwvutsrqponmlkjihgfedcba23"
	envDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// baseRequest is a valid call as a map, for tests that edit one member at a time.
func baseRequest() map[string]any {
	return map[string]any{
		"v":  1,
		"id": "req-1",
		"op": map[string]any{
			"endpoint": "com.acme.deploy", "command": "rollout",
			"inputDigest": envDigest, "outputDigest": envDigest,
		},
		"class":         "ephemeral",
		"replyExpected": true,
		"from":          map[string]any{"id": ownerA + ".alice", "name": "alice"},
		"deadlineMs":    5000,
	}
}

// requestBody encodes baseRequest after edit. Nested maps are fresh per call, so edits never leak
// between rows.
func requestBody(t *testing.T, edit func(m map[string]any)) []byte {
	t.Helper()
	m := baseRequest()
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func nested(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }

// wantEndpointError checks that err is an *EndpointError with code and outcome whose message
// mentions field.
func wantEndpointError(t *testing.T, err error, code ErrorCode, outcome Outcome, field string) {
	t.Helper()
	e, ok := errors.AsType[*EndpointError](err)
	if !ok {
		t.Fatalf("error %v (%T) is not an *EndpointError", err, err)
	}
	if e.Code != code || e.Outcome != outcome || !strings.Contains(e.Message, field) {
		t.Errorf("got %s (outcome %q), want code %s, outcome %q, a message naming %q", e, e.Outcome, code, outcome, field)
	}
}

func TestDecodeEndpointRequest(t *testing.T) {
	req := func(edit func(m map[string]any)) []byte { return requestBody(t, edit) }
	tests := []struct {
		name  string
		in    []byte
		code  ErrorCode // "" = must decode
		field string    // named in the message
	}{
		{"a call", req(nil), "", ""},
		{"a cast needs no deadline", req(func(m map[string]any) { m["replyExpected"] = false; delete(m, "deadlineMs") }), "", ""},
		{"every optional member", req(func(m map[string]any) {
			m["goalId"] = "goal_1"
			m["target"] = map[string]any{"owner": ownerB, "actor": "bob", "lifecycleUid": envUID, "mappingRevision": 7}
			m["bind"] = map[string]any{"instanceId": envUID2, "epoch": 0}
			m["args"] = map[string]any{"replicas": 3}
			m["correlation"] = map[string]any{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
			m["auth"] = "opaque"
			nested(m, "from")["role"] = "planner"
		}), "", ""},
		{"unknown members ignored", req(func(m map[string]any) {
			m["future"] = []any{1}
			nested(m, "op")["future"] = true
			nested(m, "from")["future"] = "x"
		}), "", ""},
		{"a single-label endpoint", req(func(m map[string]any) { nested(m, "op")["endpoint"] = "manager" }), "", ""},
		{"describe without digests", req(func(m map[string]any) {
			op := nested(m, "op")
			op["command"] = "describe"
			delete(op, "inputDigest")
			delete(op, "outputDigest")
		}), "", ""},
		{"v as 1.0", []byte(strings.Replace(string(req(nil)), `"v":1`, `"v":1.0`, 1)), "", ""},
		{"largest deadline", req(func(m map[string]any) { m["deadlineMs"] = int64(1<<53 - 1) }), "", ""},
		{"empty auth is present", req(func(m map[string]any) { m["auth"] = "" }), "", ""},

		// I-JSON and shape.
		{"not JSON", []byte(`{"v":1,`), CodeBadRequest, "I-JSON"},
		{"trailing data", append(req(nil), []byte(` {}`)...), CodeBadRequest, "trailing data"},
		{"duplicate v", []byte(`{"v":1,"v":1,"id":"a"}`), CodeBadRequest, "duplicate key"},
		{"duplicate by escape", []byte(`{"v":1,"id":"a","\u0069d":"b"}`), CodeBadRequest, "duplicate key"},
		{"lone surrogate", []byte(strings.Replace(string(req(nil)), `"alice"}`, `"al\ud800ice"}`, 1)), CodeBadRequest, "lone surrogate"},
		{"invalid UTF-8", []byte(strings.Replace(string(req(nil)), `"alice"}`, "\"al\xffice\"}", 1)), CodeBadRequest, "UTF-8"},
		{"number out of range", req(func(m map[string]any) { m["args"] = json.RawMessage(`{"n":1e400}`) }), CodeBadRequest, "overflows"},
		{"an array", []byte(`[1]`), CodeBadRequest, "JSON object"},
		{"null", []byte(`null`), CodeBadRequest, "JSON object"},

		// v is read first.
		{"v 2 of another shape", []byte(`{"v":2,"anything":["else"]}`), CodeUnsupportedVersion, "version 2"},
		{"v 2 otherwise valid", req(func(m map[string]any) { m["v"] = 2 }), CodeUnsupportedVersion, "version 2"},
		{"v 0", req(func(m map[string]any) { m["v"] = 0 }), CodeUnsupportedVersion, "version 0"},
		{"v a string", req(func(m map[string]any) { m["v"] = "1" }), CodeUnsupportedVersion, `version "1"`},
		{"v missing", req(func(m map[string]any) { delete(m, "v") }), CodeBadRequest, "v"},

		// Member names are exact.
		{"ID does not fill id", req(func(m map[string]any) { delete(m, "id"); m["ID"] = "req-1" }), CodeBadRequest, "invalid id"},
		{"From does not fill from", req(func(m map[string]any) { m["From"] = m["from"]; delete(m, "from") }), CodeBadRequest, "invalid from"},

		{"id missing", req(func(m map[string]any) { delete(m, "id") }), CodeBadRequest, "invalid id"},
		{"id empty", req(func(m map[string]any) { m["id"] = "" }), CodeBadRequest, "invalid id"},
		{"id a dot", req(func(m map[string]any) { m["id"] = "a.b" }), CodeBadRequest, "invalid id"},
		{"id 65 long", req(func(m map[string]any) { m["id"] = strings.Repeat("a", 65) }), CodeBadRequest, "invalid id"},
		{"id a number", req(func(m map[string]any) { m["id"] = 1 }), CodeBadRequest, "invalid id"},

		{"op missing", req(func(m map[string]any) { delete(m, "op") }), CodeBadRequest, "invalid op"},
		{"op a string", req(func(m map[string]any) { m["op"] = "x" }), CodeBadRequest, "invalid op"},
		{"endpoint upper case", req(func(m map[string]any) { nested(m, "op")["endpoint"] = "Com.acme" }), CodeBadRequest, "op.endpoint"},
		{"endpoint underscore", req(func(m map[string]any) { nested(m, "op")["endpoint"] = "com_acme" }), CodeBadRequest, "op.endpoint"},
		{"endpoint empty label", req(func(m map[string]any) { nested(m, "op")["endpoint"] = "com..acme" }), CodeBadRequest, "op.endpoint"},
		{"endpoint dash edge", req(func(m map[string]any) { nested(m, "op")["endpoint"] = "com.-acme" }), CodeBadRequest, "op.endpoint"},
		{"endpoint 65 long", req(func(m map[string]any) { nested(m, "op")["endpoint"] = strings.Repeat("a", 65) }), CodeBadRequest, "op.endpoint"},
		{"command missing", req(func(m map[string]any) { delete(nested(m, "op"), "command") }), CodeBadRequest, "op.command"},
		{"command upper case", req(func(m map[string]any) { nested(m, "op")["command"] = "Roll" }), CodeBadRequest, "op.command"},
		{"command 33 long", req(func(m map[string]any) { nested(m, "op")["command"] = strings.Repeat("a", 33) }), CodeBadRequest, "op.command"},
		{"digest upper hex", req(func(m map[string]any) { nested(m, "op")["inputDigest"] = strings.ToUpper(envDigest) }), CodeBadRequest, "op.inputDigest"},
		{"digest empty", req(func(m map[string]any) { nested(m, "op")["outputDigest"] = "" }), CodeBadRequest, "op.outputDigest"},
		{"digest short", req(func(m map[string]any) { nested(m, "op")["outputDigest"] = envDigest[:70] }), CodeBadRequest, "op.outputDigest"},

		{"class missing", req(func(m map[string]any) { delete(m, "class") }), CodeBadRequest, "invalid class"},
		{"class record", req(func(m map[string]any) { m["class"] = "record" }), CodeBadRequest, "invalid class"},
		{"replyExpected missing", req(func(m map[string]any) { delete(m, "replyExpected") }), CodeBadRequest, "replyExpected"},
		{"replyExpected a string", req(func(m map[string]any) { m["replyExpected"] = "true" }), CodeBadRequest, "replyExpected"},
		{"goalId empty", req(func(m map[string]any) { m["goalId"] = "" }), CodeBadRequest, "goalId"},
		{"goalId a slash", req(func(m map[string]any) { m["goalId"] = "a/b" }), CodeBadRequest, "goalId"},

		{"target null", req(func(m map[string]any) { m["target"] = nil }), CodeBadRequest, "invalid target"},
		{"target without actor", req(func(m map[string]any) {
			m["target"] = map[string]any{"owner": ownerB, "lifecycleUid": envUID}
		}), CodeBadRequest, "target.actor"},
		{"target owner with a dash", req(func(m map[string]any) {
			m["target"] = map[string]any{"owner": "a-b", "actor": "bob", "lifecycleUid": envUID}
		}), CodeBadRequest, "target.owner"},
		{"target actor 65 long", req(func(m map[string]any) {
			m["target"] = map[string]any{"owner": ownerB, "actor": strings.Repeat("b", 65), "lifecycleUid": envUID}
		}), CodeBadRequest, "target.actor"},
		{"target uid upper case", req(func(m map[string]any) {
			m["target"] = map[string]any{"owner": ownerB, "actor": "bob", "lifecycleUid": strings.ToUpper(envUID)}
		}), CodeBadRequest, "target.lifecycleUid"},
		{"mappingRevision 0", req(func(m map[string]any) {
			m["target"] = map[string]any{"owner": ownerB, "actor": "bob", "lifecycleUid": envUID, "mappingRevision": 0}
		}), CodeBadRequest, "target.mappingRevision"},
		{"mappingRevision 2^53", req(func(m map[string]any) {
			m["target"] = map[string]any{"owner": ownerB, "actor": "bob", "lifecycleUid": envUID, "mappingRevision": int64(1 << 53)}
		}), CodeBadRequest, "target.mappingRevision"},
		{"mappingRevision fractional", req(func(m map[string]any) {
			m["target"] = map[string]any{"owner": ownerB, "actor": "bob", "lifecycleUid": envUID, "mappingRevision": 1.5}
		}), CodeBadRequest, "target.mappingRevision"},

		{"bind instance bad", req(func(m map[string]any) { m["bind"] = map[string]any{"instanceId": "short", "epoch": 1} }), CodeBadRequest, "bind.instanceId"},
		{"bind epoch negative", req(func(m map[string]any) { m["bind"] = map[string]any{"instanceId": envUID, "epoch": -1} }), CodeBadRequest, "bind.epoch"},
		{"bind epoch missing", req(func(m map[string]any) { m["bind"] = map[string]any{"instanceId": envUID} }), CodeBadRequest, "bind.epoch"},
		{"bind on describe", req(func(m map[string]any) {
			nested(m, "op")["command"] = "describe"
			m["bind"] = map[string]any{"instanceId": envUID, "epoch": 1}
		}), CodeBadRequest, "invalid bind"},

		{"args an array", req(func(m map[string]any) { m["args"] = []any{1} }), CodeBadRequest, "invalid args"},
		{"args a string", req(func(m map[string]any) { m["args"] = "{}" }), CodeBadRequest, "invalid args"},

		{"from missing", req(func(m map[string]any) { delete(m, "from") }), CodeBadRequest, "invalid from"},
		{"from id not a principal", req(func(m map[string]any) { nested(m, "from")["id"] = "alice" }), CodeBadRequest, "from.id"},
		{"from name empty", req(func(m map[string]any) { nested(m, "from")["name"] = "" }), CodeBadRequest, "from.name"},
		{"from name a number", req(func(m map[string]any) { nested(m, "from")["name"] = 1 }), CodeBadRequest, "from.name"},

		{"deadline missing on a call", req(func(m map[string]any) { delete(m, "deadlineMs") }), CodeBadRequest, "deadlineMs"},
		{"deadline missing on a journal cast", req(func(m map[string]any) {
			m["class"], m["replyExpected"] = "journal", false
			delete(m, "deadlineMs")
		}), CodeBadRequest, "deadlineMs"},
		{"deadline 0", req(func(m map[string]any) { m["replyExpected"] = false; m["deadlineMs"] = 0 }), CodeBadRequest, "deadlineMs"},
		{"deadline negative", req(func(m map[string]any) { m["deadlineMs"] = -5 }), CodeBadRequest, "deadlineMs"},
		{"deadline fractional", req(func(m map[string]any) { m["deadlineMs"] = 1.5 }), CodeBadRequest, "deadlineMs"},
		{"deadline 2^53", req(func(m map[string]any) { m["deadlineMs"] = int64(1 << 53) }), CodeBadRequest, "deadlineMs"},

		{"correlation member a number", req(func(m map[string]any) { m["correlation"] = map[string]any{"traceparent": 1} }), CodeBadRequest, "correlation.traceparent"},
		{"auth a number", req(func(m map[string]any) { m["auth"] = 1 }), CodeBadRequest, "invalid auth"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeEndpointRequest(tc.in)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("DecodeEndpointRequest(%s) = %v", tc.in, err)
				}
				if r.V != 1 || r.ID != "req-1" {
					t.Errorf("decoded %+v", r)
				}
				return
			}
			if err == nil {
				t.Fatalf("DecodeEndpointRequest(%s) accepted %+v", tc.in, r)
			}
			wantEndpointError(t, err, tc.code, OutcomeNotExecuted, tc.field)
		})
	}
}

// fullRequest is a request with every member set.
func fullRequest() *EndpointRequest {
	auth := "cap:é\u2028<sig>"
	return &EndpointRequest{
		V:     1,
		ID:    "req-1",
		Op:    EndpointOp{Endpoint: "com.acme.deploy", Command: "rollout", InputDigest: envDigest, OutputDigest: envDigest},
		Class: ClassJournal, ReplyExpected: false, GoalID: "goal-1",
		Target:      &Target{Owner: ownerB, Actor: "bob", LifecycleUID: envUID, MappingRevision: 42},
		Bind:        &Bind{InstanceID: envUID2, Epoch: 3},
		Args:        json.RawMessage(`{"note":"<b>","replicas":3}`),
		From:        EndpointRef{ID: ownerA + ".alice", Name: "alice", Role: "planner"},
		DeadlineMs:  30000,
		Correlation: &Correlation{Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Tracestate: "k=v", Baggage: "a=b"},
		Auth:        &auth,
	}
}

func TestEndpointRequestRoundTrip(t *testing.T) {
	want := fullRequest()
	if err := want.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeEndpointRequest(b)
	if err != nil {
		t.Fatalf("DecodeEndpointRequest(%s) = %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip\n got %+v\nwant %+v", got, want)
	}
	// json.Unmarshal takes the same exact-name decoder, but keeps args as written (json.Marshal
	// escaped the '<'), where DecodeEndpointRequest keeps their canonical form.
	var viaUnmarshal EndpointRequest
	if err := json.Unmarshal(b, &viaUnmarshal); err != nil {
		t.Fatal(err)
	}
	if viaUnmarshal.Args, err = Canonicalize(viaUnmarshal.Args); err != nil || !reflect.DeepEqual(&viaUnmarshal, want) {
		t.Errorf("json.Unmarshal = %+v, %v", viaUnmarshal, err)
	}
}

func TestEndpointRequestEncoding(t *testing.T) {
	r := &EndpointRequest{
		V: 1, ID: "req-1", Class: ClassEphemeral,
		Op:   EndpointOp{Endpoint: "manager", Command: "describe"},
		From: EndpointRef{ID: ownerA + ".alice", Name: "alice"},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	// Absent optionals are omitted, never null; replyExpected is always written.
	const want = `{"v":1,"id":"req-1","op":{"endpoint":"manager","command":"describe"},"class":"ephemeral",` +
		`"replyExpected":false,"from":{"id":"` + ownerA + `.alice","name":"alice"}}`
	if string(b) != want {
		t.Errorf("encoded\n %s\nwant\n %s", b, want)
	}
	b, err = json.Marshal(fullRequest())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		`"v":`, `"id":`, `"op":`, `"endpoint":`, `"command":`, `"inputDigest":`, `"outputDigest":`, `"class":`,
		`"replyExpected":`, `"goalId":`, `"target":`, `"owner":`, `"actor":`, `"lifecycleUid":`, `"mappingRevision":`,
		`"bind":`, `"instanceId":`, `"epoch":`, `"args":`, `"from":`, `"deadlineMs":`, `"correlation":`,
		`"traceparent":`, `"tracestate":`, `"baggage":`, `"auth":`,
	} {
		if !strings.Contains(string(b), name) {
			t.Errorf("the encoding %s lacks %s", b, name)
		}
	}
}

func TestDecodeKeepsArgsCanonical(t *testing.T) {
	b := requestBody(t, func(m map[string]any) { m["args"] = json.RawMessage(`{ "b" : 1.0, "a" : "\u0041" }`) })
	r, err := DecodeEndpointRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Args) != `{"a":"A","b":1}` {
		t.Errorf("args = %s, want the canonical form", r.Args)
	}
}

func TestEndpointRequestValidate(t *testing.T) {
	r := fullRequest()
	r.V = 0
	wantEndpointError(t, r.Validate(), CodeUnsupportedVersion, OutcomeNotExecuted, "version 0")
	r = fullRequest()
	r.Args = json.RawMessage(`[1]`)
	wantEndpointError(t, r.Validate(), CodeBadRequest, OutcomeNotExecuted, "args")
	r = fullRequest()
	r.DeadlineMs = -1
	wantEndpointError(t, r.Validate(), CodeBadRequest, OutcomeNotExecuted, "deadlineMs")
	r = fullRequest()
	r.Bind.Epoch = -1
	wantEndpointError(t, r.Validate(), CodeBadRequest, OutcomeNotExecuted, "bind.epoch")
	r = fullRequest()
	r.Target.MappingRevision = 1 << 53
	wantEndpointError(t, r.Validate(), CodeBadRequest, OutcomeNotExecuted, "target.mappingRevision")
}

func TestDecodeEndpointReply(t *testing.T) {
	const errObj = `{"code":"not-found","message":"no such goal","outcome":"not-executed"}`
	tests := []struct {
		name  string
		in    string
		code  ErrorCode // "" = must decode
		field string
	}{
		{"ok with data", `{"v":1,"id":"r1","ok":true,"data":{"n":1}}`, "", ""},
		{"ok with null data", `{"v":1,"id":"r1","ok":true,"data":null}`, "", ""},
		{"ok with receipt", `{"v":1,"id":"r1","ok":true,"data":[],"receipt":"sig"}`, "", ""},
		{"error", `{"v":1,"id":"r1","ok":false,"error":` + errObj + `}`, "", ""},
		{"error without outcome", `{"v":1,"id":"r1","ok":false,"error":{"code":"internal","message":""}}`, "", ""},
		{"extension code", `{"v":1,"id":"r1","ok":false,"error":{"code":"com.acme.quota","message":"m"}}`, "", ""},
		{"unknown members ignored", `{"v":1,"id":"r1","ok":false,"later":1,"error":{"code":"internal","message":"m","later":2}}`, "", ""},

		{"v 2", `{"v":2,"whatever":true}`, CodeUnsupportedVersion, "version 2"},
		{"duplicate ok", `{"v":1,"id":"r1","ok":true,"ok":false,"data":1}`, CodeBadRequest, "duplicate key"},
		{"lone surrogate", `{"v":1,"id":"r\udc00","ok":true,"data":1}`, CodeBadRequest, "lone surrogate"},
		{"id missing", `{"v":1,"ok":true,"data":1}`, CodeBadRequest, "invalid id"},
		{"id bad", `{"v":1,"id":"a b","ok":true,"data":1}`, CodeBadRequest, "invalid id"},
		{"ok missing", `{"v":1,"id":"r1","data":1}`, CodeBadRequest, "invalid ok"},
		{"ok without data", `{"v":1,"id":"r1","ok":true}`, CodeBadRequest, "invalid data"},
		{"ok with error", `{"v":1,"id":"r1","ok":true,"data":1,"error":` + errObj + `}`, CodeBadRequest, "invalid error"},
		{"error with data", `{"v":1,"id":"r1","ok":false,"data":null,"error":` + errObj + `}`, CodeBadRequest, "invalid data"},
		{"error missing", `{"v":1,"id":"r1","ok":false}`, CodeBadRequest, "invalid error"},
		{"error null", `{"v":1,"id":"r1","ok":false,"error":null}`, CodeBadRequest, "invalid error"},
		{"code missing", `{"v":1,"id":"r1","ok":false,"error":{"message":"m"}}`, CodeBadRequest, "error.code"},
		{"code unknown word", `{"v":1,"id":"r1","ok":false,"error":{"code":"oops","message":"m"}}`, CodeBadRequest, "error.code"},
		{"message missing", `{"v":1,"id":"r1","ok":false,"error":{"code":"internal"}}`, CodeBadRequest, "error.message"},
		{"outcome unknown word", `{"v":1,"id":"r1","ok":false,"error":{"code":"internal","message":"m","outcome":"maybe"}}`, CodeBadRequest, "error.outcome"},
		{"outcome empty", `{"v":1,"id":"r1","ok":false,"error":{"code":"internal","message":"m","outcome":""}}`, CodeBadRequest, "error.outcome"},
		{"details an object", `{"v":1,"id":"r1","ok":false,"error":{"code":"internal","message":"m","details":{}}}`, CodeBadRequest, "error.details"},
		{"detail kind bare", `{"v":1,"id":"r1","ok":false,"error":{"code":"internal","message":"m","details":[{"kind":"x"}]}}`, CodeBadRequest, "error.details[0].kind"},
		{"detail kind missing", `{"v":1,"id":"r1","ok":false,"error":{"code":"internal","message":"m","details":[{"a":1}]}}`, CodeBadRequest, "error.details[0].kind"},
		{"receipt empty", `{"v":1,"id":"r1","ok":true,"data":1,"receipt":""}`, CodeBadRequest, "receipt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeEndpointReply([]byte(tc.in))
			if tc.code == "" {
				if err != nil {
					t.Fatalf("DecodeEndpointReply(%s) = %v", tc.in, err)
				}
				if r.ID != "r1" {
					t.Errorf("decoded %+v", r)
				}
				return
			}
			if err == nil {
				t.Fatalf("DecodeEndpointReply(%s) accepted %+v", tc.in, r)
			}
			// A caller that cannot read a reply cannot know whether the command ran.
			wantEndpointError(t, err, tc.code, OutcomeUnknown, tc.field)
		})
	}
}

func TestEndpointErrorRoundTrip(t *testing.T) {
	// An extension code and a detail with members this package does not know: both survive.
	const in = `{"code":"com.acme.quota","details":[{"kind":"com.acme.limit","limit":5,"window":{"n":[1,2],"unit":"s"}}],` +
		`"message":"over quota","outcome":"executed"}`
	var e EndpointError
	if err := json.Unmarshal([]byte(in), &e); err != nil {
		t.Fatal(err)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	if e.Code != "com.acme.quota" || e.Outcome != OutcomeExecuted || len(e.Details) != 1 || string(e.Details[0].Extra["limit"]) != "5" {
		t.Fatalf("decoded %+v", e)
	}
	b, err := json.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := Canonicalize(b); err != nil || string(c) != in {
		t.Errorf("re-encoded %s (canonical %s, %v), want %s", b, c, err, in)
	}
}

func TestEndpointErrorMethods(t *testing.T) {
	e := NewEndpointError(CodeNotFound, "", "no goal %s", "g1")
	if got := e.Error(); got != "not-found: no goal g1" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&EndpointError{Code: CodeInternal}).Error(); got != "internal" {
		t.Errorf("Error() without a message = %q", got)
	}
	if e.OutcomeOrUnknown() != OutcomeUnknown {
		t.Errorf("a missing outcome reads as %q, want unknown", e.OutcomeOrUnknown())
	}
	for _, o := range []Outcome{OutcomeExecuted, OutcomeNotExecuted, OutcomeUnknown} {
		if got := (&EndpointError{Code: CodeInternal, Outcome: o}).OutcomeOrUnknown(); got != o {
			t.Errorf("OutcomeOrUnknown() = %q, want %q", got, o)
		}
	}
	d := e.WithDetail(DetailBindRefused)
	if len(e.Details) != 0 || !d.HasDetail(DetailBindRefused) || d.HasDetail(DetailUnboundResponder) {
		t.Errorf("WithDetail: original %+v, copy %+v", e, d)
	}
	// A later WithDetail on the copy must not write into a slice another copy shares.
	d1, d2 := d.WithDetail(DetailLifecycleBlocked), d.WithDetail(DetailUnboundResponder)
	if !d1.HasDetail(DetailLifecycleBlocked) || d1.HasDetail(DetailUnboundResponder) || len(d2.Details) != 2 {
		t.Errorf("WithDetail copies share details: %+v, %+v", d1, d2)
	}
	var wrapped error = d
	wrapped = errors.Join(errors.New("call com.acme.deploy"), wrapped)
	if got, ok := errors.AsType[*EndpointError](wrapped); !ok || got.Code != CodeNotFound {
		t.Errorf("errors.AsType = %v, %v", got, ok)
	}
}

func TestErrorCodeParse(t *testing.T) {
	// The catalog exactly as SPEC §13.3 lists it.
	const catalog = "bad-request unsupported-version op-mismatch class-mismatch target-mismatch sender-mismatch " +
		"unauthenticated permission-denied not-found already-exists conflict contract-mismatch contract-invalid " +
		"failed-precondition deadline-exceeded cancelled expired unavailable unimplemented resource-exhausted internal"
	var got []string
	for _, c := range catalogCodes {
		got = append(got, string(c))
	}
	if strings.Join(got, " ") != catalog {
		t.Errorf("catalog = %s", strings.Join(got, " "))
	}
	for _, s := range strings.Fields(catalog) {
		if c, err := parseErrorCode(s); err != nil || !c.isCatalog() {
			t.Errorf("parseErrorCode(%q) = %q, %v", s, c, err)
		}
	}
	for _, s := range []string{"com.acme.quota", "ai.cotal.ep.x", "a.b", strings.Repeat("a", 30) + "." + strings.Repeat("b", 33)} {
		if c, err := parseErrorCode(s); err != nil || c.isCatalog() {
			t.Errorf("parseErrorCode(%q) = %q, %v; want an extension code", s, c, err)
		}
	}
	for _, s := range []string{
		"", "oops", "Bad-Request", "com.Acme.quota", "com..acme", "com.acme.", ".com.acme", "com.-acme", "com_acme.x",
		"com.acme quota", strings.Repeat("a", 30) + "." + strings.Repeat("b", 34), // 65 bytes
	} {
		if _, err := parseErrorCode(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("parseErrorCode(%q) = %v, want invalid", s, err)
		}
	}
}

func TestEventPayload(t *testing.T) {
	e, err := DecodeEventPayload([]byte(`{"v":1,"topic":"goal.` + ownerA + `.alice.` + envUID + `.g1.progress","ts":1710000000000,"data":{"pct":50},"correlation":{"traceparent":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeEventPayload(b)
	if err != nil || !reflect.DeepEqual(back, e) {
		t.Errorf("round trip %+v, %v; want %+v", back, err, e)
	}
	for _, tc := range []struct{ name, in, field string }{
		{"v 2", `{"v":2,"topic":"a","ts":1,"data":1}`, "v"},
		{"v missing", `{"topic":"a","ts":1,"data":1}`, "v"},
		{"topic empty token", `{"v":1,"topic":"a..b","ts":1,"data":1}`, "topic"},
		{"topic wildcard", `{"v":1,"topic":"a.*","ts":1,"data":1}`, "topic"},
		{"topic missing", `{"v":1,"ts":1,"data":1}`, "topic"},
		{"ts zero", `{"v":1,"topic":"a","ts":0,"data":1}`, "ts"},
		{"ts a string", `{"v":1,"topic":"a","ts":"1","data":1}`, "ts"},
		{"ts missing", `{"v":1,"topic":"a","data":1}`, "ts"},
		{"data missing", `{"v":1,"topic":"a","ts":1}`, "data"},
		{"duplicate data", `{"v":1,"topic":"a","ts":1,"data":1,"data":2}`, "event"},
		{"correlation not an object", `{"v":1,"topic":"a","ts":1,"data":1,"correlation":[]}`, "correlation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeEventPayload([]byte(tc.in))
			v, ok := errors.AsType[*ValidationError](err)
			if !ok || v.Field != tc.field {
				t.Errorf("DecodeEventPayload(%s) = %v, want an invalid %s", tc.in, err, tc.field)
			}
		})
	}
	if err := (&EventPayload{V: 1, Topic: "a", TS: 1, Data: jsonNull}).Validate(); err != nil {
		t.Errorf("a null event data is present: %v", err)
	}
}

func TestUnmarshalNamesAreExact(t *testing.T) {
	var r EndpointReply
	if err := json.Unmarshal([]byte(`{"V":1,"id":"r1","ok":true,"data":1}`), &r); !errors.Is(err, ErrInvalid) {
		t.Errorf("EndpointReply: V filled v: %+v, %v", r, err)
	}
	var e EventPayload
	if err := json.Unmarshal([]byte(`{"v":1,"Topic":"a","ts":1,"data":1}`), &e); !errors.Is(err, ErrInvalid) {
		t.Errorf("EventPayload: Topic filled topic: %+v, %v", e, err)
	}
	if err := json.Unmarshal([]byte(`{"v":1,"topic":"a","ts":1,"data":1}`), &e); err != nil || e.Topic != "a" {
		t.Errorf("EventPayload = %+v, %v", e, err)
	}
}

func TestReplyValidate(t *testing.T) {
	r := &EndpointReply{V: EndpointEnvelopeVersion, ID: "r1", OK: true, Data: json.RawMessage(`{"n":1}`)}
	r.V = 2
	wantEndpointError(t, r.Validate(), CodeUnsupportedVersion, OutcomeUnknown, "version 2")
	r = &EndpointReply{V: EndpointEnvelopeVersion, ID: "r1", OK: true, Data: json.RawMessage(`{"n":`)}
	wantEndpointError(t, r.Validate(), CodeBadRequest, OutcomeUnknown, "data")
	r = &EndpointReply{V: EndpointEnvelopeVersion, ID: "r1", Error: &EndpointError{Code: CodeInternal, Details: []ErrorDetail{{Kind: "com.acme.x", Extra: map[string]json.RawMessage{"kind": json.RawMessage(`"y"`)}}}}}
	wantEndpointError(t, r.Validate(), CodeBadRequest, OutcomeUnknown, "error.details[0].kind")
	r.Error.Details[0].Extra = map[string]json.RawMessage{"n": json.RawMessage(`{`)}
	wantEndpointError(t, r.Validate(), CodeBadRequest, OutcomeUnknown, "error.details[0].n")
}

// TestArgsNullIsAccepted: a command whose input is void takes args absent or null, as the
// reference's callers send them.
func TestArgsNullIsAccepted(t *testing.T) {
	r, err := DecodeEndpointRequest(requestBody(t, func(m map[string]any) { m["args"] = nil }))
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Args) != "null" {
		t.Errorf("args = %s, want null", r.Args)
	}
}
