package meshwire

import (
	"encoding/json"
	"reflect"
	"testing"
)

// sameJSON reports whether a and b encode the same JSON value.
func sameJSON(t *testing.T, a []byte, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// TestMembershipRowsOnTheWire pins the membership feed's rows to the reference's field names
// (SPEC §8: {live, durable, observedAt}); an empty list is [] and never null.
func TestMembershipRowsOnTheWire(t *testing.T) {
	row := MembershipRow{Live: []string{"team.>"}, Durable: []string{}, ObservedAt: 1700000000000}
	if b, _ := json.Marshal(row); !sameJSON(t, b, `{"live":["team.>"],"durable":[],"observedAt":1700000000000}`) {
		t.Errorf("membership row = %s", b)
	}
	if b, _ := json.Marshal(MembershipFeedRow{ObservedAt: 1700000000000, Count: 2}); !sameJSON(t, b, `{"observedAt":1700000000000,"count":2}`) {
		t.Errorf("feed row = %s", b)
	}
	later := MembershipRow{Live: []string{"team.>"}, Durable: []string{}, ObservedAt: 1700000009999}
	if !row.SameMembership(&later) {
		t.Error("rows of the same channels observed at different times differ")
	}
	if other := (MembershipRow{Live: []string{"team.>"}, Durable: []string{"general"}}); row.SameMembership(&other) {
		t.Error("rows of different durable channels are the same")
	}
}
