// Command buildprogress turns `go build -v` output into progress lines with an estimate, for
// the long cold builds of hack/envtest-binaries.sh. go build -v prints each package as it is
// compiled; this counts them against the number of packages the target depends on.
//
//	go build -v ... 2>&1 | go run ./hack/buildprogress -label kube-apiserver -total 2143
//
// Lines that are not package paths (compiler errors) pass through at once. When nothing is
// compiled for a while (the final link), a line still says how long it has been.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	label := flag.String("label", "build", "what is being built, for the progress lines")
	total := flag.Int("total", 0, "packages the target depends on (go list -deps | wc -l); 0: no estimate")
	every := flag.Duration("every", 20*time.Second, "how often a progress line is printed")
	prefix := flag.String("prefix", "envtest-binaries: ", "prefix of every line printed")
	flag.Parse()
	p := &progress{label: *label, total: *total, prefix: *prefix, out: os.Stderr, start: time.Now()}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				p.done(time.Now())
				return
			}
			p.line(l)
		case now := <-tick.C:
			p.report(now)
		}
	}
}

type progress struct {
	label, prefix string
	total         int
	out           io.Writer
	start         time.Time
	compiled      int
}

// isPackage tells a package path line of go build -v from anything else.
func isPackage(l string) bool {
	return l != "" && !strings.ContainsAny(l, " \t:#")
}

func (p *progress) line(l string) {
	if isPackage(l) {
		p.compiled++
		return
	}
	fmt.Fprintln(p.out, l)
}

// report prints one progress line: packages compiled, elapsed and, while packages are still
// being compiled, an estimate of the time left at the pace so far.
func (p *progress) report(now time.Time) {
	elapsed := now.Sub(p.start).Round(time.Second)
	switch {
	case p.compiled == 0:
		fmt.Fprintf(p.out, "%s%s: %s elapsed, nothing compiled yet (cached packages are not counted; linking comes last)\n", p.prefix, p.label, elapsed)
	case p.total <= 0:
		fmt.Fprintf(p.out, "%s%s: %d packages compiled, %s elapsed\n", p.prefix, p.label, p.compiled, elapsed)
	case p.compiled >= p.total:
		fmt.Fprintf(p.out, "%s%s: all %d packages compiled, %s elapsed; linking\n", p.prefix, p.label, p.total, elapsed)
	default:
		left := time.Duration(float64(now.Sub(p.start)) * float64(p.total-p.compiled) / float64(p.compiled)).Round(10 * time.Second)
		fmt.Fprintf(p.out, "%s%s: %d of at most %d packages compiled (%d%%), %s elapsed, at most about %s left at this pace, plus the link\n",
			p.prefix, p.label, p.compiled, p.total, 100*p.compiled/p.total, elapsed, left)
	}
}

func (p *progress) done(now time.Time) {
	if p.compiled == 0 {
		fmt.Fprintf(p.out, "%s%s: built from the Go build cache in %s\n", p.prefix, p.label, now.Sub(p.start).Round(time.Second))
		return
	}
	fmt.Fprintf(p.out, "%s%s: %d packages compiled in %s\n", p.prefix, p.label, p.compiled, now.Sub(p.start).Round(time.Second))
}
