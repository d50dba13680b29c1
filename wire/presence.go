package wire

import (
	"encoding/json"
	"fmt"
	"time"
)

// ProtocolVersion is the wire version this implementation advertises in AgentCard.protocolVersion
// (SPEC §6: "0.4" is required from v0.4 on).
const ProtocolVersion = "0.4"

// Presence timing (SPEC §6).
const (
	// HeartbeatInterval is how often an instance rewrites its own presence key.
	HeartbeatInterval = 2 * time.Second
	// LivenessWindow is how stale a presence row may be before readers treat its instance as
	// offline.
	LivenessWindow = 6 * time.Second
)

// EndpointKind is an AgentCard's participation class.
type EndpointKind string

// The endpoint kinds.
const (
	KindAgent    EndpointKind = "agent"    // takes part in coordination
	KindEndpoint EndpointKind = "endpoint" // a logger, dashboard or other plain endpoint
)

// PresenceStatus is an instance's lifecycle status.
type PresenceStatus string

// The presence statuses. A live instance never heartbeats StatusOffline; it may write it once, on
// a graceful close, and readers derive it from staleness.
const (
	StatusIdle    PresenceStatus = "idle"
	StatusWaiting PresenceStatus = "waiting"
	StatusWorking PresenceStatus = "working"
	StatusOffline PresenceStatus = "offline"
)

// AttentionMode is how much peer traffic may interrupt an instance. Advisory.
type AttentionMode string

// The attention modes; absent means open.
const (
	AttentionOpen  AttentionMode = "open"
	AttentionDND   AttentionMode = "dnd"
	AttentionFocus AttentionMode = "focus"
)

// ChannelMode is a per-channel attention override. Advisory, never access control.
type ChannelMode string

// The channel modes.
const (
	// ChannelQuiet buffers a channel's messages without waking, except for an @mention.
	ChannelQuiet ChannelMode = "quiet"
	// ChannelMuted drops a channel's messages on receive, @mentions included.
	ChannelMuted ChannelMode = "muted"
)

// ConditionCode is the closed, provider-neutral category of a PresenceCondition.
type ConditionCode string

// The condition codes.
const (
	ConditionRateLimit  ConditionCode = "rate_limit"
	ConditionOverloaded ConditionCode = "overloaded"
	ConditionAuth       ConditionCode = "auth"
	ConditionBilling    ConditionCode = "billing"
	ConditionBudget     ConditionCode = "budget"
	ConditionContext    ConditionCode = "context"
	ConditionModel      ConditionCode = "model"
	ConditionRequest    ConditionCode = "request"
	ConditionServer     ConditionCode = "server"
	ConditionRetrying   ConditionCode = "retrying"
	ConditionApproval   ConditionCode = "approval"
	ConditionInput      ConditionCode = "input"
	ConditionFailed     ConditionCode = "failed"
)

var (
	endpointKinds  = []EndpointKind{KindAgent, KindEndpoint}
	statuses       = []PresenceStatus{StatusIdle, StatusWaiting, StatusWorking, StatusOffline}
	attentionModes = []AttentionMode{AttentionOpen, AttentionDND, AttentionFocus}
	channelModes   = []ChannelMode{ChannelQuiet, ChannelMuted}
	conditionCodes = []ConditionCode{
		ConditionRateLimit, ConditionOverloaded, ConditionAuth, ConditionBilling, ConditionBudget,
		ConditionContext, ConditionModel, ConditionRequest, ConditionServer, ConditionRetrying,
		ConditionApproval, ConditionInput, ConditionFailed,
	}
)

// oneOf checks that v is in the closed set, returning a *ValidationError listing the set.
func oneOf[T ~string](field string, v T, set []T) error {
	for _, s := range set {
		if v == s {
			return nil
		}
	}
	return Invalidf(field, string(v), "must be one of %q", set)
}

// AgentSkill is one skill an AgentCard advertises.
type AgentSkill struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// AgentCard is an instance's identity record (SPEC §6). ID is the principal dot-form, the same
// value as the presence key and every from.id the instance sends.
type AgentCard struct {
	ID              string         `json:"id"`
	Name            string         `json:"name"`
	Kind            EndpointKind   `json:"kind"`
	Owner           string         `json:"owner,omitempty"`
	Actor           string         `json:"actor,omitempty"`
	Role            string         `json:"role,omitempty"`
	Description     string         `json:"description,omitempty"`
	Tags            []string       `json:"tags,omitempty"`
	Skills          []AgentSkill   `json:"skills,omitempty"`
	ProtocolVersion string         `json:"protocolVersion,omitempty"`
	Meta            map[string]any `json:"meta,omitempty"`
}

