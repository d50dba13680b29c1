package wire

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// channelPath renders a channel as the dotted tail of a chat subject (SPEC §3): segments are
// trimmed, empty ones dropped and each sanitised with Token; '*' and '>' survive only as whole
// segments, '>' only last, and only when wildcards are allowed (patterns, never a publish).
func channelPath(channel string, wildcards bool) (string, error) {
	if n := utf16Len(channel); n > maxChannelLength {
		return "", Invalidf("channel", channel, "is %d characters long; the limit is %d", n, maxChannelLength)
	}
	segs := make([]string, 0, strings.Count(channel, ".")+1)
	for seg := range strings.SplitSeq(channel, ".") {
		if seg = trimSpaceES(seg); seg != "" {
			segs = append(segs, seg)
		}
	}
	if len(segs) == 0 {
		return "", Invalid("channel", channel, "must name at least one segment")
	}
	for i, seg := range segs {
		switch {
		case seg == "*" || seg == ">":
			if !wildcards {
				return "", Invalid("channel", channel, "a published channel must be concrete: no '*' or '>' segment")
			}
			if seg == ">" && i != len(segs)-1 {
				return "", Invalid("channel", channel, "'>' is only valid as the last segment")
			}
		default:
			segs[i] = Token(seg)
		}
	}
	return strings.Join(segs, "."), nil
}

// ValidateChannelPattern checks a channel written as policy (an allowSubscribe or allowPublish
// entry, a subscribe list, a join target): every dot-separated segment is one token of
// [A-Za-z0-9_-], or '*', or a final '>'. Unlike a subject builder it never sanitises: an ACL
// entry "foo/bar" would otherwise grant the channel "foo_bar", which nobody named.
func ValidateChannelPattern(channel string) error {
	if n := utf16Len(channel); n > maxChannelLength {
		return Invalidf("channel", channel, "is %d characters long; the limit is %d", n, maxChannelLength)
	}
	if channel == "" {
		return Invalid("channel", channel, "must not be empty")
	}
	last := strings.Count(channel, ".")
	i := 0
	for seg := range strings.SplitSeq(channel, ".") {
		switch {
		case seg == "":
			return Invalid("channel", channel, "has an empty segment (a leading, trailing or double '.')")
		case seg == ">":
			if i != last {
				return Invalid("channel", channel, "'>' is only valid as the last segment")
			}
		case seg == "*":
		case !isTokenSafe(seg):
			return Invalidf("channel", channel, "segment %q must be one token of [A-Za-z0-9_-], '*' or '>'", seg)
		}
		i++
	}
	return nil
}

// ValidateChannel checks a concrete channel written by a user: the pattern grammar without
// wildcards.
func ValidateChannel(channel string) error {
	if err := ValidateChannelPattern(channel); err != nil {
		return err
	}
	if !IsConcreteChannel(channel) {
		return Invalid("channel", channel, "must be concrete: no '*' or '>' segment")
	}
	return nil
}

// IsConcreteChannel reports whether channel names one channel (no '*' or '>' segment), which is
// what a publish needs.
func IsConcreteChannel(channel string) bool {
	for seg := range strings.SplitSeq(channel, ".") {
		if seg = trimSpaceES(seg); seg == "*" || seg == ">" {
			return false
		}
	}
	return true
}

// ChannelInAllow reports whether some entry of the ACL allow covers channel, exactly or as a
// wildcard subtree ("team.>" covers "team.backend").
func ChannelInAllow(allow []string, channel string) bool {
	for _, a := range allow {
		if SubjectMatches(a, channel) {
			return true
		}
	}
	return false
}

// DeliveryClass is a channel's delivery guarantee (SPEC §4, §7).
type DeliveryClass string

// The delivery classes.
const (
	// ClassLive is native subscription delivery: at most once, to whoever is subscribed.
	ClassLive DeliveryClass = "live"
	// ClassDurable adds a per-member backstop: at least once to current members within retention.
	ClassDurable DeliveryClass = "durable"
)

// defaultDeliveryClass is the effective class when neither the channel nor the space defaults
// name one.
const defaultDeliveryClass = ClassDurable

// ChannelDefaultsKey is the channels-bucket key holding the space defaults. '=' is a legal KV key
// character that Token never produces, so it cannot collide with a channel.
const ChannelDefaultsKey = "=defaults"

// Limits of ChannelConfig's free-text fields (SPEC §7).
const (
	maxChannelDescription  = 200
	maxChannelInstructions = 2000
)

// ChannelConfig is one channel's entry in the channels bucket (SPEC §7). Every field is optional;
// unset ones fall back to the space's ChannelDefaults. The zero value is an empty config.
type ChannelConfig struct {
	Replay        *bool         `json:"replay,omitempty"`
	ReplayWindow  string        `json:"replayWindow,omitempty"`
	DeliveryClass DeliveryClass `json:"deliveryClass,omitempty"`
	Description   string        `json:"description,omitempty"`
	Instructions  string        `json:"instructions,omitempty"`
}

// ChannelDefaults is the space-wide entry under ChannelDefaultsKey.
type ChannelDefaults struct {
	Replay        *bool         `json:"replay,omitempty"`
	ReplayWindow  string        `json:"replayWindow,omitempty"`
	DeliveryClass DeliveryClass `json:"deliveryClass,omitempty"`
}

