package web

import (
	"bytes"
	"regexp"
	"strings"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer/html"

	"github.com/gocotal/cotal/wire"
)

// A message body is a peer's words, and a peer may be hostile: it is rendered as Markdown, then
// sanitised to an allow-list of tags and attributes, so no script, event handler, style, image,
// frame or javascript: link survives, whatever the Markdown or raw HTML in it.

// markdown renders GFM with hard line breaks; raw HTML in the source is escaped, not passed.
var markdown = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithRendererOptions(html.WithHardWraps()),
)

// safeURL is the only link targets a body may carry: web, mail and in-page links.
var safeURL = regexp.MustCompile(`^(https?:|mailto:|#|/)`)

// policy is the reference's allow-list: text structure and links, nothing that runs or loads.
var policy = func() *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowElements("p", "br", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li",
		"h1", "h2", "h3", "h4", "h5", "h6", "hr", "span")
	p.AllowAttrs("href").Matching(safeURL).OnElements("a")
	p.AllowAttrs("title").OnElements("a")
	p.AllowURLSchemes("http", "https", "mailto")
	p.RequireNoFollowOnLinks(true)
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	return p
}()

// Render returns a message's text parts as sanitised HTML: safe to insert into a page.
func Render(m *wire.CotalMessage) string {
	var text []string
	for _, p := range m.Parts {
		if p.Kind == wire.PartText {
			text = append(text, p.Text)
		}
	}
	return RenderMarkdown(strings.Join(text, "\n\n"))
}

// RenderMarkdown renders src as Markdown and sanitises the result.
func RenderMarkdown(src string) string {
	var buf bytes.Buffer
	if err := markdown.Convert([]byte(src), &buf); err != nil {
		// goldmark fails only on a writer error, which a buffer never returns; fall back to the
		// escaped text all the same.
		return policy.Sanitize(strings.ReplaceAll(src, "<", "&lt;"))
	}
	return policy.Sanitize(buf.String())
}