// Validate checks the card's required fields, returning a *ValidationError: ID a principal
// dot-form, Name non-empty and at most MaxNameLength, Kind agent or endpoint, and Owner and Actor,
// when set, equal to ID's tokens.
func (c *AgentCard) Validate() error {
	p, err := ParsePrincipal(c.ID)
	if err != nil {
		return asField(err, "id")
	}
	if err := validateName(c.Name); err != nil {
		return err
	}
	if err := oneOf("kind", c.Kind, endpointKinds); err != nil {
		return err
	}
	if c.Owner != "" && c.Owner != p.Owner() {
		return Invalidf("owner", c.Owner, "must equal the owner of id %q", c.ID)
	}
	if c.Actor != "" && c.Actor != p.Actor() {
		return Invalidf("actor", c.Actor, "must equal the actor of id %q", c.ID)
	}
	for i, s := range c.Skills {
		if s.ID == "" || s.Name == "" {
			return Invalid(fmt.Sprintf("skills[%d]", i), "", "needs an id and a name")
		}
	}
	return nil
}

// PresenceCondition is a condition an instance's harness reported. It is relayed, never inferred.
type PresenceCondition struct {
	Code    ConditionCode `json:"code"`
	Message string        `json:"message,omitempty"`
	Since   EpochMillis   `json:"since,omitempty"`
	Source  string        `json:"source,omitempty"`
}

// Presence is an instance's row in the presence bucket (SPEC §6), stored under its card's ID.
type Presence struct {
	Card          AgentCard              `json:"card"`
	Status        PresenceStatus         `json:"status"`
	TS            EpochMillis            `json:"ts"`
	Activity      string                 `json:"activity,omitempty"`
	ActivitySince EpochMillis            `json:"activitySince,omitempty"`
	StatusSince   EpochMillis            `json:"statusSince,omitempty"`
	ActiveAt      EpochMillis            `json:"activeAt,omitempty"`
	Attention     AttentionMode          `json:"attention,omitempty"`
	ChannelModes  map[string]ChannelMode `json:"channelModes,omitempty"`
	Condition     *PresenceCondition     `json:"condition,omitempty"`
	Environment   string                 `json:"environment,omitempty"`
	LifecycleUID  LifecycleUID           `json:"lifecycleUid,omitempty"`
}

// Validate checks the row, returning a *ValidationError naming the first bad field.
func (p *Presence) Validate() error {
	if err := p.Card.Validate(); err != nil {
		return Within("card", err)
	}
	if err := oneOf("status", p.Status, statuses); err != nil {
		return err
	}
	if p.TS <= 0 {
		return Invalid("ts", "", "must be a positive epoch-millisecond time")
	}
	if p.Attention != "" {
		if err := oneOf("attention", p.Attention, attentionModes); err != nil {
			return err
		}
	}
	for ch, mode := range p.ChannelModes {
		if err := ValidateChannel(ch); err != nil {
			return Within("channelModes", err)
		}
		if err := oneOf("channelModes."+ch, mode, channelModes); err != nil {
			return err
		}
	}
	if p.Condition != nil {
		if err := oneOf("condition.code", p.Condition.Code, conditionCodes); err != nil {
			return err
		}
	}
	if p.LifecycleUID != "" {
		if _, err := ParseLifecycleUID(string(p.LifecycleUID)); err != nil {
			return err
		}
	}
	return nil
}

// Stale reports whether the row is older than LivenessWindow at now, in which case readers treat
// the instance as offline whatever its status says.
func (p *Presence) Stale(now time.Time) bool {
	return now.Sub(p.TS.Time()) > LivenessWindow
}

// DecodePresence decodes and validates a presence row read under key. A row whose card.id is not
// its key is refused (SPEC §6: readers drop it), as is one that fails Validate or carries a field
// of another stored shape (a message's from or parts: a copy, see checkForeignRow); the error is
// a *ValidationError.
func DecodePresence(key string, data []byte) (*Presence, error) {
	if err := checkForeignFields("presence", data, presenceForeignFields); err != nil {
		return nil, err
	}
	var p Presence
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, Invalidf("presence", key, "is not a JSON presence row: %v", err)
	}
	if p.Card.ID != key {
		return nil, Invalidf("card.id", p.Card.ID, "must equal its presence key %q", key)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}
