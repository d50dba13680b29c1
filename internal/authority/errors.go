package authority

import (
	"errors"
	"fmt"

	"github.com/gocotal/cotal/wire"
)

// ErrJWTTooLarge is matched by the *JWTTooLargeError Mint returns for a grant whose JWT would
// exceed MaxJWTSize.
var ErrJWTTooLarge = errors.New("authority: user jwt exceeds the 16 KiB size gate")

// JWTTooLargeError reports a grant too large to mint: the JWT's size and its rows. It matches
// ErrJWTTooLarge.
type JWTTooLargeError struct {
	Profile   Profile
	Principal wire.Principal
	// Size is the encoded JWT's length in bytes.
	Size     int
	Pub, Sub int
	// Space is the space the rows name. Channels reports whether the grant named channels,
	// which a smaller grant would name fewer of; Commands is how many commands its endpoint
	// instance serves, each on its own rails in the space.
	Space    wire.Space
	Channels bool
	Commands int
}

// Error implements error, with what would make the grant fit: fewer channels, fewer served
// commands or a shorter space name (every row names the space).
func (e *JWTTooLargeError) Error() string {
	var hint string
	switch {
	case e.Channels:
		hint = "grant fewer or broader channels"
	case e.Commands > 0:
		hint = fmt.Sprintf("its rows name each of the %d served commands' rails in space %s (%d characters): serve fewer commands, or use a shorter space name", e.Commands, e.Space, len(e.Space))
	default:
		hint = fmt.Sprintf("its rows name the streams of space %s, whose name (%d characters) is too long for them to fit: use a shorter one", e.Space, len(e.Space))
	}
	return fmt.Sprintf("mint %s for %s: %v: %d bytes for %d publish and %d subscribe rows; %s",
		e.Profile, e.Principal, ErrJWTTooLarge, e.Size, e.Pub, e.Sub, hint)
}

// Unwrap makes the error match ErrJWTTooLarge.
func (e *JWTTooLargeError) Unwrap() error { return ErrJWTTooLarge }

// KeyFileError reports a key file that exists but cannot be used. The file is never overwritten:
// it may be the only copy of a key that every credential in a space depends on.
type KeyFileError struct {
	Path string
	Err  error
}

// Error implements error.
func (e *KeyFileError) Error() string {
	return fmt.Sprintf("key file %s: %v (it is left untouched; restore it or remove it to start over)", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *KeyFileError) Unwrap() error { return e.Err }
