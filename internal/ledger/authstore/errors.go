package authstore

import "errors"

// Errors of the auth store, for errors.Is.
var (
	// ErrConflict: the row or gate moved since it was observed; the operation lost and changed
	// nothing it could not undo.
	ErrConflict = errors.New("authority: conflict")
	// ErrCorrupt: a row that must exist is deleted or malformed. It is reported, never treated
	// as absence, and never overwritten.
	ErrCorrupt = errors.New("authority: corrupt auth store")
	// ErrStoreShape: the auth bucket's stream is not shaped as the contract requires.
	ErrStoreShape = errors.New("authority: auth store has the wrong shape")
	// ErrTransition is returned for a gate move its operation kind does not allow.
	ErrTransition = errors.New("authority: gate transition not allowed")
	// ErrSessionState reports a session state move the grammar forbids.
	ErrSessionState = errors.New("authority: session state move not allowed")
)
