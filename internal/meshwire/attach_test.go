package meshwire

import (
	"strings"
	"testing"
)

func TestAttachFrames(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want AttachFrame
	}{
		{`{"k":"data","b":"aGk="}`, AttachFrame{Kind: AttachData, Data: []byte("hi")}},
		{`{"k":"ready"}`, AttachFrame{Kind: AttachReady}},
		{`{"k":"resize","cols":120,"rows":40}`, AttachFrame{Kind: AttachResize, Cols: 120, Rows: 40}},
		{`{"k":"end","reason":"process-exit"}`, AttachFrame{Kind: AttachEnd, Reason: EndProcessExit}},
		{`{"k":"drop","bytes":512}`, AttachFrame{Kind: AttachDrop, Bytes: 512}},
	} {
		f, err := DecodeAttachFrame([]byte(tc.raw))
		if err != nil {
			t.Errorf("%s: %v", tc.raw, err)
			continue
		}
		if f.Kind != tc.want.Kind || string(f.Data) != string(tc.want.Data) || f.Cols != tc.want.Cols || f.Rows != tc.want.Rows || f.Reason != tc.want.Reason || f.Bytes != tc.want.Bytes {
			t.Errorf("%s decoded to %+v", tc.raw, f)
		}
		if got := string(f.Encode()); got != tc.raw {
			t.Errorf("%s encodes back as %s", tc.raw, got)
		}
	}
	for _, raw := range []string{
		``, `null`, `[]`, `{"k":"data","b":"***"}`, `{"k":"bogus"}`, `{"k":"ready","b":"aGk="}`,
		`{"k":"resize","cols":0,"rows":40}`, `{"k":"resize","cols":80,"rows":70000}`, `{"k":"end"}`,
		`{"k":"end","reason":"bored"}`, `{"k":"drop","bytes":0}`, `{"k":"drop","bytes":-4}`,
		`{"k":"data","b":"aGk=","extra":1}`, `{"k":"ready"}{"k":"ready"}`, `{"k":"data","b":"aGk=","reason":"closed"}`,
		`{"k":"data","b":"` + strings.Repeat("A", (MaxAttachData/3+1)*4) + `"}`,
	} {
		if f, err := DecodeAttachFrame([]byte(raw)); err == nil {
			t.Errorf("%.60s decoded to %+v", raw, f)
		}
	}
	if id := NewSessionID(); ValidateSessionID(id) != nil || len(id) != 43 {
		t.Errorf("NewSessionID = %q", id)
	}
}

func FuzzDecodeAttachFrame(f *testing.F) {
	for _, seed := range []string{`{"k":"data","b":"aGk="}`, `{"k":"resize","cols":1,"rows":1}`, `{"k":"end","reason":"closed"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fr, err := DecodeAttachFrame(raw)
		if err != nil {
			return
		}
		again, err := DecodeAttachFrame(fr.Encode())
		if err != nil || again.Kind != fr.Kind || string(again.Data) != string(fr.Data) {
			t.Fatalf("%s round-trips to %+v, %v", raw, again, err)
		}
	})
}
