package runhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"

	cotal "github.com/gocotal/cotal"
	"github.com/gocotal/cotal/lang"
	"github.com/gocotal/cotal/wire"
)

// A conclave on the mesh is a channel its members read and post on while its body runs. A
// member's grant is fixed when its credential is minted, and a grant posts only to concrete
// channels, so the channel a conclave opens without a channel option is its run's own conclave
// channel: every seat the run spawns is granted it, and the conclaves of one run that name no
// channel share it. A conclave that names its channel takes members whose grants cover it.
// Membership is told to each member's own server as it changes, and carried in each turn the
// run asks of it; a run taken back opens again the conclaves it is inside.

// conclavePrefix is the first segment of a run's own conclave channel.
const conclavePrefix = "conclave"

// ConclaveChannel is the run's own conclave channel: conclave.<a digest of the run id>.
func ConclaveChannel(runID string) string {
	sum := sha256.Sum256([]byte(runID))
	return conclavePrefix + "." + hex.EncodeToString(sum[:6])
}

// openConclave is one conclave a run is inside: its channel and its members.
type openConclave struct {
	channel string
	members []seat
}

// conclavesOf lists the channels of the open conclaves agent is a member of, sorted.
func (r *hosted) conclavesOf(agent string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.conclaves {
		if slices.ContainsFunc(c.members, func(s seat) bool { return s.agent.String() == agent }) && !slices.Contains(out, c.channel) {
			out = append(out, c.channel)
		}
	}
	slices.Sort(out)
	return out
}

// OpenConclave opens the conclave req asks for: its channel, joined by its members (agents the
// run spawned, or whose grants cover the channel it names).
func (m *meshHandler) OpenConclave(ctx context.Context, req *lang.Request) (string, error) {
	seats := m.h.seatsOf()
	if seats == nil {
		return "", &lang.CapabilityRefusal{Code: "L5016", Message: "conclave is not durable on this host yet: its manager serves no seats"}
	}
	channel := ConclaveChannel(req.RunID)
	if c := req.Option("channel"); c != nil && c != lang.Undefined {
		channel = channelOf(c)
	}
	if err := wire.ValidateChannel(channel); err != nil {
		return "", fmt.Errorf("the conclave's channel: %w", err)
	}
	list, _ := req.Args[0].(*lang.Array)
	if list == nil {
		return "", errors.New("the conclave's members are no list")
	}
	c := openConclave{channel: channel}
	for _, v := range list.Elems {
		s, err := m.runSeat(req, v)
		if err != nil {
			return "", err
		}
		c.members = append(c.members, s)
	}
	m.r.mu.Lock()
	if m.r.conclaves == nil {
		m.r.conclaves = map[string]openConclave{}
	}
	m.r.conclaves[req.Key] = c
	m.r.mu.Unlock()
	for _, s := range c.members {
		if err := m.tellMember(ctx, seats, s, true); err != nil {
			// Opened for none: those told already are told again, without it.
			m.r.mu.Lock()
			delete(m.r.conclaves, req.Key)
			m.r.mu.Unlock()
			_ = m.tellMembers(seats, c.members)
			return "", err
		}
	}
	return channel, nil
}

// CloseConclave releases the conclave req opened: its members are told they left it. It is
// called for a body that was cancelled too, whose entry still records that it did not close.
func (m *meshHandler) CloseConclave(_ context.Context, req *lang.Request, _ string) error {
	m.r.mu.Lock()
	c, ok := m.r.conclaves[req.Key]
	delete(m.r.conclaves, req.Key)
	m.r.mu.Unlock()
	seats := m.h.seatsOf()
	if !ok || seats == nil {
		return nil
	}
	return m.tellMembers(seats, c.members)
}

// releaseConclaves releases every conclave the run is still inside: the run ended (or its host
// let it go) in the middle of one.
func (m *meshHandler) releaseConclaves() {
	m.r.mu.Lock()
	var members []seat
	for _, c := range m.r.conclaves {
		members = append(members, c.members...)
	}
	m.r.conclaves = nil
	m.r.mu.Unlock()
	if seats := m.h.seatsOf(); seats != nil && len(members) > 0 {
		if err := m.tellMembers(seats, members); err != nil {
			m.h.cfg.Log.Warn("run: release its conclaves", "run", m.r.id, "err", err)
		}
	}
}

// tellMembers tells every one of members the conclave channels it is a member of now, and
// returns what failed; a member its manager no longer runs has nothing to leave.
func (m *meshHandler) tellMembers(seats Seats, members []seat) error {
	var errs []error
	for _, s := range members {
		if err := m.tellMember(context.Background(), seats, s, false); err != nil && !errors.Is(err, ErrSeatGone) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// tellMember tells member s the conclave channels it is a member of now. Joining one, a member
// its manager no longer runs is started again as the run spawned it, as a turn would; one that
// cannot be is down (L4002).
func (m *meshHandler) tellMember(ctx context.Context, seats Seats, s seat, joining bool) error {
	channels := m.r.conclavesOf(s.agent.String())
	err := seats.Conclaves(s.agent.Actor(), channels)
	if !joining || !errors.Is(err, ErrSeatGone) {
		return err
	}
	if serr := m.respawn(ctx, seats, s); serr != nil {
		return &lang.EffectError{Code: "L4002", Kind: "agent-down", Message: fmt.Sprintf("%v; starting it again: %v", err, serr)}
	}
	if err := seats.Conclaves(s.agent.Actor(), channels); err != nil {
		if errors.Is(err, ErrSeatGone) {
			return &lang.EffectError{Code: "L4002", Kind: "agent-down", Message: err.Error()}
		}
		return err
	}
	return nil
}

// Membership keeps an agent's client joined to the conclave channels it is a member of, as its
// manager tells it or a turn's payload carries them. It is safe for concurrent use.
type Membership struct {
	mu     sync.Mutex
	joined map[string]bool // the channels joined as conclaves
}

// Sync joins the channels of want the client has not joined, and leaves those it joined as
// conclaves that want no longer lists; a channel the client joined on its own stays joined.
// It tries every channel, and returns what failed.
func (ms *Membership) Sync(ctx context.Context, c *cotal.Client, want []string) error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.joined == nil {
		ms.joined = map[string]bool{}
	}
	var errs []error
	for _, ch := range want {
		if ms.joined[ch] || slices.Contains(c.Channels(), ch) {
			continue
		}
		if _, err := c.Join(ctx, ch); err != nil {
			errs = append(errs, fmt.Errorf("join conclave channel %s: %w", ch, err))
			continue
		}
		ms.joined[ch] = true
	}
	for ch := range ms.joined {
		if slices.Contains(want, ch) {
			continue
		}
		if err := c.Leave(ctx, ch); err != nil {
			errs = append(errs, fmt.Errorf("leave conclave channel %s: %w", ch, err))
			continue // still joined: the next word retries it
		}
		delete(ms.joined, ch)
	}
	return errors.Join(errs...)
}
