package bench

import (
	"context"
	"encoding/json"
	"errors"
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
	sys, err := kr.MintSystemUser("cotal-varz", []string{varzPing}, nil, time.Minute)
	if err != nil {
		return nil, err
	}
	nc, err := dial.As(ctx, url, sys)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	if err := nc.PublishRequest(varzPing, inbox, nil); err != nil {
		return nil, err
	}
	var cpu []float64
	wait := varzFirst // the first reply may take a round trip through the cluster
	for {
		wctx, cancel := context.WithTimeout(ctx, wait)
		msg, err := sub.NextMsgWithContext(wctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && len(cpu) > 0 && ctx.Err() == nil {
			return cpu, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read broker VARZ: %w", err)
		}
		var rep struct {
			Data struct {
				CPU float64 `json:"cpu"`
			} `json:"data"`
		}
		if err := json.Unmarshal(msg.Data, &rep); err != nil {
			return nil, fmt.Errorf("decode broker VARZ: %w", err)
		}
		cpu = append(cpu, rep.Data.CPU)
		wait = varzGather
	}
}
