// Package failover sends a request to one of several equivalent endpoints: the faces of a
// cluster's authority nodes, each of which answers for the whole mesh. The endpoint that answered
// last is tried first; one that does not answer is passed over for the next, and an answer, even a
// refusal, ends the turn.
package failover

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// ErrUnanswered marks an error of an endpoint that did not answer for the mesh (a gateway's or
// an overloaded node's 502, 503 or 504): the next endpoint is tried. A transport error (no route,
// connection refused, a timeout) is one without the mark.
var ErrUnanswered = errors.New("the endpoint did not answer")

// Status returns ErrUnanswered for an HTTP status a gateway or an overloaded node answers in place
// of the endpoint (502, 503, 504), nil for any other.
func Status(code int) error {
	if code >= http.StatusBadGateway && code <= http.StatusGatewayTimeout {
		return fmt.Errorf("HTTP %d: %w", code, ErrUnanswered)
	}
	return nil
}

// Endpoints are equivalent endpoints, in the order they are tried. It is safe for concurrent use.
type Endpoints struct {
	mu   sync.Mutex
	urls []string // guarded by mu
}

// New returns the endpoints urls names, each once and none empty, in their order.
func New(urls ...string) *Endpoints {
	e := &Endpoints{}
	for _, u := range urls {
		if u = strings.TrimSuffix(strings.TrimSpace(u), "/"); u != "" && !slices.Contains(e.urls, u) {
			e.urls = append(e.urls, u)
		}
	}
	return e
}

// Split returns the URLs of a comma-separated list, as a flag takes several endpoints.
func Split(list string) []string {
	var out []string
	for u := range strings.SplitSeq(list, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// URLs returns the endpoints in the order the next call tries them.
func (e *Endpoints) URLs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.urls)
}

// First returns the endpoint tried first, "" when there is none.
func (e *Endpoints) First() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.urls) == 0 {
		return ""
	}
	return e.urls[0]
}

// Do calls fn with each endpoint in turn until one answers: fn's nil error, or an error that is
// not Unanswered, is returned as it is, and the endpoint that gave it is tried first from then on.
// When none answers, the errors are joined. ctx ending stops the turn.
func (e *Endpoints) Do(ctx context.Context, fn func(ctx context.Context, url string) error) error {
	var errs []error
	for _, u := range e.URLs() {
		err := fn(ctx, u)
		if err == nil || !Unanswered(err) || ctx.Err() != nil {
			if err == nil || !Unanswered(err) {
				e.prefer(u)
			}
			return err
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return errors.New("no endpoint to send to")
	}
	return errors.Join(errs...)
}

// prefer moves u to the front.
func (e *Endpoints) prefer(u string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if i := slices.Index(e.urls, u); i > 0 {
		e.urls = append([]string{u}, slices.Delete(e.urls, i, i+1)...)
	}
}

// Unanswered reports whether err means the endpoint did not answer: ErrUnanswered, or a
// transport error of an HTTP request or a dial.
func Unanswered(err error) bool {
	if errors.Is(err, ErrUnanswered) {
		return true
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}
