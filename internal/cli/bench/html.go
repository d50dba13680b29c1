package bench

import (
	"fmt"
	"html/template"
	"io"
	"time"

	"github.com/gocotal/cotal/internal/bench"
)

// The --html report: each case's Cotal figure beside raw NATS's as a pair of bars, with the
// ratio and the target, on one self-contained page (inline SVG, no script).

// bar is one case as the page draws it.
type bar struct {
	Name, Unit, Cotal, Raw, Ratio, Target string
	// CotalWidth and RawWidth are the bars' lengths, in pixels, each case scaled to its larger.
	CotalWidth, RawWidth int
	Met                  string // "met", "missed" or ""
	// Failed is why the case failed; it has no bars then.
	Failed string
}

// barMax is the longest bar, in pixels.
const barMax = 420

var page = template.Must(template.New("bench").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cotal bench</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d2230}
h1{font-size:18px} .meta{color:#667}
.case{margin:14px 0} .name{font-weight:600} .unit,.note{color:#667;font-size:12px}
.met{color:#2a7a2a} .missed{color:#b3261e}
svg text{font:12px system-ui,sans-serif}
</style></head><body>
<h1>Cotal over raw NATS</h1>
<p class="meta">{{.When}} · broker {{.Broker}} · {{len .Bars}} cases · each throughput side ran {{.Duration}}</p>
{{range .Bars}}<div class="case">
<div><span class="name">{{.Name}}</span> <span class="unit">{{.Unit}}</span>{{if .Ratio}} · ratio {{.Ratio}}{{end}}{{if .Target}} · target {{.Target}} <span class="{{.Met}}">{{.Met}}</span>{{end}}</div>
{{if .Failed}}<div class="missed">failed: {{.Failed}}</div>
{{else}}<svg width="640" height="{{if .Raw}}44{{else}}22{{end}}" role="img" aria-label="{{.Name}}">
<rect x="60" y="2" width="{{.CotalWidth}}" height="16" fill="#3d6bd6"></rect><text x="0" y="14">cotal</text><text x="{{.CotalWidth}}" dx="66" y="14">{{.Cotal}}</text>
{{if .Raw}}<rect x="60" y="24" width="{{.RawWidth}}" height="16" fill="#9aa3b5"></rect><text x="0" y="36">raw</text><text x="{{.RawWidth}}" dx="66" y="36">{{.Raw}}</text>{{end}}
</svg>{{end}}</div>
{{end}}</body></html>
`))

// writeHTML writes the report page of res.
func writeHTML(w io.Writer, broker string, d time.Duration, res []bench.Result) error {
	var bars []bar
	for _, r := range res {
		if r.Error != "" {
			bars = append(bars, bar{Name: r.Name, Failed: r.Error})
			continue
		}
		b := bar{Name: r.Name, Unit: r.Unit, Cotal: figure(r.Cotal), Target: r.Target}
		top := max(r.Cotal, r.Raw)
		if top > 0 {
			b.CotalWidth = max(1, int(r.Cotal/top*barMax))
		}
		if r.Raw > 0 {
			b.Raw, b.Ratio, b.RawWidth = figure(r.Raw), fmt.Sprintf("%.2f", r.Ratio), max(1, int(r.Raw/top*barMax))
		}
		if r.Met != nil {
			b.Met = map[bool]string{true: "met", false: "missed"}[*r.Met]
		}
		bars = append(bars, b)
	}
	return page.Execute(w, map[string]any{"When": time.Now().UTC().Format(time.RFC3339), "Broker": broker, "Duration": d, "Bars": bars})
}
