package meshwire

import (
	"encoding/json"
	"os"
	"testing"
)

// TestSessionFrameVectors reads frames as the reference writes them (testdata/session_frames.json:
// its object literals, in its member order, through JSON.stringify) and writes each back byte
// for byte.
func TestSessionFrameVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/session_frames.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Terminal []string `json:"terminal"`
		Rail     []string `json:"rail"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	for _, want := range v.Terminal {
		f, err := DecodeAttachFrame([]byte(want))
		if err != nil {
			t.Errorf("%s: %v", want, err)
			continue
		}
		if got := string(f.Encode()); got != want {
			t.Errorf("%s encodes as %s", want, got)
		}
	}
	for _, want := range v.Rail {
		f, err := DecodeRailFrame([]byte(want))
		if err != nil {
			t.Errorf("%s: %v", want, err)
			continue
		}
		if got := string(f.Encode()); got != want {
			t.Errorf("%s encodes as %s", want, got)
		}
	}
	// Built here from values, the frames come out as the reference's.
	built := map[string][]byte{
		v.Terminal[0]: (&AttachFrame{Kind: AttachData, Data: []byte("hi")}).Encode(),
		v.Terminal[4]: (&AttachFrame{Kind: AttachResize, Cols: 120, Rows: 40}).Encode(),
		v.Rail[1]:     (&RailFrame{Kind: RailData, Seq: 2, Data: (&AttachFrame{Kind: AttachData, Data: []byte("ls\r")}).Encode(), Ack: 7, HasAck: true}).Encode(),
		v.Rail[4]:     (&RailFrame{Kind: RailCredit, Ack: 32}).Encode(),
	}
	for want, got := range built {
		if string(got) != want {
			t.Errorf("built %s, the reference writes %s", got, want)
		}
	}
}
