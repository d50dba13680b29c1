package mesh

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/gocotal/cotal/internal/authservice"
	"github.com/gocotal/cotal/internal/userauth"
	"github.com/gocotal/cotal/internal/userauth/devidp"
	"github.com/gocotal/cotal/wire"
)

// UserAuthDir is the user-auth state of space sp: the owner secret, the bearer keys, the IdP pin
// and the development IdP's key (the people ledger and the remote managers' registry live in the
// space's user-auth store).
func (d Dir) UserAuthDir(sp wire.Space) string { return filepath.Join(d.Path, "userauth", string(sp)) }

// startUserAuth starts the development IdP when asked, then the auth service of the mesh's one
// space. On a cluster every authority node runs both: the auth services serve as one, and the
// development IdP is served by one node per machine, the others standing by to take it over.
func (m *Mesh) startUserAuth(ctx context.Context, url string, o UserAuthOptions, cluster *ClusterOptions, log *slog.Logger) error {
	l := m.ledgers[0]
	dir := m.dir.UserAuthDir(l.Space())
	idp := o.IdP
	if o.DevIdP {
		addr := o.DevIdPAddr
		if addr == "" {
			addr = DefaultDevIdPAddr
		}
		key, err := authservice.DevIdPKey(dir)
		if err != nil {
			return err
		}
		m.devIdP = &devIdPHolder{addr: addr, key: key, log: log}
		issuer, err := m.devIdP.start(ctx, cluster != nil)
		if err != nil {
			return err
		}
		idp = authservice.IdP{Issuer: issuer, ClientID: devidp.DefaultClientID}
	}
	cfg := authservice.Config{
		Dir: dir, Space: l.Space(), Keyring: m.keyring, Ledger: l, Server: url, IdP: idp,
		PublicAddr: o.PublicAddr, PublicURL: o.PublicURL, TrustedProxy: o.TrustedProxy, AdvertisedServer: o.AdvertisedServer,
		RemoteManagerLifetime: o.RemoteManagerLifetime, BearerLifetime: o.BearerLifetime, Node: m.server.Name(), Log: log,
	}
	if cluster != nil {
		cfg.Cluster = m.server.Cluster().Name
	}
	svc, err := authservice.Start(ctx, cfg)
	if err != nil {
		return err
	}
	m.auth = svc
	if m.daemons != nil {
		m.daemons.servePeople(&hostedPeople{host: svc.Host, exchange: svc.PublicURL, sentinel: svc.SentinelCreds})
	}
	return nil
}

// userAuthStopWait bounds the auth service's stop: on a cluster that lost its quorum, its last
// writes (the plane's release) wait out their timeouts, and the broker's shutdown that follows
// ends what is left.
const userAuthStopWait = 5 * time.Second

// stopUserAuth stops the auth service and the development IdP.
func (m *Mesh) stopUserAuth(ctx context.Context) {
	if m.auth != nil {
		ctx, cancel := context.WithTimeout(ctx, userAuthStopWait)
		defer cancel()
		stopped := make(chan struct{})
		go func(svc *authservice.Service) {
			_ = svc.Close(ctx) // the broker stops next; nothing is left to serve
			close(stopped)
		}(m.auth)
		select {
		case <-stopped:
		case <-ctx.Done():
		}
		m.auth = nil
	}
	if m.devIdP != nil {
		m.devIdP.stop()
		m.devIdP = nil
	}
}

// devIdPTakeover is how often a node standing by for the development IdP tries its address.
const devIdPTakeover = time.Second

// devIdPHolder serves the development IdP at its address, or stands by while another node of the
// cluster on the same machine serves it with the same key, and takes the address over when that
// node stops.
type devIdPHolder struct {
	addr string
	key  ed25519.PrivateKey
	log  *slog.Logger

	mu      sync.Mutex
	srv     *devidp.Server // guarded by mu; nil while standing by
	cancel  context.CancelFunc
	stopped chan struct{}
}

// start serves the IdP, or on a cluster stands by for it, and returns its issuer.
func (h *devIdPHolder) start(ctx context.Context, cluster bool) (string, error) {
	srv, err := devidp.Start(context.WithoutCancel(ctx), devidp.Options{Addr: h.addr, Key: h.key, Log: h.log})
	if err == nil {
		h.srv = srv
		return srv.URL(), nil
	}
	if !cluster || !errors.Is(err, syscall.EADDRINUSE) {
		return "", fmt.Errorf("start the development IdP on %s (another address: --dev-idp-addr): %w", h.addr, err)
	}
	issuer, err := devidp.Serving(ctx, userauth.NewHTTPClient(), "http://"+h.addr, h.key)
	if err != nil {
		return "", fmt.Errorf("the development IdP's address %s is taken, and not by this cluster's development IdP (another address: --dev-idp-addr): %w", h.addr, err)
	}
	if h.log != nil {
		h.log.Info("another node of the cluster serves the development IdP: this one stands by to take it over", "issuer", issuer)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancel, h.stopped = cancel, make(chan struct{})
	go h.standBy(sctx)
	return issuer, nil
}

// standBy tries the address every devIdPTakeover until it serves there or ctx ends.
func (h *devIdPHolder) standBy(ctx context.Context) {
	defer close(h.stopped)
	t := time.NewTicker(devIdPTakeover)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		srv, err := devidp.Start(ctx, devidp.Options{Addr: h.addr, Key: h.key, Log: h.log})
		if err != nil {
			continue
		}
		h.mu.Lock()
		h.srv = srv
		h.mu.Unlock()
		if h.log != nil {
			h.log.Info("this node took the development IdP over", "issuer", srv.URL())
		}
		return
	}
}

// stop stops standing by and the IdP this node serves.
func (h *devIdPHolder) stop() {
	if h.cancel != nil {
		h.cancel()
		<-h.stopped
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.srv != nil {
		_ = h.srv.Close()
		h.srv = nil
	}
}
