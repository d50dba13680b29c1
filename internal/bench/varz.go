package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/dial"
	"github.com/gocotal/cotal/internal/jsapi"
)

// varzPing asks every server of the cluster for its VARZ.
const varzPing = jsapi.ServerVarz

// varzFirst is how long BrokerCPU waits for the first server's reply.
const varzFirst = 10 * time.Second

// varzGather is how long BrokerCPU waits for more servers after the last reply.
const varzGather = 250 * time.Millisecond

// BrokerCPU returns the CPU use of every broker serving url, in percent of one core, as each
// server reports it in VARZ. An embedded broker reports its whole process.
func BrokerCPU(ctx context.Context, kr *authority.Keyring, url string) ([]float64, error) {
	replies, err := dial.Servers(ctx, kr, url, varzPing, varzFirst, varzGather)
	if err != nil {
		return nil, fmt.Errorf("read broker VARZ: %w", err)
	}
	cpu := make([]float64, 0, len(replies))
	for _, raw := range replies {
		var rep struct {
			Data struct {
				CPU float64 `json:"cpu"`
			} `json:"data"`
		}
		if err := json.Unmarshal(raw, &rep); err != nil {
			return nil, fmt.Errorf("decode broker VARZ: %w", err)
		}
		cpu = append(cpu, rep.Data.CPU)
	}
	return cpu, nil
}
