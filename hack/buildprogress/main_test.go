package main

import (
	"strings"
	"testing"
	"time"
)

func TestProgress(t *testing.T) {
	var out strings.Builder
	t0 := time.Unix(0, 0)
	p := &progress{label: "kube-apiserver", total: 400, prefix: "x: ", out: &out, start: t0}
	p.report(t0.Add(10 * time.Second))
	for _, l := range []string{"runtime", "k8s.io/api/core/v1", "# k8s.io/broken", "broken/x.go:3:1: syntax error"} {
		p.line(l)
	}
	for i := 0; i < 98; i++ {
		p.line("example.com/p")
	}
	p.report(t0.Add(time.Minute))
	p.compiled = 400
	p.report(t0.Add(4 * time.Minute))
	p.done(t0.Add(5 * time.Minute))
	want := make([]string, 0, 7)
	want = append(want,
		"x: kube-apiserver: 10s elapsed, nothing compiled yet (cached packages are not counted; linking comes last)",
		"# k8s.io/broken",
		"broken/x.go:3:1: syntax error",
		// 100 of 400 in a minute: 300 more at that pace is about 3 minutes.
		"x: kube-apiserver: 100 of at most 400 packages compiled (25%), 1m0s elapsed, at most about 3m0s left at this pace, plus the link",
		"x: kube-apiserver: all 400 packages compiled, 4m0s elapsed; linking",
		"x: kube-apiserver: 400 packages compiled in 5m0s",
	)
	cached := &progress{label: "etcd", prefix: "x: ", out: &out, start: t0}
	cached.done(t0.Add(3 * time.Second))
	want = append(want, "x: etcd: built from the Go build cache in 3s")
	if got := strings.Split(strings.TrimSpace(out.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("progress output:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}
}
