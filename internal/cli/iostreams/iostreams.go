// Package iostreams carries a command's standard streams, so commands write data to Out and
// status to ErrOut, and tests run them against buffers.
package iostreams

import (
	"bytes"
	"io"
	"os"
	"sync"
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
func Test() (*IOStreams, *Buffer, *Buffer, *Buffer) {
	in, out, errOut := &Buffer{}, &Buffer{}, &Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// Buffer is a bytes.Buffer safe for concurrent use: a command's own goroutines (a mesh's logger
// and the command that runs it) write its streams at once, as they may a file.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// WriteString appends s.
func (b *Buffer) WriteString(s string) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.WriteString(s)
}

// Read reads what was written and not yet read.
func (b *Buffer) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Read(p)
}

// String returns what was written and not yet read.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Bytes returns a copy of what was written and not yet read.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.b.Bytes())
}
