package meshwire

import (
	"strings"
	"testing"
)

func TestParseJournalRecord(t *testing.T) {
	act := `{"v":1,"kind":"activation","run":"r-1","n":0,"holder":"local.mgr","fencingToken":1,"epoch":1,"replayedTo":0,"at":1700000000000}`
	r, err := ParseJournalRecord([]byte(act))
	if err != nil || r.Kind != JournalActivation || r.Holder != "local.mgr" || r.FencingToken != 1 {
		t.Fatalf("activation = %+v, %v", r, err)
	}
	step := `{"v":1,"kind":"step","run":"r-1","n":1,"at":1700000000001,"entry":{"k":"call","state":"pending"}}`
	r, err = ParseJournalRecord([]byte(step))
	if err != nil || r.Kind != JournalStep || string(r.Entry) != `{"k":"call","state":"pending"}` {
		t.Fatalf("step = %+v, %v", r, err)
	}
	for name, bad := range map[string]string{
		"an unknown kind":         `{"v":1,"kind":"pause","run":"r","n":0,"at":1}`,
		"a step with a holder":    `{"v":1,"kind":"step","run":"r","n":0,"at":1,"entry":{},"holder":"x"}`,
		"a step without entry":    `{"v":1,"kind":"step","run":"r","n":0,"at":1}`,
		"version 2":               `{"v":2,"kind":"step","run":"r","n":0,"at":1,"entry":{}}`,
		"a negative ordinal":      `{"v":1,"kind":"step","run":"r","n":-1,"at":1,"entry":{}}`,
		"fencing token 0":         strings.Replace(act, `"fencingToken":1`, `"fencingToken":0`, 1),
		"an activation no holder": strings.Replace(act, `"holder":"local.mgr"`, `"holder":""`, 1),
		"not json":                `{"v":1,`,
		"replayed past itself":    strings.Replace(act, `"replayedTo":0`, `"replayedTo":3`, 1),
	} {
		if _, err := ParseJournalRecord([]byte(bad)); err == nil {
			t.Errorf("ParseJournalRecord accepted %s", name)
		}
	}
}

func TestRunIDs(t *testing.T) {
	for _, ok := range []string{"r-1", "run_0123456789abcdef", strings.Repeat("a", 64)} {
		if err := ValidateRunID(ok); err != nil {
			t.Errorf("ValidateRunID(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "r.1", "r/1", "r*", strings.Repeat("a", 65)} {
		if err := ValidateRunID(bad); err == nil {
			t.Errorf("ValidateRunID(%q) accepted", bad)
		}
	}
	if err := ValidateTakeoverID("b_c"); err == nil {
		t.Error("a takeover id with '_' was accepted; its durable name would be ambiguous")
	}
	if got := WFJReplayDurable("r-1", "tk1"); got != "wfj_r-1_tk1" {
		t.Errorf("WFJReplayDurable = %q", got)
	}
}
