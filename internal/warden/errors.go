package warden

import "errors"

// ErrConnectionClosed is returned by Run when the warden's connection closed under it (its
// credential expired or was revoked, or the broker went away): its owner reconnects.
var ErrConnectionClosed = errors.New("warden: connection closed")
