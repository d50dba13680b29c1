package meshtest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// Logs is a slog.Handler that keeps every record at or above Min, for tests that assert on what
// a daemon logged. The zero value keeps records from Info up.
type Logs struct {
	Min  slog.Level
	mu   sync.Mutex
	recs []slog.Record
}

// Enabled implements slog.Handler.
func (l *Logs) Enabled(_ context.Context, level slog.Level) bool { return level >= l.Min }

// Handle implements slog.Handler.
func (l *Logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r.Clone())
	l.mu.Unlock()
	return nil
}

// WithAttrs implements slog.Handler; the attributes are dropped.
func (l *Logs) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup implements slog.Handler; the group is dropped.
func (l *Logs) WithGroup(string) slog.Handler { return l }

// Records returns the records kept so far.
func (l *Logs) Records() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}

// At returns the records of level or above whose message contains text.
func (l *Logs) At(level slog.Level, text string) []slog.Record {
	var out []slog.Record
	for _, r := range l.Records() {
		if r.Level >= level && strings.Contains(r.Message, text) {
			out = append(out, r)
		}
	}
	return out
}

// String renders the records kept so far, one a line, for test failures.
func (l *Logs) String() string {
	var b strings.Builder
	for _, r := range l.Records() {
		fmt.Fprintf(&b, "\n%s %s", r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	}
	return b.String()
}

// Attr returns the value of a record's attribute key as text, "" when it has none.
func Attr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}
