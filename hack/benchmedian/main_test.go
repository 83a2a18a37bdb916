package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	in := `goos: linux
BenchmarkTail/sqlite/events=10-2   20000   10198 ns/op   1208 B/op   37 allocs/op
BenchmarkTail/sqlite/events=10-2   20000   9884 ns/op    1208 B/op   37 allocs/op
--- BENCH: BenchmarkTailRatio/sqlite-2
BenchmarkTail/sqlite/events=10-2   20000   16461 ns/op   1208 B/op   37 allocs/op
BenchmarkTailRatio/sqlite-2   10000   42160 ns/op   9388 ns/tail@10   1.001 ratio-1M/10
BenchmarkTailRatio/sqlite-2   10000   50506 ns/op   9340 ns/tail@10   1.004 ratio-1M/10
PASS
`
	var out bytes.Buffer
	if err := summarize(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"BenchmarkTail/sqlite/events=10-2                    3 runs  10198 ns/op  1208 B/op  37 allocs/op",
		"BenchmarkTailRatio/sqlite-2                         2 runs  46333 ns/op  9364 ns/tail@10  1.002 ratio-1M/10",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := summarize(strings.NewReader("PASS\n"), &out); err == nil {
		t.Fatal("no error for input without benchmarks")
	}
}
