package meshtest

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nuid"
)

// Settle waits until the broker has judged everything sent on c so far, then hands back, and
// forgets, every asynchronous error recorded until then. It is the bulk form of Refused: a test
// that sends thousands of operations settles once per batch and matches the returned errors to
// what it sent, instead of scanning an ever-growing record once per operation.
//
// Like Refused it publishes a sentinel no credential may publish to and waits for the broker's
// refusal of it: the broker judges a connection's operations in order and the client reports
// them in order, so every verdict on what came before has been recorded by then. The sentinel's
// own refusal is not returned. Errors recorded after the sentinel stay for the next call (and for
// Errors and Refused, which see only what Settle has not taken).
func (c *Client) Settle() ([]error, error) {
	sentinel := sentinelPrefix + nuid.Next()
	if err := c.Publish(sentinel, nil); err != nil {
		return nil, fmt.Errorf("publish sentinel: %w", err)
	}
	if err := c.Flush(); err != nil {
		return nil, fmt.Errorf("flush: %w", err)
	}
	want := violation("Publish", sentinel)
	deadline := time.NewTimer(verdictWait)
	defer deadline.Stop()
	seen := 0
	for {
		c.mu.Lock()
		for i := seen; i < len(c.errs); i++ {
			if strings.Contains(c.errs[i].Error(), want) {
				got := append([]error(nil), c.errs[:i]...)
				c.errs = append([]error(nil), c.errs[i+1:]...)
				c.mu.Unlock()
				return got, nil
			}
		}
		seen = len(c.errs)
		c.mu.Unlock()
		select {
		case <-c.notify:
		case <-deadline.C:
			return nil, fmt.Errorf("no %q from the broker within %s (%d errors recorded, connection %s)", want, verdictWait, seen, c.Status())
		}
	}
}

// ParseViolation reads a permission violation the broker reported: op is "Publish" or
// "Subscription" and subject the refused subject, as the broker quoted it. ok is false for any
// other error, and for the variants that carry more than a subject (a queue subscription, a
// reply subject, too many tokens), which a caller matching plain operations must not mistake
// for one.
func ParseViolation(err error) (op, subject string, ok bool) {
	if err == nil {
		return "", "", false
	}
	const stem = "Permissions Violation for "
	text := err.Error()
	i := strings.Index(text, stem)
	if i < 0 {
		return "", "", false
	}
	rest := text[i+len(stem):]
	for _, o := range []string{"Publish", "Subscription"} {
		if tail, found := strings.CutPrefix(rest, o+" to "); found {
			quoted, qerr := strconv.QuotedPrefix(tail)
			if qerr != nil || quoted != tail {
				return "", "", false
			}
			s, qerr := strconv.Unquote(quoted)
			if qerr != nil {
				return "", "", false
			}
			return o, s, true
		}
	}
	return "", "", false
}