// Validate checks every set field and returns a *ValidationError naming the first bad one.
func (c *ChannelConfig) Validate() error {
	if err := validateChannelOptions(c.ReplayWindow, c.DeliveryClass); err != nil {
		return err
	}
	if n := utf16Len(c.Description); n > maxChannelDescription {
		return Invalidf("description", "", "is %d characters long; the limit is %d", n, maxChannelDescription)
	}
	if n := utf16Len(c.Instructions); n > maxChannelInstructions {
		return Invalidf("instructions", "", "is %d characters long; the limit is %d", n, maxChannelInstructions)
	}
	return nil
}

// Validate checks every set field and returns a *ValidationError naming the first bad one.
func (d *ChannelDefaults) Validate() error {
	return validateChannelOptions(d.ReplayWindow, d.DeliveryClass)
}

func validateChannelOptions(window string, class DeliveryClass) error {
	if window != "" {
		if _, err := parseReplayWindow(window); err != nil {
			return err
		}
	}
	switch class {
	case "", ClassLive, ClassDurable:
		return nil
	}
	return Invalidf("deliveryClass", string(class), "must be %q or %q", ClassLive, ClassDurable)
}

// DecodeChannelConfig decodes and validates a channels-bucket entry. Unknown fields are ignored,
// but a row carrying a field of another stored shape is refused (checkForeignRow): a JetStream
// acknowledgement or a copied message stored under a channel's key must never read as a config
// of all defaults.
func DecodeChannelConfig(data []byte) (*ChannelConfig, error) {
	if err := checkForeignRow("channel config", data); err != nil {
		return nil, err
	}
	var c ChannelConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("decode channel config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// DecodeChannelDefaults decodes and validates the ChannelDefaultsKey entry, refusing a row that
// carries a field of another stored shape as DecodeChannelConfig does.
func DecodeChannelDefaults(data []byte) (*ChannelDefaults, error) {
	if err := checkForeignRow("channel defaults", data); err != nil {
		return nil, err
	}
	var d ChannelDefaults
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("decode channel defaults: %w", err)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// parseReplayWindow parses a replay window matching ^\d+(s|m|h|d)$, such as "24h" or "7d". It
// returns a *ValidationError for any other form, or for a window too long to represent.
func parseReplayWindow(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, Invalid("replayWindow", s, `must match ^\d+(s|m|h|d)$, e.g. "24h"`)
	}
	digits, unit := s[:len(s)-1], s[len(s)-1]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, Invalid("replayWindow", s, `must match ^\d+(s|m|h|d)$, e.g. "24h"`)
		}
	}
	var per time.Duration
	switch unit {
	case 's':
		per = time.Second
	case 'm':
		per = time.Minute
	case 'h':
		per = time.Hour
	case 'd':
		per = 24 * time.Hour
	default:
		return 0, Invalid("replayWindow", s, `must match ^\d+(s|m|h|d)$, e.g. "24h"`)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > int64(maxDuration/per) {
		return 0, Invalid("replayWindow", s, "is too long to represent")
	}
	return time.Duration(n) * per, nil
}

const maxDuration = time.Duration(1<<63 - 1)

// EffectiveChannel is a channel's resolved configuration. It is the one answer every path (live
// join, durable fan-out, history read, membership surfacing) must use (SPEC §7, §12 item 11).
type EffectiveChannel struct {
	// Replay reports whether a join backfills history.
	Replay bool
	// ReplayWindow limits the backfill horizon; zero means the whole retained history.
	ReplayWindow time.Duration
	// DeliveryClass is live or durable.
	DeliveryClass DeliveryClass
}

// ResolveChannel resolves a channel's effective configuration: each field from the channel's own
// config, else from the space defaults, else replay on, no window and class durable. Either
// argument may be nil. Both are assumed validated (DecodeChannelConfig, DecodeChannelDefaults); a
// window that does not parse counts as unset.
func ResolveChannel(ch *ChannelConfig, defaults *ChannelDefaults) EffectiveChannel {
	if ch == nil {
		ch = &ChannelConfig{}
	}
	if defaults == nil {
		defaults = &ChannelDefaults{}
	}
	eff := EffectiveChannel{Replay: true, DeliveryClass: defaultDeliveryClass}
	switch {
	case ch.Replay != nil:
		eff.Replay = *ch.Replay
	case defaults.Replay != nil:
		eff.Replay = *defaults.Replay
	}
	window := cmp.Or(ch.ReplayWindow, defaults.ReplayWindow)
	if window != "" {
		eff.ReplayWindow, _ = parseReplayWindow(window) // validated on decode; a bad one reads as unset
	}
	if class := cmp.Or(ch.DeliveryClass, defaults.DeliveryClass); class != "" {
		eff.DeliveryClass = class
	}
	return eff
}

// NormalizeMentions puts a mentions list in its wire form: each name trimmed and lower-cased,
// empty names dropped, duplicates removed keeping the first, and nil when nothing is left, so the
// field is omitted rather than sent as [].
func NormalizeMentions(mentions []string) []string {
	var out []string
	seen := make(map[string]bool, len(mentions))
	for _, m := range mentions {
		m = strings.ToLower(trimSpaceES(m))
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		out = append(out, m)
	}
	return out
}
