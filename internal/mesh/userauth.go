package mesh

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/userauth/devidp"
	"github.com/gocotal/cotal/wire"
)

// UserAuthDir is the user-auth state of space sp: the people ledger, the owner secret, the
// bearer keys, the IdP pin and the remote managers' registry.
func (d Dir) UserAuthDir(sp wire.Space) string { return filepath.Join(d.Path, "userauth", string(sp)) }

// startUserAuth starts the development IdP when asked, then the auth service of the mesh's one
// space.
func (m *Mesh) startUserAuth(ctx context.Context, url string, o UserAuthOptions, log *slog.Logger) error {
	idp := o.IdP
	if o.DevIdP {
		addr := o.DevIdPAddr
		if addr == "" {
			addr = DefaultDevIdPAddr
		}
		srv, err := devidp.Start(context.WithoutCancel(ctx), devidp.Options{Addr: addr, Log: log})
		if err != nil {
			return fmt.Errorf("start the development IdP on %s (another address: --dev-idp-addr): %w", addr, err)
		}
		m.devIdP = srv
		idp = authservice.IdP{Issuer: srv.URL(), ClientID: devidp.DefaultClientID}
	}
	l := m.ledgers[0]
	svc, err := authservice.Start(ctx, authservice.Config{
		Dir: m.dir.UserAuthDir(l.Space()), Space: l.Space(), Keyring: m.keyring, Ledger: l, Server: url, IdP: idp,
		PublicAddr: o.PublicAddr, PublicURL: o.PublicURL, TrustedProxy: o.TrustedProxy, AdvertisedServer: o.AdvertisedServer,
		RemoteManagerLifetime: o.RemoteManagerLifetime, Log: log,
	})
	if err != nil {
		return err
	}
	m.auth = svc
	if m.daemons != nil {
		m.daemons.servePeople(&hostedPeople{host: svc.Host, exchange: svc.PublicURL, sentinel: svc.SentinelCreds})
	}
	return nil
}

// stopUserAuth stops the auth service and the development IdP.
func (m *Mesh) stopUserAuth(ctx context.Context) {
	if m.auth != nil {
		_ = m.auth.Close(ctx) // the broker stops next; nothing is left to serve
		m.auth = nil
	}
	if m.devIdP != nil {
		_ = m.devIdP.Close()
		m.devIdP = nil
	}
}
