package service

import (
	"strings"
	"testing"
)

// TestSystemdUnit: the unit runs this binary's `cotal up` for the mesh in the foreground, every
// word quoted so a path with spaces, quotes, % or $ reaches the command as it is.
func TestSystemdUnit(t *testing.T) {
	u := Unit{Dir: `/home/a b/"q"/100%$x/.cotal`, Exec: "/opt/cotal/bin/cotal", Args: []string{"--space", "team"}, Path: "/usr/bin:/home/a/.local/bin"}
	if err := u.Validate(); err != nil {
		t.Fatal(err)
	}
	unit := u.Systemd()
	for _, want := range []string{
		"# " + Marker + "\n",
		`ExecStart="/opt/cotal/bin/cotal" "up" "--dir" "/home/a b/\"q\"/100%%$$x/.cotal" "--space" "team"` + "\n",
		`WorkingDirectory="/home/a b/\"q\"/100%%$$x"` + "\n",
		`Environment="PATH=/usr/bin:/home/a/.local/bin"` + "\n",
		"Restart=on-failure\n", "StartLimitBurst=20\n", "WantedBy=default.target\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks %q:\n%s", want, unit)
		}
	}
	plist := u.Launchd()
	for _, want := range []string{"<!-- " + xmlEscape(Marker) + " -->", "<string>/home/a b/&quot;q&quot;/100%$x/.cotal</string>", "<key>KeepAlive</key>"} {
		if !strings.Contains(plist, want) {
			t.Errorf("the plist lacks %q:\n%s", want, plist)
		}
	}
	if a, b := (Unit{Dir: "/p/one/.cotal"}).Key(), (Unit{Dir: "/q/one/.cotal"}).Key(); a == b || !strings.HasPrefix(a, "one-") {
		t.Errorf("keys %q and %q", a, b)
	}
	for _, bad := range []Unit{
		{Dir: "rel/.cotal", Exec: "/bin/cotal"},
		{Dir: "/p/.cotal", Exec: "cotal"},
		{Dir: "/p/.cotal", Exec: "/bin/cotal", Args: []string{"--space", "a\nExecStartPost=/bin/evil"}},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v was taken", bad)
		}
	}
}
