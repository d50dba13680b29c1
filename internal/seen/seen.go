// Package seen is a bounded set of message ids: it remembers the last ones added, up to a size,
// forgetting the oldest first. De-duplication keeps one per receiver.
package seen

// Set remembers up to Size ids. The zero value is not usable: make one with New. It is not safe
// for concurrent use.
type Set struct {
	size int
	has  map[string]bool
	// order is a ring of the ids in has; oldest indexes the next to forget once it is full.
	order  []string
	oldest int
}

// New returns a set of at most size ids. It grows with use: sizing it up front cost a quiet
// receiver memory it never used.
func New(size int) *Set { return &Set{size: size, has: map[string]bool{}} }

// Has reports whether id is remembered.
func (s *Set) Has(id string) bool { return s.has[id] }

// Add remembers id, forgetting the oldest once the set is full.
func (s *Set) Add(id string) {
	if s.has[id] {
		return
	}
	s.has[id] = true
	if len(s.order) < s.size {
		s.order = append(s.order, id)
		return
	}
	delete(s.has, s.order[s.oldest])
	s.order[s.oldest] = id
	s.oldest = (s.oldest + 1) % s.size
}
