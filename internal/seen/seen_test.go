package seen

import "testing"

func TestSetForgetsTheOldest(t *testing.T) {
	s := New(2)
	s.Add("a")
	s.Add("a") // again: no second place
	s.Add("b")
	if !s.Has("a") || !s.Has("b") {
		t.Fatal("the set forgot what fits")
	}
	s.Add("c")
	if s.Has("a") || !s.Has("b") || !s.Has("c") {
		t.Errorf("after a third id: a %v b %v c %v, want the oldest forgotten", s.Has("a"), s.Has("b"), s.Has("c"))
	}
	s.Add("d")
	if s.Has("b") || !s.Has("d") {
		t.Error("the ring did not move on")
	}
}
