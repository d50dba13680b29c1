package doccheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository root, from this package's directory.
const root = "../.."

// pages returns README.md and every Markdown page under docs/.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	issueNo = regexp.MustCompile(`(?i)\bissues? #?[0-9]`)
)

// TestLinksResolve: every relative link of the README and the guides names a file or directory
// of the tree.
func TestLinksResolve(t *testing.T) {
	for _, p := range pages(t) {
		body, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllSubmatch(body, -1) {
			target := string(m[1])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(p), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", p, m[1])
			}
		}
	}
}

// TestNoDiary: the README and the guides are reference for a user; none cites an issue number.
func TestNoDiary(t *testing.T) {
	for _, p := range pages(t) {
		f, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(f))
		for n := 1; sc.Scan(); n++ {
			if issueNo.MatchString(sc.Text()) {
				t.Errorf("%s:%d cites an issue: %s", p, n, sc.Text())
			}
		}
	}
}

// TestReadmeIsAFrontDoor: the README stays short; guides live in docs/.
func TestReadmeIsAFrontDoor(t *testing.T) {
	body, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(body, []byte("\n")); n >= 250 {
		t.Errorf("README.md has %d lines; keep it under 250 and move guides to docs/", n)
	}
}

// TestGrafanaDashboard: the dashboard docs/metrics.md offers is JSON Grafana imports, and every
// metric its panels query is one the page documents.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "docs", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil || dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatalf("the dashboard: %v (title %q, %d panels)", err, dash.Title, len(dash.Panels))
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`cotal_[a-z_]+`)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				m = strings.TrimSuffix(m, "_bucket")
				if !bytes.Contains(page, []byte("`"+m+"`")) {
					t.Errorf("panel %q queries %s, which docs/metrics.md does not document", p.Title, m)
				}
			}
		}
	}
}
