package meshwire

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/gocotal/cotal/lang"
	"github.com/gocotal/cotal/wire"
)

// runSpecVersion and answerVersion are the only versions of those records.
const (
	runSpecVersion = 1
	answerVersion  = 1
)

// RunSpec is a run record's spec half (SPEC §14.3), written once when the run starts: the run,
// its resolved pins, when it was created, and the run it was forked from.
type RunSpec struct {
	V          int       `json:"v"`
	Run        string    `json:"run"`
	Pins       lang.Pins `json:"pins"`
	CreatedAt  int64     `json:"createdAt"`
	ForkedFrom *RunFork  `json:"forkedFrom,omitempty"`
}

// RunFork names a fork's parent run and the step it was cut at.
type RunFork struct {
	Run  string `json:"run"`
	Step string `json:"step"`
}

// ParseRunSpec decodes a run spec record, refusing an unknown version or field, trailing data,
// a run id that is not one, and pins without a language version or budgets.
func ParseRunSpec(data []byte) (RunSpec, error) {
	var r RunSpec
	if err := decodeClosed(data, "run spec", &r); err != nil {
		return RunSpec{}, err
	}
	switch {
	case r.V != runSpecVersion:
		return RunSpec{}, wire.Invalidf("v", fmt.Sprint(r.V), "must be %d", runSpecVersion)
	case ValidateRunID(r.Run) != nil:
		return RunSpec{}, ValidateRunID(r.Run)
	case r.Pins.LanguageVersion == "":
		return RunSpec{}, wire.Invalid("pins.languageVersion", "", "is required")
	case r.Pins.StepBudget < 1 || r.Pins.EffectCeiling < 1:
		return RunSpec{}, wire.Invalid("pins", "", "must carry a step budget and an effect ceiling of at least 1")
	}
	return r, nil
}

// Answer is a checkpoint's answer record (SPEC §14.3), create-only under
// answer.<endpoint>.<token>.<answerId>: the value a person (or an agent) gave, who gave it, when.
type Answer struct {
	V        int             `json:"v"`
	Token    string          `json:"token"`
	AnswerID string          `json:"answerId"`
	Value    json.RawMessage `json:"value,omitempty"`
	Artifact json.RawMessage `json:"artifact,omitempty"`
	By       string          `json:"by"`
	At       int64           `json:"at"`
}

// NewAnswer returns the answer record of token's checkpoint, its id derived from what it says.
func NewAnswer(token, by string, value, artifact json.RawMessage, at int64) (Answer, error) {
	id, err := answerID(token, by, value, artifact)
	if err != nil {
		return Answer{}, err
	}
	return Answer{V: answerVersion, Token: token, AnswerID: id, Value: value, Artifact: artifact, By: by, At: at}, nil
}

// answerID is the derived id of an answer: the unpadded base64url SHA-256 of the canonical
// { token, by, value, artifact }, an absent value or artifact as null.
func answerID(token, by string, value, artifact json.RawMessage) (string, error) {
	orNull := func(v json.RawMessage) json.RawMessage {
		if len(v) == 0 {
			return json.RawMessage("null")
		}
		return v
	}
	return DerivedID(map[string]any{"token": token, "by": by, "value": orNull(value), "artifact": orNull(artifact)})
}

// ParseAnswer decodes an answer record, refusing an unknown version or field, a missing token
// or author, and an id that is not the one its content derives.
func ParseAnswer(data []byte) (Answer, error) {
	var a Answer
	if err := decodeClosed(data, "answer", &a); err != nil {
		return Answer{}, err
	}
	switch {
	case a.V != answerVersion:
		return Answer{}, wire.Invalidf("v", fmt.Sprint(a.V), "must be %d", answerVersion)
	case a.Token == "" || a.By == "":
		return Answer{}, wire.Invalid("answer", "", "must name its token and who gave it")
	}
	id, err := answerID(a.Token, a.By, a.Value, a.Artifact)
	if err != nil {
		return Answer{}, err
	}
	if id != a.AnswerID {
		return Answer{}, wire.Invalid("answerId", a.AnswerID, "is not the id its token, author, value and artifact derive")
	}
	return a, nil
}

