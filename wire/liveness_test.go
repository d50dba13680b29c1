package wire

import (
	"errors"
	"testing"
)

func TestParseLivenessAnswer(t *testing.T) {
	good := map[string]LivenessAnswer{
		`{"plane":"delivery","responder":"bound"}`:                        {Plane: PlaneDelivery, Responder: ResponderBound},
		`{"plane":"delivery","responder":"stale","instance":"abc","x":1}`: {Plane: PlaneDelivery, Responder: ResponderStale, Instance: "abc"},
	}
	for in, want := range good {
		got, err := ParseLivenessAnswer(PlaneDelivery, []byte(in))
		if err != nil || *got != want {
			t.Errorf("ParseLivenessAnswer(%s) = %+v, %v", in, got, err)
		}
	}
	for _, in := range []string{
		``, `null`, `[]`, `{}`,
		`{"plane":"manager","responder":"bound"}`,
		`{"plane":"delivery","responder":"alive"}`,
		`{"plane":"delivery","responder":1}`,
		`{"plane":"delivery","responder":"bound","instance":""}`,
		`{"plane":"delivery","responder":"bound","instance":5}`,
	} {
		if _, err := ParseLivenessAnswer(PlaneDelivery, []byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseLivenessAnswer(%s) = %v, want ErrInvalid", in, err)
		}
	}
}

func TestGradeProbe(t *testing.T) {
	stale := &LivenessAnswer{Plane: PlaneManager, Responder: ResponderStale}
	tests := []struct {
		outcome ProbeOutcome
		answer  *LivenessAnswer
		want    ResponderState
	}{
		{ProbeReplied, stale, ResponderStale},
		{ProbeNoResponders, nil, ResponderUnbound},
		{ProbeTimeout, nil, ResponderUnknown},
		{ProbeRefused, nil, ResponderUnknown},
		{ProbeMalformed, nil, ResponderUnknown},
		{ProbeReplied, nil, ResponderUnknown},
	}
	for _, tt := range tests {
		if got := GradeProbe(tt.outcome, tt.answer); got != tt.want {
			t.Errorf("GradeProbe(%s) = %s, want %s", tt.outcome, got, tt.want)
		}
	}
}
