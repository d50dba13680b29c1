package service

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// Marker starts every file `cotal service install` writes; uninstall removes only a file that
// carries it, so a unit the operator wrote is never destroyed.
const Marker = "installed by `cotal service install`"

// Unit is one mesh's service: the command that runs it and where it is installed.
type Unit struct {
	// Dir is the mesh directory, absolute (its .cotal).
	Dir string
	// Exec is the cotal binary, absolute; Args follow it.
	Exec string
	Args []string
	// Path is the PATH the service runs with: the installing shell's, so the harnesses it
	// resolved resolve again at boot.
	Path string
}

// Key names a mesh's unit: the project directory's base name, made safe, then the start of the
// digest of the mesh directory, so two projects of one name get two units.
func (u Unit) Key() string {
	base := unsafeKey.ReplaceAllString(filepath.Base(filepath.Dir(u.Dir)), "-")
	base = strings.Trim(base, "-")
	if base == "" {
		base = "mesh"
	}
	if len(base) > 32 {
		base = base[:32]
	}
	sum := sha256.Sum256([]byte(u.Dir))
	return base + "-" + hex.EncodeToString(sum[:4])
}

var unsafeKey = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// SystemdName returns the unit's systemd name: cotal-mesh-<key>.service.
func (u Unit) SystemdName() string { return "cotal-mesh-" + u.Key() + ".service" }

// LaunchdLabel returns the launchd agent's label: ai.cotal.mesh.<key>.
func (u Unit) LaunchdLabel() string { return "ai.cotal.mesh." + u.Key() }

// Validate refuses what no unit file can carry: a relative binary or directory, and a newline or
// NUL anywhere.
func (u Unit) Validate() error {
	if !filepath.IsAbs(u.Exec) || !filepath.IsAbs(u.Dir) {
		return fmt.Errorf("the service needs absolute paths: %q, %q", u.Exec, u.Dir)
	}
	for _, s := range append([]string{u.Exec, u.Dir, u.Path}, u.Args...) {
		if strings.ContainsAny(s, "\n\r\x00") {
			return fmt.Errorf("%q: a newline or NUL cannot go into a service unit", s)
		}
	}
	return nil
}

// Systemd renders the systemd user unit: `cotal up` for the mesh in the foreground, restarted on
// failure, at most 20 starts in 30 minutes, started with the user's session.
func (u Unit) Systemd() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", Marker)
	fmt.Fprintf(&b, "[Unit]\nDescription=Cotal mesh %s\nAfter=network-online.target\nStartLimitIntervalSec=30min\nStartLimitBurst=20\n\n", systemdQuote(filepath.Dir(u.Dir)))
	b.WriteString("[Service]\nType=simple\n")
	fmt.Fprintf(&b, "WorkingDirectory=%s\n", systemdQuote(filepath.Dir(u.Dir)))
	if u.Path != "" {
		fmt.Fprintf(&b, "Environment=%s\n", systemdQuote("PATH="+u.Path))
	}
	args := append([]string{u.Exec, "up", "--dir", u.Dir}, u.Args...)
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = systemdQuote(a)
	}
	fmt.Fprintf(&b, "ExecStart=%s\n", strings.Join(quoted, " "))
	b.WriteString("Restart=on-failure\nRestartSec=5\nTimeoutStopSec=60\n\n[Install]\nWantedBy=default.target\n")
	return b.String()
}

// systemdQuote quotes one word for a unit file: in double quotes, with backslash, quote, percent
// (a specifier) and dollar (a variable) escaped.
func systemdQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%", "$", "$$")
	return `"` + r.Replace(s) + `"`
}

// Launchd renders the launchd agent: the same command, kept alive while it fails, loaded at
// login.
func (u Unit) Launchd() string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, "<!-- %s -->\n", xmlEscape(Marker))
	b.WriteString(`<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">` + "\n")
	b.WriteString("<plist version=\"1.0\">\n<dict>\n")
	fmt.Fprintf(&b, "  <key>Label</key><string>%s</string>\n", xmlEscape(u.LaunchdLabel()))
	b.WriteString("  <key>ProgramArguments</key>\n  <array>\n")
	for _, a := range append([]string{u.Exec, "up", "--dir", u.Dir}, u.Args...) {
		fmt.Fprintf(&b, "    <string>%s</string>\n", xmlEscape(a))
	}
	b.WriteString("  </array>\n")
	fmt.Fprintf(&b, "  <key>WorkingDirectory</key><string>%s</string>\n", xmlEscape(filepath.Dir(u.Dir)))
	if u.Path != "" {
		fmt.Fprintf(&b, "  <key>EnvironmentVariables</key>\n  <dict><key>PATH</key><string>%s</string></dict>\n", xmlEscape(u.Path))
	}
	b.WriteString("  <key>RunAtLoad</key><true/>\n  <key>KeepAlive</key>\n  <dict><key>SuccessfulExit</key><false/></dict>\n")
	fmt.Fprintf(&b, "  <key>StandardOutPath</key><string>%s</string>\n", xmlEscape(filepath.Join(u.Dir, "service.log")))
	fmt.Fprintf(&b, "  <key>StandardErrorPath</key><string>%s</string>\n", xmlEscape(filepath.Join(u.Dir, "service.log")))
	b.WriteString("</dict>\n</plist>\n")
	return b.String()
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(s)
}
