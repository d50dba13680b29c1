package sessionrail

import (
	"bytes"
	"encoding/json"
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
