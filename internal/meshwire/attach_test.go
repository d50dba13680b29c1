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
		{`{"k":"data","b":""}`, AttachFrame{Kind: AttachData}},
		{`{"k":"end","reason":"node-drained-2"}`, AttachFrame{Kind: AttachEnd, Reason: "node-drained-2"}},
		{`{"k":"resize","cols":100000,"rows":1}`, AttachFrame{Kind: AttachResize, Cols: 100000, Rows: 1}},
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
		`{"k":"resize","cols":0,"rows":40}`, `{"k":"resize","cols":80,"rows":100001}`, `{"k":"end"}`,
		`{"k":"end","reason":"Bored"}`, `{"k":"end","reason":"-x"}`, `{"k":"drop","bytes":0}`, `{"k":"drop","bytes":-4}`,
		`{"k":"data","b":"aGk=","extra":1}`, `{"k":"ready"}{"k":"ready"}`, `{"k":"data","b":"aGk=","reason":"closed"}`,
		`{"K":"ready"}`, `{"k":"data"}`, `{"k":"data","b":"aGk"}`, `{"k":"data","b":"aG\nk="}`, `{"k":"data","b":"a==="}`,
		`{"k":"resize","cols":"80","rows":24}`, `{"k":"resize","cols":80.5,"rows":24}`, "{\"k\":\"ready\",\"x\":\"\xff\"}",
		`{"k":"data","b":"` + strings.Repeat("A", maxAttachBase64+4) + `"}`,
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
		if err != nil || again.Kind != fr.Kind || string(again.Data) != string(fr.Data) || again.Reason != fr.Reason || again.Cols != fr.Cols || again.Bytes != fr.Bytes {
			t.Fatalf("%s round-trips to %+v, %v", raw, again, err)
		}
	})
}

func TestRailFrames(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want RailFrame
	}{
		{`{"t":"f","seq":1,"data":{"k":"ready"}}`, RailFrame{Kind: RailData, Seq: 1, Data: []byte(`{"k":"ready"}`)}},
		{`{"t":"f","seq":9,"data":null,"ack":4}`, RailFrame{Kind: RailData, Seq: 9, Data: []byte(`null`), Ack: 4, HasAck: true}},
		{`{"t":"credit","ack":0}`, RailFrame{Kind: RailCredit}},
		{`{"t":"close"}`, RailFrame{Kind: RailClose}},
	} {
		f, err := DecodeRailFrame([]byte(tc.raw))
		if err != nil {
			t.Errorf("%s: %v", tc.raw, err)
			continue
		}
		if f.Kind != tc.want.Kind || f.Seq != tc.want.Seq || string(f.Data) != string(tc.want.Data) || f.Ack != tc.want.Ack || f.HasAck != tc.want.HasAck {
			t.Errorf("%s decoded to %+v", tc.raw, f)
		}
		if got := string(f.Encode()); got != tc.raw {
			t.Errorf("%s encodes back as %s", tc.raw, got)
		}
	}
	// Integers as any JSON party writes them.
	if f, err := DecodeRailFrame([]byte(`{"t":"f","seq":2.0,"data":1,"ack":1e0}`)); err != nil || f.Seq != 2 || f.Ack != 1 {
		t.Errorf("seq 2.0, ack 1e0 decoded to %+v, %v", f, err)
	}
	for _, raw := range []string{
		``, `null`, `[]`, `"f"`, `{}`, `{"t":"x"}`, `{"t":"f","seq":0,"data":1}`, `{"t":"f","seq":1}`, `{"t":"f","seq":1.5,"data":1}`,
		`{"t":"f","seq":9007199254740992,"data":1}`, `{"t":"f","seq":"1","data":1}`, `{"t":"f","seq":1,"data":1,"ack":-1}`,
		`{"t":"f","seq":1,"data":1,"x":0}`, `{"t":"credit"}`, `{"t":"credit","ack":1,"seq":1}`, `{"t":"close","ack":0}`,
		`{"T":"close"}`, `{"t":"close"} {"t":"close"}`, "{\"t\":\"close\",\"\xff\":1}", `{"t":"credit","ack":null}`,
	} {
		if f, err := DecodeRailFrame([]byte(raw)); err == nil {
			t.Errorf("%.60s decoded to %+v", raw, f)
		}
	}
}

func FuzzDecodeRailFrame(f *testing.F) {
	for _, seed := range []string{`{"t":"f","seq":1,"data":{"k":"ready"},"ack":3}`, `{"t":"credit","ack":7}`, `{"t":"close"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fr, err := DecodeRailFrame(raw)
		if err != nil {
			return
		}
		again, err := DecodeRailFrame(fr.Encode())
		if err != nil || again.Kind != fr.Kind || again.Seq != fr.Seq || again.Ack != fr.Ack || again.HasAck != fr.HasAck {
			t.Fatalf("%s round-trips to %+v, %v", raw, again, err)
		}
	})
}
