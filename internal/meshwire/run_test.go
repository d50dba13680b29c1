package meshwire

import (
	"strings"
	"testing"
)

// TestRunCaller pins the run-stable caller to its derivation: sha256("r-1") is a5fa777a3dc6
// 7268caea6eea038ba14177e360..., split into the actor's 12 and the uid's 26 hex characters.
func TestRunCaller(t *testing.T) {
	l, err := RunCaller("u_aaaaaaaaaaaaaaaaaaaaaaaaaa", "r-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := l.String(); got != "u_aaaaaaaaaaaaaaaaaaaaaaaaaa.wf_a5fa777a3dc6.7268caea6eea038ba14177e360" {
		t.Fatalf("RunCaller = %s", got)
	}
	if _, err := RunCaller("local", "not a run"); err == nil {
		t.Fatal("a run id out of the grammar derived a caller")
	}
}

func TestParseRunStatus(t *testing.T) {
	good := `{"v":1,"observedSpecRevision":3,"state":"running","holder":"h1","epoch":2,"fencingToken":5,"journalHigh":7,"at":1}`
	r, err := ParseRunStatus([]byte(good))
	if err != nil || r.State != RunRunning || r.Holder != "h1" || r.FencingToken != 5 || r.Epoch != 2 {
		t.Fatalf("ParseRunStatus(good) = %+v, %v", r, err)
	}
	for name, bad := range map[string]string{
		"another version":  strings.Replace(good, `"v":1`, `"v":2`, 1),
		"an unknown state": strings.Replace(good, `"running"`, `"paused"`, 1),
		"an unknown field": strings.Replace(good, `"at":1`, `"at":1,"x":0`, 1),
		"no holder":        strings.Replace(good, `"h1"`, `""`, 1),
		"no fencing token": strings.Replace(good, `"fencingToken":5`, `"fencingToken":0`, 1),
		"a negative epoch": strings.Replace(good, `"epoch":2`, `"epoch":-1`, 1),
		"trailing data":    good + `{}`,
		"not an object":    `[]`,
	} {
		if _, err := ParseRunStatus([]byte(bad)); err == nil {
			t.Errorf("ParseRunStatus accepted %s", name)
		}
	}
}
