package warden

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// logEvery is how often the warden logs one kind of finding: a flood of captures from one cause
// writes one line per interval, counting the lines it held back, rather than one per capture.
const logEvery = time.Second

// logLimiter lets one log line per key through each logEvery and counts the others. It is safe for
// concurrent use.
type logLimiter struct {
	mu   sync.Mutex
	seen map[string]*logWindow // guarded by mu
}

type logWindow struct {
	at         time.Time
	suppressed int
}

// allow reports whether a line of key may be written now, and how many lines of key were held
// back since the last one written.
func (l *logLimiter) allow(key string, now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]*logWindow{}
	}
	win, ok := l.seen[key]
	if ok && now.Sub(win.at) < logEvery {
		win.suppressed++
		return false, 0
	}
	held := 0
	if ok {
		held = win.suppressed
	}
	l.seen[key] = &logWindow{at: now}
	if len(l.seen) > maxLogKeys {
		for k, w := range l.seen {
			if now.Sub(w.at) >= logEvery {
				delete(l.seen, k)
			}
		}
	}
	return true, held
}

// maxLogKeys bounds the limiter's memory: past it, keys whose interval has ended are forgotten.
const maxLogKeys = 1024

// limited logs msg at level under key, at most once per logEvery, with the count of lines held
// back since the last one.
func (w *Warden) limited(key string, level slog.Level, msg string, attrs ...any) {
	ok, held := w.logs.allow(key, time.Now())
	if !ok {
		return
	}
	if held > 0 {
		attrs = append(attrs, "suppressed", held)
	}
	w.log.Log(context.Background(), level, msg, attrs...)
}
