package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gocotal/cotal/internal/bench"
)

// TestFailedCaseRendered: a failed case shows in the table, the JSON and the page with its error,
// beside the cases that were measured.
func TestFailedCaseRendered(t *testing.T) {
	yes := true
	res := []bench.Result{
		{Name: "presence/5000", Error: "the roster shows 0 of 5000 agents online after 30s"},
		{Name: "dm", Unit: "msgs/s", Cotal: 9000, Raw: 10000, Ratio: 0.9, Target: "ratio ≥ 0.85", Met: &yes},
	}
	var table bytes.Buffer
	writeTable(&table, res)
	for _, want := range []string{"presence/5000  FAILED", "presence/5000 FAILED: the roster shows 0 of 5000", "ratio ≥ 0.85 met"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var raw bytes.Buffer
	if err := writeJSON(&raw, &bench.Env{Embedded: true, Space: "main"}, time.Second, res); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Results []struct {
			Name  string  `json:"name"`
			Cotal float64 `json:"cotal"`
			Error string  `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw.Bytes(), &rep); err != nil || len(rep.Results) != 2 || rep.Results[0].Error == "" || rep.Results[1].Error != "" || rep.Results[1].Cotal != 9000 {
		t.Fatalf("json %s: %v", raw.String(), err)
	}
	var page bytes.Buffer
	if err := writeHTML(&page, "embedded", time.Second, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "failed: the roster shows 0 of 5000") || !strings.Contains(page.String(), `aria-label="dm"`) {
		t.Errorf("page:\n%s", page.String())
	}
}
