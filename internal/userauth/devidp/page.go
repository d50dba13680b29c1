package devidp

import (
	"html/template"
	"net/http"
	"net/url"
)

// pageTmpl is the approval page: a plain form, no script.
var pageTmpl = template.Must(template.New("device").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Cotal dev IdP</title>
<style>body{font-family:sans-serif;max-width:32em;margin:3em auto}label{display:block;margin:1em 0}</style></head>
<body>
<h1>Cotal development login</h1>
<p>Development only: anyone who can reach this page can log in as any user.</p>
{{if .Message}}<p><strong>{{.Message}}</strong></p>{{end}}
{{if not .Done}}
<form method="post" action="/device">
<label>User code <input name="user_code" value="{{.UserCode}}" autocomplete="off" required></label>
<label>User name <input name="user" value="{{.User}}" pattern="[a-z][a-z0-9_\-]{0,31}" required></label>
<button name="action" value="approve">Approve</button>
<button name="action" value="deny" formnovalidate>Deny</button>
</form>
{{end}}
</body>
</html>
`))

// pageData fills pageTmpl.
type pageData struct {
	UserCode, User, Message string
	Done                    bool
}

// writePage renders the page with status.
func writePage(w http.ResponseWriter, status int, d pageData) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	_ = pageTmpl.Execute(w, d) // the client went away; nothing to do
}

// handlePage shows the approval form, prefilled from ?user_code=.
func (s *Server) handlePage(w http.ResponseWriter, r *http.Request) {
	d := pageData{}
	if uc, ok := normaliseUserCode(r.URL.Query().Get("user_code")); ok {
		d.UserCode = formatUserCode(uc)
	}
	writePage(w, http.StatusOK, d)
}

// handlePageSubmit approves or denies from the form.
func (s *Server) handlePageSubmit(w http.ResponseWriter, r *http.Request) {
	// A form posted from another site carries that site's Origin: refuse it (CSRF).
	if o := r.Header.Get("Origin"); o != "" && !s.sameOrigin(o) {
		http.Error(w, "cross-origin form refused", http.StatusForbidden)
		return
	}
	if err := r.ParseForm(); err != nil {
		writePage(w, http.StatusBadRequest, pageData{Message: "The form could not be read."})
		return
	}
	userCode, user := r.PostForm.Get("user_code"), r.PostForm.Get("user")
	d := pageData{UserCode: userCode, User: user}
	if r.PostForm.Get("action") == "deny" {
		user = ""
	}
	if err := s.decide(userCode, user); err != nil {
		d.Message = "Refused: " + err.Error() + "."
		writePage(w, http.StatusBadRequest, d)
		return
	}
	d.Done = true
	if user == "" {
		d.Message = "Login denied."
	} else {
		d.Message = "Approved as " + user + ". You can return to your terminal."
	}
	writePage(w, http.StatusOK, d)
}

// sameOrigin reports whether an Origin header names this server.
func (s *Server) sameOrigin(origin string) bool {
	o, err := url.Parse(origin)
	if err != nil {
		return false
	}
	b, err := url.Parse(s.base)
	return err == nil && o.Scheme == b.Scheme && o.Host == b.Host
}
