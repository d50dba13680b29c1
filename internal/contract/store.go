package contract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gocotal/cotal/internal/jsapi"
	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/wire"
)

// Publish stores each artifact, in the order given, at its digest subject in space's contract
// stream (SPEC §13.7 "Contract stream"), create-only: the publish expects the subject to hold no
// message (Nats-Expected-Last-Subject-Sequence: 0). A subject that already holds the same artifact
// is success, so publishing twice is idempotent. One that holds anything else (a JetStream reply
// an agent aimed there first: NATS never checks a reply subject, and the stream refuses deletes)
// does not stop the others: once every artifact is tried the error matches ErrCorrupt and names
// each such subject. Readers check every artifact against its digest, so what is stored there is
// inert; a server whose describe carries its documents goes on serving. Each artifact must be the
// strict canonical JSON its digest names, within MaxDocumentBytes; otherwise nothing more is
// published and the error matches ErrInvalid.
func Publish(ctx context.Context, js jetstream.JetStream, space wire.Space, artifacts []Artifact) error {
	var taken []error
	for _, a := range artifacts {
		subject, err := artifactSubject(space, a.Digest)
		if err != nil {
			return err
		}
		if err := verify(a.Bytes, a.Digest); err != nil {
			return invalidf("artifact %s: %v", a.Digest, err)
		}
		switch err := publishArtifact(ctx, js, space, subject, a); {
		case errors.Is(err, ErrCorrupt):
			taken = append(taken, err)
		case err != nil:
			return err
		}
	}
	return errors.Join(taken...)
}

// takenTries bounds how often publishArtifact looks again for an artifact whose subject a concurrent
// publish took, and takenWait is the first wait between looks (each waits one more).
const (
	takenTries = 8
	takenWait  = 100 * time.Millisecond
)

// publishArtifact publishes a at subject, create-only; a subject that holds a already is success, one
// that holds anything else an error matching ErrCorrupt. On a cluster the nodes of a mesh publish
// the same artifacts as they start: a subject taken by a publish still being committed, or read
// from a replica that has not applied it yet, holds nothing for a moment, and a loaded cluster
// may not ack in time, so the publish and the read are tried again.
func publishArtifact(ctx context.Context, js jetstream.JetStream, space wire.Space, subject string, a Artifact) error {
	for try := 1; ; try++ {
		_, err := js.Publish(ctx, subject, a.Bytes, jetstream.WithExpectLastSequencePerSubject(0))
		switch {
		case err == nil:
			return nil
		// A taken subject fails the expectation: wrong last sequence, or, with a concurrent
		// publish to the subject still in flight on a cluster, its constant form.
		case jsapi.Conflict(err):
			// The subject is taken. Fetch verifies that it holds canonical bytes whose digest
			// is a.Digest: a.Bytes themselves.
			if _, err = Fetch(ctx, js, space, a.Digest); err == nil {
				return nil
			}
			err = fmt.Errorf("publish %s: the subject is taken: %w", subject, err)
			if !errors.Is(err, ErrNotFound) {
				return err
			}
		// A loaded cluster may not ack in time: the publish is create-only, so sending it again
		// lands it or finds it taken.
		case jsapi.PublishUnanswered(err) && ctx.Err() == nil:
			err = fmt.Errorf("publish %s: %w", subject, err)
		default:
			return fmt.Errorf("publish %s: %w", subject, err)
		}
		if try == takenTries {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(try) * takenWait):
		}
	}
}

// Fetch reads the artifact at digest ("sha256:<hex>") from space's contract stream, with a
// last-by-subject Direct Get on its digest subject (SPEC §13.7), and verifies it: the stored bytes
// must be strict canonical JSON, within MaxDocumentBytes, whose digest is digest. It returns an
// error matching ErrNotFound when nothing is published there, and one matching ErrCorrupt when the
// stored message fails verification.
func Fetch(ctx context.Context, js jetstream.JetStream, space wire.Space, digest string) ([]byte, error) {
	subject, err := artifactSubject(space, digest)
	if err != nil {
		return nil, err
	}
	msg, err := jsapi.Request(ctx, js.Conn(), jsapi.DirectGet+meshwire.ContractStream(space)+"."+subject, nil)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", subject, err)
	}
	// A Direct Get that finds nothing answers with an empty message and a status header.
	if status := msg.Header.Get(jsapi.StatusHeader); len(msg.Data) == 0 && status != "" {
		if status == "404" {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, digest)
		}
		return nil, fmt.Errorf("read %s: status %s: %s", subject, status, msg.Header.Get("Description"))
	}
	if err := verify(msg.Data, digest); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, subject, err)
	}
	return msg.Data, nil
}

// artifactSubject returns the digest subject of digest in space.
func artifactSubject(space wire.Space, digest string) (string, error) {
	if !wire.IsDigest(digest) {
		return "", invalidf("%q is not a sha256:<hex> digest", digest)
	}
	return space.ContractSubject(strings.TrimPrefix(digest, "sha256:"))
}

// verify checks that b is the strict canonical JSON whose digest is digest, within the document
// bound.
func verify(b []byte, digest string) error {
	if len(b) > MaxDocumentBytes {
		return fmt.Errorf("%d bytes, over the bound of %d", len(b), MaxDocumentBytes)
	}
	c, err := wire.Canonicalize(b)
	if err != nil {
		return err
	}
	if !bytes.Equal(c, b) {
		return errors.New("not in RFC 8785 canonical form")
	}
	if got := wire.ContentDigest(c); got != digest {
		return fmt.Errorf("its digest is %s", got)
	}
	return nil
}
