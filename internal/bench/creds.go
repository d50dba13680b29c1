package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gocotal/cotal/internal/authority"
	"github.com/gocotal/cotal/internal/ledger"
)

// Credentials case shape and targets (issue 8).
const (
	// mintWorkers is how many issues run at once on the held ledger connection.
	mintWorkers = 8
	// oneShotMints is how many agents the one-shot figure issues, each on its own connection.
	oneShotMints = 50
	targetMints  = 1000
)

// mintCase measures agent credentials issued per second, each a fresh lifecycle with its JWT,
// creds and ledger row, over one held ledger connection.
func mintCase(ctx context.Context, r *runner) ([]Result, error) {
	var next atomic.Int64
	issue := func(ctx context.Context) error {
		_, err := r.env.Ledger.Issue(ctx, ledger.Request{Name: r.name("mint_%d", next.Add(1)), Expires: benchLifetime})
		return err
	}
	for range warmup {
		if err := issue(ctx); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	deadline := start.Add(r.opts.Duration)
	g, gctx := errgroup.WithContext(ctx)
	var issued atomic.Int64
	for range mintWorkers {
		g.Go(func() error {
			for time.Now().Before(deadline) {
				if err := issue(gctx); err != nil {
					return err
				}
				issued.Add(1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	rate := float64(issued.Load()) / time.Since(start).Seconds()

	start = time.Now()
	for i := range oneShotMints {
		if err := issueOnce(ctx, r.env, ledger.Request{Name: r.name("once_%d", i), Expires: benchLifetime}); err != nil {
			return nil, err
		}
	}
	oneShot := float64(oneShotMints) / time.Since(start).Seconds()
	return []Result{{
		Name: "credentials/mint", Unit: "mints/s", Cotal: rate,
		Target: fmt.Sprintf("≥ %d/s", targetMints), Met: met(rate >= targetMints),
		Note: fmt.Sprintf("agent credentials (lifecycle, JWT, creds, ledger row), %d at a time on one held ledger connection; %.0f/s when each issue connects to the ledger on its own", mintWorkers, oneShot),
	}}, nil
}

// issueOnce issues one agent credential as a command that opens the ledger for it alone does.
func issueOnce(ctx context.Context, env *Env, req ledger.Request) error {
	l, err := ledger.Open(ctx, env.URL, env.Keyring, env.Space)
	if err != nil {
		return err
	}
	defer l.Close()
	_, err = l.Issue(ctx, req)
	return err
}

// jwtChannels are the channel counts whose agent JWT sizes are reported.
var jwtChannels = []int{1, 10, 100}

// jwtSizeCase reports the size of an agent JWT that may post to and read k concrete channels,
// and how many concrete channels fit under the size gate.
func jwtSizeCase(ctx context.Context, r *runner) ([]Result, error) {
	size := func(k int, pattern bool) (int, error) {
		req := ledger.Request{Name: r.name("jwt_%d", k), Expires: benchLifetime}
		for i := range k {
			ch := fmt.Sprintf("team.c%03d", i)
			req.AllowPublish = append(req.AllowPublish, ch)
			if !pattern {
				req.Subscribe = append(req.Subscribe, ch)
			}
		}
		if pattern {
			req.Name += "_pattern"
			req.Subscribe = []string{"team.*"}
		}
		cred, err := r.env.Ledger.Issue(ctx, req)
		var tooLarge *authority.JWTTooLargeError
		if errors.As(err, &tooLarge) {
			return tooLarge.Size, nil
		}
		if err != nil {
			return 0, err
		}
		return len(cred.JWT), nil
	}
	// The most concrete channels that fit: sizes grow with k, so bisect.
	lo, hi := 0, jwtChannels[len(jwtChannels)-1]*2
	for lo < hi {
		mid := (lo + hi + 1) / 2
		n, err := size(mid, false)
		if err != nil {
			return nil, err
		}
		if n <= authority.MaxJWTSize {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	var out []Result
	for _, k := range jwtChannels {
		n, err := size(k, false)
		if err != nil {
			return nil, err
		}
		res := Result{Name: fmt.Sprintf("credentials/jwt/%d", k), Unit: "bytes", Cotal: float64(n),
			Note: fmt.Sprintf("agent JWT that posts to and reads %d concrete channel(s)", k)}
		if k == 100 {
			res.Target = fmt.Sprintf("≤ %d", authority.MaxJWTSize)
			res.Met = met(n <= authority.MaxJWTSize)
			res.Note += fmt.Sprintf("; at most %d concrete channels fit the %d-byte gate", lo, authority.MaxJWTSize)
		}
		out = append(out, res)
	}
	n, err := size(100, true)
	if err != nil {
		return nil, err
	}
	out = append(out, Result{Name: "credentials/jwt/100-pattern", Unit: "bytes", Cotal: float64(n),
		Target: fmt.Sprintf("≤ %d", authority.MaxJWTSize), Met: met(n <= authority.MaxJWTSize),
		Note: "posts to 100 concrete channels, reads them through the one pattern team.*"})
	return out, nil
}
