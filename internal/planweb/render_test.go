package planweb

import (
	"strings"
	"testing"
)

func TestRenderPlanKeepsMarkdown(t *testing.T) {
	got, err := RenderPlan("# Fix the flake\n\n```go\nfmt.Println(1)\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- [x] done\n\n[docs](https://example.com/d)\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<h1>Fix the flake</h1>",
		`<code class="language-go">fmt.Println(1)`,
		"<table>", "<th>a</th>", "<td>2</td>",
		`<input checked="" disabled="" type="checkbox"`,
		`<a href="https://example.com/d" rel="nofollow noreferrer noopener" target="_blank">docs</a>`,
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("rendered plan lacks %q:\n%s", want, got)
		}
	}
}

func TestRenderPlanIsInert(t *testing.T) {
	for _, tc := range []struct{ name, plan string }{
		{"raw script", "# P\n\n<script>window.pwned = 1</script>\n"},
		{"inline script", "# P\n\nhello <script>window.pwned=1</script> there\n"},
		{"javascript link", "# P\n\n[click](javascript:window.pwned=1)\n"},
		{"javascript autolink (left as text)", "# P\n\n<javascript:alert(1)>\n"},
		{"encoded javascript link", "# P\n\n[click](jav&#x09;ascript:alert(1))\n"},
		{"data link", "# P\n\n[click](data:text/html;base64,PHNjcmlwdD4=)\n"},
		{"event handler", "# P\n\n<img src=x onerror=alert(1)>\n<a href=\"#\" onclick=\"alert(1)\">x</a>\n"},
		{"iframe", "# P\n\n<iframe src=\"https://evil.example\"></iframe>\n"},
		{"style", "# P\n\n<style>body{display:none}</style>\n<p style=\"display:none\">x</p>\n"},
		{"svg", "# P\n\n<svg onload=alert(1)><script>alert(1)</script></svg>\n"},
		{"remote image", "# P\n\n![pixel](https://tracker.example/p.png)\n"},
		{"form", "# P\n\n<form action=\"https://evil.example\"><button>go</button></form>\n"},
		{"id clobbering", "# P\n\n<a id=\"live\" name=\"live\">x</a>\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderPlan(tc.plan)
			if err != nil {
				t.Fatal(err)
			}
			low := strings.ToLower(string(got))
			for _, bad := range []string{"<script", `href="javascript`, `href="jav`, "onerror", "onclick", "onload", "<iframe", "<img", "<style", "style=", "<svg", "data:", "<form", "id=", "name="} {
				if strings.Contains(low, bad) {
					t.Errorf("rendered %q holds %q:\n%s", tc.plan, bad, got)
				}
			}
		})
	}
}

func TestRenderPlanImageBecomesLink(t *testing.T) {
	got, err := RenderPlan("![the pixel](https://tracker.example/p.png)\n")
	if err != nil {
		t.Fatal(err)
	}
	want := `<a href="https://tracker.example/p.png" rel="nofollow noreferrer noopener" target="_blank">image: the pixel</a>`
	if !strings.Contains(string(got), want) {
		t.Errorf("got %s, want %s", got, want)
	}
}
