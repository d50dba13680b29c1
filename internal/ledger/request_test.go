package ledger

import (
	"errors"
	"slices"
	"testing"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/wire"
)

// TestDefaultPublishPolicy is the one policy of every command that runs an agent: it may post to
// the concrete channels it subscribes to, unless AllowPublish names its channels.
func TestDefaultPublishPolicy(t *testing.T) {
	for _, tc := range []struct {
		name               string
		subscribe, publish []string
		want               []string
	}{
		{"subscribed channels", []string{"general", "team.backend"}, nil, []string{"general", "team.backend"}},
		{"a pattern names no channel to post to", []string{"general", "team.*", "ops.>"}, nil, []string{"general"}},
		{"allow-publish narrows", []string{"general", "random"}, []string{"general"}, []string{"general"}},
		{"nothing subscribed", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Request{Subscribe: tc.subscribe, AllowPublish: tc.publish}.WithDefaultPublish().AllowPublish
			if !slices.Equal(got, tc.want) {
				t.Errorf("AllowPublish = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRequestCapabilities: a known capability reaches the grant; an unknown one is a
// *wire.ValidationError before anything is minted.
func TestRequestCapabilities(t *testing.T) {
	g, err := Request{Name: "carol", Capabilities: []string{authority.CapabilitySpawn}}.grant()
	if err != nil || !slices.Equal(g.Capabilities, []string{authority.CapabilitySpawn}) {
		t.Errorf("grant = %+v, %v", g.Capabilities, err)
	}
	var verr *wire.ValidationError
	if err := (Request{Name: "carol", Capabilities: []string{"root"}}).Validate(); !errors.As(err, &verr) || verr.Field != "capability" {
		t.Errorf("an unknown capability = %v, want a ValidationError on capability", err)
	}
}
