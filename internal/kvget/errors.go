package kvget

import "errors"

// ErrNotFound is returned, wrapped with the key and bucket (or the subject or sequence and the
// stream), when there is no message to read: the key never had a value or its message expired,
// or nothing is stored at the sequence (never stored, deleted, or taken from a work queue). A
// key whose last message is a delete or purge marker is not ErrNotFound: Get returns its Entry
// with Deleted set.
var ErrNotFound = errors.New("kvget: no message")
