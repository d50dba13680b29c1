package mcptools

import (
	"slices"
	"strings"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/wire"
)

// The attention state machine (SPEC §6, the reference's push semantics): what an arrival does
// depends on how it was addressed, the channel's mode and the agent's attention.
//
//	arrival          open                 dnd                  focus
//	DM / anycast     buffer + wake        buffer + wake        buffer + wake
//	@mention         buffer + wake        buffer + wake        held for recall, wake to pull
//	ambient          buffer, wake if idle buffer, no wake      held for recall, no wake
//	                 (else once idle)
//
// Before the global mode: a DM or anycast always gets through; a muted channel drops what it
// carries, mentions too, for good; a quiet channel holds its ambient for pulling only (no wake,
// even under focus) while a mention on it still wakes. Replayed history never wakes.

// arrival is what the machine decided for one delivery.
type arrival struct {
	// drop: not buffered, not recallable.
	drop bool
	// wake: announce it to the harness now.
	wake bool
	// held: kept for recall (focus) or for pulling only (quiet), shown after what was not.
	held bool
	// later: it would have woken an idle agent; it wakes the agent once its turn ends.
	later bool
}

// attention is the agent's attention and channel modes, as it last set them, and who it is to a
// mention.
type attention struct {
	mode     wire.AttentionMode
	channels map[string]wire.ChannelMode
	// names are the lowercase names a mention may carry for this agent.
	names []string
	// working is whether the agent said it is working: ambient then waits for it to be idle.
	working bool
}

// mentioned reports whether d mentions the agent.
func (a *attention) mentioned(d *cotal.Delivery) bool {
	for _, m := range d.Message.Mentions {
		if slices.Contains(a.names, strings.ToLower(m)) {
			return true
		}
	}
	return false
}

// decide applies the machine to d.
func (a *attention) decide(d *cotal.Delivery) arrival {
	if d.Kind != wire.DeliveryChannel {
		return arrival{wake: true} // directed: always through
	}
	mention := a.mentioned(d)
	switch a.channels[d.Channel] {
	case wire.ChannelMuted:
		return arrival{drop: true}
	case wire.ChannelQuiet:
		if !mention {
			return arrival{held: true}
		}
	}
	var out arrival
	switch a.mode {
	case wire.AttentionFocus:
		out = arrival{held: true, wake: mention}
	case wire.AttentionDND:
		out = arrival{wake: mention}
	default:
		out = arrival{wake: mention || !a.working, later: !mention && a.working}
	}
	if d.Historical {
		out.wake, out.later = false, false
	}
	return out
}
