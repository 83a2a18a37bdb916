// Command benchmedian reads `go test -bench -count N` output on stdin and prints, for each
// benchmark, the median of every metric over the N runs (used by `make bench-log`).
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if err := summarize(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchmedian:", err)
		os.Exit(1)
	}
}

// summarize prints "name  runs  median unit ..." lines in first-seen order.
func summarize(r io.Reader, w io.Writer) error {
	type bench struct {
		units  []string
		values map[string][]float64
		runs   int
	}
	var order []string
	benches := map[string]*bench{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// BenchmarkName-P  iterations  value unit  value unit ...
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		b := benches[f[0]]
		if b == nil {
			b = &bench{values: map[string][]float64{}}
			benches[f[0]] = b
			order = append(order, f[0])
		}
		b.runs++
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			unit := f[i+1]
			if _, seen := b.values[unit]; !seen {
				b.units = append(b.units, unit)
			}
			b.values[unit] = append(b.values[unit], v)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(order) == 0 {
		return fmt.Errorf("no benchmark lines in the input")
	}
	fmt.Fprintln(w, "median over runs:")
	for _, name := range order {
		b := benches[name]
		var parts []string
		for _, u := range b.units {
			parts = append(parts, format(median(b.values[u]))+" "+u)
		}
		fmt.Fprintf(w, "%-50s %2d runs  %s\n", name, b.runs, strings.Join(parts, "  "))
	}
	return nil
}

// format prints whole numbers for large values and four significant digits for small ones
// (ratios).
func format(v float64) string {
	if v >= 100 || v <= -100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
