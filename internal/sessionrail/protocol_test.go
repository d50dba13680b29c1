package sessionrail

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// FuzzRailReceive feeds a rail any run of frames, one a line, as a peer might send them: the
// rail never panics, and its handler sees frames numbered 1, 2, 3... and nothing else.
func FuzzRailReceive(f *testing.F) {
	for _, seed := range []string{
		"{\"t\":\"f\",\"seq\":1,\"data\":{\"k\":\"ready\"}}\n{\"t\":\"f\",\"seq\":2,\"data\":1,\"ack\":0}",
		"{\"t\":\"f\",\"seq\":1,\"data\":1}\n{\"t\":\"f\",\"seq\":1,\"data\":1}\n{\"t\":\"f\",\"seq\":3,\"data\":3}",
		"{\"t\":\"credit\",\"ack\":0}\n{\"t\":\"close\"}\n{\"t\":\"f\",\"seq\":1,\"data\":1}",
		"{\"t\":\"f\",\"seq\":1.0,\"data\":null}\n{\"t\":\"f\",\"seq\":2e0,\"data\":[]}",
		"{\"T\":\"f\",\"seq\":1,\"data\":1}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var mu sync.Mutex
		var seqs []int64
		r := start(Config{Window: 4, IdleCredit: -1, Stall: -1}, Handlers{
			Data: func(_ json.RawMessage, seq int64) error {
				mu.Lock()
				seqs = append(seqs, seq)
				mu.Unlock()
				return nil
			},
		}, "out", func(string, []byte) error { return nil })
		for line := range bytes.SplitSeq(in, []byte("\n")) {
			r.take(line)
			time.Sleep(0) // let the handler run between frames now and then
		}
		r.Close()
		r.Wait()
		mu.Lock()
		defer mu.Unlock()
		for i, seq := range seqs {
			if seq != int64(i+1) {
				t.Fatalf("the handler saw frames %v", seqs)
			}
		}
	})
}

// TestCreditVectors: a receiver credits every ceil(window/2) frames it takes, each credit the
// bytes the reference writes (testdata/credits.json), and nothing else while frames flow.
func TestCreditVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/credits.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Credits []struct {
			Window  int      `json:"window"`
			Deliver int      `json:"deliver"`
			Credits []string `json:"credits"`
		} `json:"credits"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	for _, tc := range v.Credits {
		var mu sync.Mutex
		var sent []string
		r := start(Config{Window: tc.Window, IdleCredit: -1, Stall: -1}, Handlers{Data: func(json.RawMessage, int64) error { return nil }},
			"in", func(_ string, data []byte) error {
				mu.Lock()
				sent = append(sent, string(data))
				mu.Unlock()
				return nil
			})
		for n := 1; n <= tc.Deliver; n++ {
			r.take(fmt.Appendf(nil, `{"t":"f","seq":%d,"data":%d}`, n, n))
			for r.Stats().Delivered < int64(n) {
				runtime.Gosched()
			}
		}
		r.Close()
		r.Wait()
		mu.Lock()
		got := sent[:len(sent)-1] // the last is the close
		if !slices.Equal(got, tc.Credits) {
			t.Errorf("window %d, %d frames: credits %q, want %q", tc.Window, tc.Deliver, got, tc.Credits)
		}
		mu.Unlock()
	}
}
