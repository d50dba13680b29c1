package manager

import (
	"bytes"
	"slices"
)

// A real terminal answers the questions a program asks it at once; the supervisor's pty answers
// the ones programs ask at start, while no person is attached (whose own terminal answers them
// then): the background and foreground colours (OSC 11 and OSC 10, ended by BEL or ST) and the
// cursor position (DSR 6). Unanswered, a program waits out its own timeout: termenv, which
// bubbletea's package init runs, waits 5 s. The answers describe a dark terminal with the cursor
// home.
var termQueries = []struct{ query, answer string }{
	{"\x1b]11;?\x07", "\x1b]11;rgb:0000/0000/0000\x07"},
	{"\x1b]11;?\x1b\\", "\x1b]11;rgb:0000/0000/0000\x1b\\"},
	{"\x1b]10;?\x07", "\x1b]10;rgb:ffff/ffff/ffff\x07"},
	{"\x1b]10;?\x1b\\", "\x1b]10;rgb:ffff/ffff/ffff\x1b\\"},
	{"\x1b[6n", "\x1b[1;1R"},
}

// longestQuery is the length of the longest of termQueries.
var longestQuery = len(slices.MaxFunc(termQueries, func(a, b struct{ query, answer string }) int {
	return len(a.query) - len(b.query)
}).query)

// maxAnswers bounds the queries answered in one run of a process. Programs ask at start; the
// bound keeps the answers of a process that asks and never reads (64 of at most 25 bytes) within
// the pty's input buffer, so writing them never blocks the reader of its output.
const maxAnswers = 64

// queryScanner finds termQueries in a process's output, read a chunk at a time: a query split
// across two chunks is found in the second.
type queryScanner struct {
	tail     []byte // the end of the output so far, shorter than the longest query
	answered int
}

// answers returns the answers to the queries that end in chunk, in the order they were asked, as
// long as the run has had fewer than maxAnswers.
func (s *queryScanner) answers(chunk []byte) []byte {
	buf := append(s.tail, chunk...)
	type asked struct {
		at     int
		answer string
	}
	var found []asked
	for _, q := range termQueries {
		for from := 0; ; {
			i := bytes.Index(buf[from:], []byte(q.query))
			if i < 0 {
				break
			}
			at := from + i
			if at+len(q.query) > len(s.tail) { // one that ended in the tail was answered already
				found = append(found, asked{at, q.answer})
			}
			from = at + 1
		}
	}
	s.tail = bytes.Clone(buf[max(0, len(buf)-(longestQuery-1)):])
	slices.SortFunc(found, func(a, b asked) int { return a.at - b.at })
	var out []byte
	for _, f := range found {
		if s.answered == maxAnswers {
			break
		}
		s.answered++
		out = append(out, f.answer...)
	}
	return out
}
