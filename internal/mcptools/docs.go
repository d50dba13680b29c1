package mcptools

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
)

// pages are cotal_docs' offline bundle: short pages for an agent, embedded in the binary.
//
//go:embed docs/*.md
var pages embed.FS

type docsArgs struct {
	Page  string `json:"page,omitempty" jsonschema:"a page name, from the index (no page and no query: the index)"`
	Query string `json:"query,omitempty" jsonschema:"words to find in every page"`
}

// docPages lists the page names, index first.
func docPages() []string {
	entries, _ := fs.ReadDir(pages, "docs") // the directory is embedded
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".md"))
	}
	slices.SortFunc(out, func(a, b string) int {
		switch {
		case a == "index":
			return -1
		case b == "index":
			return 1
		}
		return strings.Compare(a, b)
	})
	return out
}

func (t *Tools) docs(_ context.Context, in docsArgs) (*mcp.CallToolResult, error) {
	if in.Page != "" && in.Query != "" {
		return nil, errors.New("give a page or a query, not both")
	}
	if in.Query != "" {
		words := strings.Fields(strings.ToLower(in.Query))
		var b strings.Builder
		for _, name := range docPages() {
			raw, _ := pages.ReadFile(path.Join("docs", name+".md")) // listed, so embedded
			for _, line := range strings.Split(string(raw), "\n") {
				l := strings.ToLower(line)
				if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(l, w) }) {
					fmt.Fprintf(&b, "%s: %s\n", name, strings.TrimSpace(line))
				}
			}
		}
		if b.Len() == 0 {
			return text("nothing found for %q; pages: %s", in.Query, strings.Join(docPages(), ", ")), nil
		}
		return text("%s", b.String()), nil
	}
	name := in.Page
	if name == "" {
		name = "index"
	}
	if !slices.Contains(docPages(), name) {
		return nil, fmt.Errorf("no page %q; pages: %s", name, strings.Join(docPages(), ", "))
	}
	raw, _ := pages.ReadFile(path.Join("docs", name+".md")) // listed, so embedded
	return text("%s", raw), nil
}

// reconnectWait bounds how long cotal_reconnect waits for the new connection.
const reconnectWait = 10 * time.Second

// reconnect drops the connection and dials again now, rather than at the client's next backoff.
func (t *Tools) reconnect(ctx context.Context, _ noArgs) (*mcp.CallToolResult, error) {
	nc := t.c.Conn()
	if nc.IsClosed() {
		_, state := connState(t.c)
		return text("%s", state), nil
	}
	if err := nc.ForceReconnect(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, reconnectWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return text("reconnect failed within %s: still retrying automatically (%s)", reconnectWait, strings.ToLower(nc.Status().String())), nil
		case <-tick.C:
			if nc.Status() == nats.CONNECTED {
				return text("reconnected ✓ to %s", nc.ConnectedUrlRedacted()), nil
			}
		}
	}
}
