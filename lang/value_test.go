package lang

import "testing"

// TestDerivations pins the spec's derivations (§6.4, §10.2 to §10.4) with vectors computed from
// its rules: the input hash of a spawn's projection and of a sleep's, their step keys and
// request ids, and the program hash.
func TestDerivations(t *testing.T) {
	spawn := NewRecord()
	for _, k := range []string{"persona", "model", "variant", "worktree", "role"} {
		spawn.Set(k, nil)
	}
	spawn.Set("persona", "b")
	spawn.Set("join", &Array{})
	h, err := digest(spawn)
	if err != nil || h != "sha256:d6c80482a86677fc954aa1263f4419c88b74dde27f07e1c3147fa54551d6da09" {
		t.Errorf("spawn input hash %s %v", h, err)
	}
	key := StepKey("", "spawn", "b", 0)
	if id := RequestID("v1-len-on-an-array", key, h, 0); key != "/spawn:b#0" || id != "Wg7Op8V_GA7YhEdRjrKRNp8sFdIPrtnbws7Vp52ikCY" {
		t.Errorf("spawn key %s request id %s", key, id)
	}
	sleep := NewRecord()
	sleep.Set("duration", "1m")
	h, _ = digest(sleep)
	if h != "sha256:1466c179ef9a9c33bd96fb50bd810ae81b4e9e43a2c3f61581eac75d56f9708b" {
		t.Errorf("sleep input hash %s", h)
	}
	if id := RequestID("v1-recorded-log-builtin", StepKey("", "sleep", "a", 0), h, 0); id != "DP-nKwlyiy9A-HUZ_uBXmjOcEO8XJ1RqCcDP8MCFkQ0" {
		t.Errorf("sleep request id %s", id)
	}
	if got := StepKey("/race:first-answer#0/b:reply", "wait", "", 0); got != "/race:first-answer#0/b:reply/wait#0" {
		t.Errorf("nested key %s", got)
	}
}

// TestCanonical: RFC 8785's number and string forms and key order, and the values without one.
func TestCanonical(t *testing.T) {
	r := NewRecord()
	r.Set("b", 1e21)
	r.Set("a", &Array{Elems: []Value{0.1, "é\n\u0001", true, nil}})
	r.Set("\uff61", -0.0)
	r.Set("\U0001F600", 1.5e-7)
	c, err := Canonical(r)
	if want := "{\"a\":[0.1,\"é\\n\\u0001\",true,null],\"b\":1e+21,\"\U0001F600\":1.5e-7,\"\uff61\":0}"; err != nil || string(c) != want {
		t.Errorf("canonical %s %v, want %s", c, err, want)
	}
	for _, v := range []Value{Undefined, &Closure{}, 1.0 / zero(), &Array{Elems: []Value{Undefined}}} {
		if _, err := Canonical(v); err == nil {
			t.Errorf("%v has a canonical form", v)
		}
	}
}

func zero() float64 { return 0 }
