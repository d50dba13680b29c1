// Package iostreams carries a command's standard streams, so commands write data to Out and
// status to ErrOut, and tests run them against buffers.
package iostreams

import (
	"bytes"
	"io"
	"os"
)

// IOStreams are the streams a command reads and writes. Data goes to Out, status and errors to
// ErrOut. The zero value is not usable; build one with System or Test.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// System returns the process's standard streams.
func System() *IOStreams {
	return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
}

// Test returns streams backed by buffers, and the buffers: standard input, output and error.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}
