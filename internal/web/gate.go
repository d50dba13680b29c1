package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strings"
	"sync"
)

// The gate in front of every route (the reference's): a foreign Origin is refused, the session
// cookie passes, and the single-use launch token, the one secret the printed URL carries, is burnt
// for that cookie on its first use. Anything else is unauthenticated.
//
// A browser sends a cookie to every port of its host, so any other server on a loopback port can
// read the session cookie and replay it. The routes that carry data (the API and the feed) also
// take a second secret, the binding, which the launch redirect hands the page in its URL fragment
// (never sent to a server) and the page keeps in its origin's storage, which another port cannot
// read: it sends it as the BindHeader header, or the bind query parameter where it cannot set a
// header (EventSource). A replayed cookie alone reaches nothing but the static page.

// sessionCookie names the session cookie.
const sessionCookie = "cotal_web_session"

// BindHeader and bindParam carry the session's binding on a data route; bindFragment names it in
// the launch redirect's fragment.
const (
	BindHeader   = "X-Cotal-Bind"
	bindParam    = "bind"
	bindFragment = "bind"
)

// gate holds the launch token and the session secrets.
type gate struct {
	port    string
	session string // the cookie's value
	bind    string // the binding the page sends beside the cookie
	mu      sync.Mutex
	launch  string // the launch token; empty once used
	used    string // the token as it was, to name its reuse
}

// newSecret returns 32 random bytes, base64url.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

func newGate(port string) *gate {
	return &gate{port: port, session: newSecret(), bind: newSecret(), launch: newSecret()}
}

// equal compares secrets in constant time.
func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// allowedOrigin reports whether origin is this server's own, as a browser names it.
func (g *gate) allowedOrigin(origin string) bool {
	for _, host := range []string{"127.0.0.1", "localhost", "[::1]"} {
		if origin == "http://"+host+":"+g.port {
			return true
		}
	}
	return false
}

// wrap checks every request before next sees it.
func (g *gate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A page on another origin could point a DNS name at 127.0.0.1: only loopback names
		// are served.
		if host, _, err := net.SplitHostPort(r.Host); err != nil || !loopbackName(host) {
			writeError(w, http.StatusMisdirectedRequest, "host-not-allowed")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !g.allowedOrigin(o) {
			writeError(w, http.StatusForbidden, "cross-origin")
			return
		}
		if c, err := r.Cookie(sessionCookie); err == nil && equal(c.Value, g.session) {
			if dataRoute(r.URL.Path) && !g.bound(r) {
				writeError(w, http.StatusUnauthorized, "unbound-session")
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if k := r.URL.Query().Get("k"); k != "" {
			g.redeem(w, r, k)
			return
		}
		writeError(w, http.StatusUnauthorized, "unauthenticated")
	})
}

// dataRoute reports whether path carries data, and so needs the binding beside the cookie.
func dataRoute(path string) bool { return path == "/feed" || strings.HasPrefix(path, "/api/") }

// bound reports whether r carries the session's binding.
func (g *gate) bound(r *http.Request) bool {
	b := r.Header.Get(BindHeader)
	if b == "" {
		b = r.URL.Query().Get(bindParam)
	}
	return b != "" && equal(b, g.bind)
}

// redeem burns the launch token for the session cookie and sends the browser on without it.
func (g *gate) redeem(w http.ResponseWriter, r *http.Request, k string) {
	g.mu.Lock()
	ok := g.launch != "" && equal(k, g.launch)
	reused := g.launch == "" && equal(k, g.used)
	if ok {
		g.used, g.launch = g.launch, ""
	}
	g.mu.Unlock()
	switch {
	case reused:
		writeError(w, http.StatusUnauthorized, "launch-token-already-used")
		return
	case !ok:
		writeError(w, http.StatusUnauthorized, "unauthenticated")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: g.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	q := r.URL.Query()
	q.Del("k")
	to := r.URL.Path
	if enc := q.Encode(); enc != "" {
		to += "?" + enc
	}
	http.Redirect(w, r, to+"#"+bindFragment+"="+g.bind, http.StatusFound)
}

// loopbackName reports whether host names this machine.
func loopbackName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
