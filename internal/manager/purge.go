package manager

import (
	"context"
	"encoding/json"

	"github.com/gocotal/cotal/internal/endpoint"
	"github.com/gocotal/cotal/wire"
)

// purgeArgs are the purge command's input (the reference's schema).
type purgeArgs struct {
	IncludeDms bool `json:"includeDms"`
}

// PurgeResult is the purge command's output: how many messages went from the channels' history
// and, when asked, from the direct messages.
type PurgeResult struct {
	Chat uint64  `json:"chat"`
	DM   *uint64 `json:"dm,omitempty"`
}

// purge clears the space's history: every channel's and, with includeDms, every direct message.
// Only a caller that holds the manager.admin capability's rows reaches it: the broker refuses any
// other.
func (svc *Service) purge(ctx context.Context, req *endpoint.Request) (any, error) {
	if svc.cfg.Purge == nil {
		return nil, notExecuted(wire.CodeUnimplemented, "this manager holds no purger: it clears no history")
	}
	var args purgeArgs
	if err := json.Unmarshal(req.Args(), &args); err != nil {
		return nil, notExecuted(wire.CodeBadRequest, "args: %v", err)
	}
	chat, dm, err := svc.cfg.Purge(ctx, args.IncludeDms)
	if err != nil {
		return nil, err
	}
	svc.cfg.Log.Warn("purged the space's history", "caller", req.Caller(), "chat", chat, "dm", dm, "includeDms", args.IncludeDms)
	res := PurgeResult{Chat: chat}
	if args.IncludeDms {
		res.DM = &dm
	}
	return res, nil
}
