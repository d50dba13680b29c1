package manager

import "errors"

var (
	// ErrAlreadyExists is returned by Spawn, and by Call for a spawn request, when an agent of
	// that name is being spawned or has not finished. Its text carries the control socket's error
	// code (CodeAlreadyExists), so a requester that reads only Response.Error still finds it.
	ErrAlreadyExists = errors.New("manager: " + CodeAlreadyExists)
	// ErrClosed is returned by Spawn once Close has begun.
	ErrClosed = errors.New("manager: the supervisor is closed")
)

// ResponseError is an error the supervisor answered with over the control socket (see Call). It
// matches, with errors.Is, the sentinel of its Code.
type ResponseError struct {
	// Code is Response.Code: one of the Code constants, or "" for an error no caller branches on.
	Code string
	// Msg is Response.Error, the supervisor's own text.
	Msg string
}

// Error implements error.
func (e *ResponseError) Error() string { return e.Msg }

// Is reports whether target is the sentinel of e's code.
func (e *ResponseError) Is(target error) bool {
	sentinel, ok := codes[e.Code]
	return ok && target == sentinel
}
