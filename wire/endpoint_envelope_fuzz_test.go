package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecodeEndpointRequest checks that no body makes DecodeEndpointRequest panic, that every
// refusal is an *EndpointError that says the command did not run, and that an accepted request
// re-encodes into a body that decodes to an equal request.
func FuzzDecodeEndpointRequest(f *testing.F) {
	full, err := json.Marshal(fullRequest())
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(full), // every member set, escapes and U+2028 in auth, HTML characters in args
		`{"v":1,"id":"a","op":{"endpoint":"manager","command":"describe"},"class":"ephemeral","replyExpected":false,` +
			`"from":{"id":"local.alice","name":"alice"}}`, // the smallest valid body
		`{"v":2,"op":[]}`,                           // a later version of another shape: unsupported-version first
		`{"v":1,"v":1}`,                             // a duplicate name, which encoding/json would accept
		`{"v":1,"id":"\ud800"}`,                     // a lone surrogate
		`{"V":1,"ID":"a"}`,                          // names differing only in case, which encoding/json would match
		`{"v":1.0e0,"deadlineMs":9007199254740992}`, // 1 in another spelling; the first integer past 2^53-1
		`{"v":1,"args":{"n":1e400}}`,                // a number out of range
		`[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]`,  // nesting, and not an object
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeEndpointRequest(body)
		if err != nil {
			e, ok := errors.AsType[*EndpointError](err)
			if !ok || e.Outcome != OutcomeNotExecuted || (e.Code != CodeBadRequest && e.Code != CodeUnsupportedVersion) {
				t.Fatalf("DecodeEndpointRequest(%q) refused with %v (%T)", body, err, err)
			}
			return
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", r, err)
		}
		back, err := DecodeEndpointRequest(again)
		if err != nil {
			t.Fatalf("DecodeEndpointRequest(%q) accepted, but its re-encoding %q is refused: %v", body, again, err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip of %q\n got %+v\nwant %+v", body, back, r)
		}
	})
}
