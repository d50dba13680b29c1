package broker

import "errors"

// ErrPortInUse is returned by Start when the configured port is taken.
var ErrPortInUse = errors.New("broker: port in use")
