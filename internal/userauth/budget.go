package userauth

import (
	"container/list"
	"sync"
	"time"
)

// budget counts refusals per key in a sliding window and reports when a key has used up its
// allowance. Keys are kept in an LRU of bounded size, so a flood of distinct peers costs bounded
// memory; an evicted peer starts over with a full allowance. A budget is safe for concurrent use.
type budget struct {
	limit   int
	window  time.Duration
	maxKeys int

	mu    sync.Mutex
	lru   *list.List               // of *budgetEntry; front is the most recently refused. mu guards it
	byKey map[string]*list.Element // mu guards it
}

type budgetEntry struct {
	key   string
	times []time.Time // the refusals inside the window, oldest first; at most limit of them
}

func newBudget(limit int, window time.Duration, maxKeys int) *budget {
	return &budget{limit: limit, window: window, maxKeys: maxKeys, lru: list.New(), byKey: make(map[string]*list.Element)}
}

// refuse records a refusal for key at now and reports whether key had already used its allowance
// in the window before this one. Refusals over the allowance are recorded too, so a caller who
// keeps being refused stays throttled until it stops for a window.
func (b *budget) refuse(key string, now time.Time) (over bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	el, ok := b.byKey[key]
	if !ok {
		if b.lru.Len() >= b.maxKeys {
			oldest := b.lru.Back()
			b.lru.Remove(oldest)
			delete(b.byKey, oldest.Value.(*budgetEntry).key)
		}
		el = b.lru.PushFront(&budgetEntry{key: key})
		b.byKey[key] = el
	}
	b.lru.MoveToFront(el)
	e := el.Value.(*budgetEntry)
	cutoff := now.Add(-b.window)
	i := 0
	for i < len(e.times) && !e.times[i].After(cutoff) {
		i++
	}
	e.times = e.times[i:]
	over = len(e.times) >= b.limit
	if over {
		e.times = e.times[1:]
	}
	e.times = append(e.times, now)
	return over
}