// RunProgram is a run record's program leaf (run.<endpoint>.<runId>.program), a cotal-go
// addition to SPEC §14.3: the source the run is driven under and its program hash, written by
// its driver when the run starts and each time a resume hands it an edit, so a host that did not
// start the run can take it over. A reader checks the hash against the source.
type RunProgram struct {
	V           int    `json:"v"`
	Run         string `json:"run"`
	ProgramHash string `json:"programHash"`
	Source      string `json:"source"`
	At          int64  `json:"at"`
}

// NewRunProgram returns run runID's program record for source.
func NewRunProgram(runID, source string, at int64) RunProgram {
	return RunProgram{V: 1, Run: runID, ProgramHash: lang.ProgramHash(source), Source: source, At: at}
}

// ParseRunProgram reads run runID's program record: a closed shape whose hash is its source's.
func ParseRunProgram(data []byte, runID string) (RunProgram, error) {
	var p RunProgram
	if err := decodeClosed(data, "run program", &p); err != nil {
		return RunProgram{}, err
	}
	switch {
	case p.V != 1:
		return RunProgram{}, wire.Invalidf("v", fmt.Sprint(p.V), "must be 1")
	case p.Run != runID:
		return RunProgram{}, wire.Invalidf("run", p.Run, "must be the run's own (%s)", runID)
	case p.ProgramHash != lang.ProgramHash(p.Source):
		return RunProgram{}, wire.Invalid("programHash", p.ProgramHash, "is not its source's hash")
	}
	return p, nil
}

// decodeClosed decodes one JSON object into v, refusing unknown fields and trailing data.
func decodeClosed(data []byte, what string, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if dec.More() {
		return wire.Invalid(what, "", "must hold one JSON object")
	}
	return nil
}

// noticeVersion is the only version of a notice's records.
const noticeVersion = 1

// NoticeSpec is a notice's spec half (SPEC §14.3), create-only under
// notice.<endpoint>.<runId>.<addresseeId>.<noticeId>.spec: a run's decision record, for one
// addressee, rendered ahead of its next turn.
type NoticeSpec struct {
	V         int             `json:"v"`
	Run       string          `json:"run"`
	Step      string          `json:"step"`
	Addressee string          `json:"addressee"`
	Fact      json.RawMessage `json:"fact"`
	At        int64           `json:"at"`
}

// NoticeStatus is a notice's status half: when its addressee's turn carried it, and who that was.
type NoticeStatus struct {
	V                    int    `json:"v"`
	ConsumedAt           int64  `json:"consumedAt"`
	By                   string `json:"by"`
	ObservedSpecRevision uint64 `json:"observedSpecRevision"`
}

// NoticeIDs returns a notice's addressee id and notice id, derived as the SPEC words them: the
// addressee's from { agent }, the notice's from { requestId, addressee }.
func NoticeIDs(requestID, addressee string) (addresseeID, noticeID string, err error) {
	if addresseeID, err = DerivedID(map[string]any{"agent": addressee}); err != nil {
		return "", "", err
	}
	noticeID, err = DerivedID(map[string]any{"requestId": requestID, "addressee": addressee})
	return addresseeID, noticeID, err
}

// DerivedID is a record's derived id: the unpadded base64url SHA-256 of v's canonical JSON.
func DerivedID(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	canon, err := wire.Canonicalize(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// ParseNoticeSpec decodes a notice's spec record, refusing an unknown version or field.
func ParseNoticeSpec(data []byte) (NoticeSpec, error) {
	var n NoticeSpec
	if err := decodeClosed(data, "notice", &n); err != nil {
		return NoticeSpec{}, err
	}
	if n.V != noticeVersion || n.Run == "" || n.Addressee == "" {
		return NoticeSpec{}, wire.Invalid("notice", "", "must be version 1 and name its run and addressee")
	}
	return n, nil
}
