package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/gocotal/cotal/internal/meshwire"
	"github.com/gocotal/cotal/internal/runhost"
	"github.com/gocotal/cotal/wire"
)

// Runs is what the dashboard shows of the space's workflow runs, and the one thing it does to
// them: answer an open checkpoint.
type Runs interface {
	List(ctx context.Context) ([]runhost.Row, error)
	View(ctx context.Context, runID string) (*runhost.View, error)
	Answer(ctx context.Context, runID, step string, value json.RawMessage) error
}

// runs is GET /api/runs: every run recorded, [] when the dashboard shows none.
func (s *Server) runs(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Runs == nil {
		writeJSON(w, http.StatusOK, []runhost.Row{})
		return
	}
	rows, err := s.cfg.Runs.List(r.Context())
	if err != nil {
		writeError(w, http.StatusBadGateway, "runs-unavailable", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rows)
}

// run is GET /api/runs/{id}: a run's record and journal, a row per record.
func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !s.runRoute(w, id) {
		return
	}
	v, err := s.cfg.Runs.View(r.Context(), id)
	if err != nil {
		writeRunError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// answerRun is POST /api/runs/{id}/answer, {"step": KEY, "value": JSON}: the person's answer to
// the run's open checkpoint at step.
func (s *Server) answerRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !s.runRoute(w, id) {
		return
	}
	var req struct {
		Step  string          `json:"step"`
		Value json.RawMessage `json:"value"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	if !strings.HasPrefix(req.Step, "/") {
		writeError(w, http.StatusBadRequest, "bad-step", "a step is its key, as the journal prints it")
		return
	}
	if len(req.Value) == 0 {
		req.Value = json.RawMessage("null")
	}
	if err := s.cfg.Runs.Answer(r.Context(), id, req.Step, req.Value); err != nil {
		writeRunError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"run": id, "step": req.Step})
}

// answerPath reports whether path is a run's answer route, /api/runs/{id}/answer.
func answerPath(path string) bool {
	id, ok := strings.CutPrefix(path, "/api/runs/")
	id, ok2 := strings.CutSuffix(id, "/answer")
	return ok && ok2 && id != "" && !strings.Contains(id, "/")
}

// runRoute refuses a run route the dashboard does not serve, or a run id that is not one.
func (s *Server) runRoute(w http.ResponseWriter, id string) bool {
	if s.cfg.Runs == nil {
		writeError(w, http.StatusNotFound, "no-runs", "this dashboard shows no workflow runs")
		return false
	}
	if err := meshwire.ValidateRunID(id); err != nil {
		writeError(w, http.StatusBadRequest, "bad-run", err.Error())
		return false
	}
	return true
}

// writeRunError maps a run refusal to its status: an unknown run or step 404, a refused answer
// 400 or 403, anything else 502.
func writeRunError(w http.ResponseWriter, err error) {
	status, code := http.StatusBadGateway, "run-failed"
	if e, ok := errors.AsType[*wire.EndpointError](err); ok {
		switch e.Code {
		case wire.CodeNotFound:
			status, code = http.StatusNotFound, "not-found"
		case wire.CodeBadRequest:
			status, code = http.StatusBadRequest, "bad-answer"
		case wire.CodePermissionDenied:
			status, code = http.StatusForbidden, "not-allowed"
		}
	}
	switch {
	case errors.Is(err, runhost.ErrNoRun), errors.Is(err, runhost.ErrNotWaiting):
		status, code = http.StatusNotFound, "not-found"
	case errors.Is(err, runhost.ErrBadAnswer):
		status, code = http.StatusBadRequest, "bad-answer"
	}
	writeError(w, status, code, err.Error())
}
