package wire

import "slices"

// MembershipRow is a principal's row in the membership feed (SPEC §8), stored in the space's
// membership bucket under the principal's dot-form (its card.id): the channel patterns its
// connections subscribe live, wildcards kept, and the channels it is a durable member of, each
// sorted, as observed at ObservedAt. The feed is display only: no delivery, ACL or authorization
// decision reads it.
type MembershipRow struct {
	Live       []string    `json:"live"`
	Durable    []string    `json:"durable"`
	ObservedAt EpochMillis `json:"observedAt"`
}

// SameMembership reports whether r and o list the same channels, whenever each was observed.
func (r *MembershipRow) SameMembership(o *MembershipRow) bool {
	return slices.Equal(r.Live, o.Live) && slices.Equal(r.Durable, o.Durable)
}

// MembershipFeedRow is the membership feed's heartbeat under MembershipFeedKey, rewritten at every
// reconcile of the feed even when no row changed, so that a reader can tell a current feed from a
// stale one: when the feed was last observed, and how many principal rows it holds.
type MembershipFeedRow struct {
	ObservedAt EpochMillis `json:"observedAt"`
	Count      int         `json:"count"`
}
