package planweb

import (
	"bytes"
	"fmt"
	"html/template"
	"regexp"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// A plan is text an agent wrote, so it is rendered as untrusted: goldmark without its unsafe
// option drops raw HTML, and bluemonday then keeps only an allow-list stricter than its
// UGCPolicy (no images, no style, no id/name attributes that could clobber the page's script
// globals). The page's Content-Security-Policy forbids inline script besides.

var markdown = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(imagesAsLinks{}, 100))),
)

// policy is the allow-list for rendered plans.
var policy = func() *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowStandardURLs() // http, https, mailto; relative URLs; no javascript:, data: or vbscript:
	p.AllowURLSchemes("http", "https", "mailto")
	p.RequireNoFollowOnLinks(true)
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	p.AllowAttrs("href", "title").OnElements("a")
	p.AllowElements("h1", "h2", "h3", "h4", "h5", "h6", "p", "br", "hr", "blockquote",
		"ul", "ol", "li", "dl", "dt", "dd", "pre", "code", "em", "strong", "del", "s", "sup", "sub",
		"table", "thead", "tbody", "tfoot", "tr", "th", "td", "caption", "span", "kbd", "samp")
	p.AllowAttrs("align").Matching(regexp.MustCompile(`^(left|right|center)$`)).OnElements("th", "td")
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^language-[\w+-]{1,32}$`)).OnElements("code")
	// GFM task lists render as disabled checkboxes.
	p.AllowAttrs("type").Matching(regexp.MustCompile(`^checkbox$`)).OnElements("input")
	p.AllowAttrs("checked", "disabled").OnElements("input")
	return p
}()

// RenderPlan renders a plan's Markdown to sanitized HTML.
func RenderPlan(plan string) (template.HTML, error) {
	var buf bytes.Buffer
	if err := markdown.Convert([]byte(plan), &buf); err != nil {
		return "", fmt.Errorf("render the plan's Markdown: %w", err)
	}
	//nolint:gosec // sanitized by the allow-list just above: this is the one place HTML is trusted.
	return template.HTML(policy.SanitizeBytes(buf.Bytes())), nil
}

// imagesAsLinks replaces each image with a link to it, so that the page never loads a remote
// resource (a tracking pixel would tell the agent's side who read the plan, and when).
type imagesAsLinks struct{}

func (imagesAsLinks) Transform(doc *ast.Document, _ text.Reader, _ parser.Context) {
	var images []*ast.Image
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if img, ok := n.(*ast.Image); ok && entering {
			images = append(images, img)
		}
		return ast.WalkContinue, nil
	})
	for _, img := range images {
		link := ast.NewLink()
		link.Destination, link.Title = img.Destination, img.Title
		// The alt text (the image's children) becomes the link's text, after "image: ".
		link.AppendChild(link, ast.NewString([]byte("image: ")))
		for c := img.FirstChild(); c != nil; c = img.FirstChild() {
			link.AppendChild(link, c)
		}
		img.Parent().ReplaceChild(img.Parent(), img, link)
	}
}
