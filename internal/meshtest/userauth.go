package meshtest

import (
	"context"
	"net/http"
	"testing"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/userauth/devidp"
	"github.com/gocotal/cotal/internal/userauth/oidc"
)

// DevLogin logs user in at the development IdP of the user-auth mesh doc describes, as `cotal
// login --dev-user` does, and returns an ID token.
func DevLogin(t testing.TB, doc *authservice.MeshDocument, user string) string {
	t.Helper()
	tok, _, err := authservice.Login(t.Context(), http.DefaultClient, doc, func(ctx context.Context, dc *oidc.DeviceCode) error {
		return devidp.Approve(ctx, http.DefaultClient, doc.IdP.Issuer, dc.UserCode, user)
	})
	if err != nil {
		t.Fatalf("log %s in: %v", user, err)
	}
	return tok.IDToken
}
