package sessionlog

import (
	"bytes"
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// The fixture is built from the harness's documented examples (a plan/mode, a plugin notice
// and a request header, and an idle /plan followed by a prompt after an earlier default-mode
// request), plus an ignorable unknown event.
const fixture = "testdata/spec-examples.jsonl"

func TestJSONLRoundTrip(t *testing.T) {
	want, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []testBackend{sqliteBackend(t), postgresBackend(t)} {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			s := b.open(t)
			defer func() { _ = s.Close() }()
			info, tail, err := Import(ctx, s, bytes.NewReader(want), ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if info != (SessionInfo{ID: "spec-examples", CreatedAt: 1785406800000}) {
				t.Fatalf("info = %+v", info)
			}
			// After the idle /plan and the prompt: plan mode committed at seq 8, described by the header at seq 18,
			// turn 2 step 1 open.
			wantTail := harness.Tail{NextSeq: 20, Active: true, LastPlanModeSeq: 8, Told: boolp(true), TurnOpen: true, Turn: 2, LastStepStartSeq: 15, Step: 1, StepOpen: true}
			if !reflect.DeepEqual(tail, wantTail) {
				t.Fatalf("tail = %s, want %s", fmtTail(tail), fmtTail(wantTail))
			}
			var got bytes.Buffer
			if err := Export(ctx, s, "spec-examples", &got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
				for i := range min(len(gl), len(wl)) {
					if gl[i] != wl[i] {
						t.Fatalf("export differs from the fixture at line %d:\n got %s\nwant %s", i+1, gl[i], wl[i])
					}
				}
				t.Fatalf("export has %d lines, fixture %d", len(gl), len(wl))
			}
			// Importing the same session again is refused; under another id it is accepted.
			if _, _, err := Import(ctx, s, bytes.NewReader(want), ImportOptions{}); !IsConflict(err) {
				t.Fatalf("second import: err = %v, want conflict", err)
			}
			if _, _, err := Import(ctx, s, bytes.NewReader(want), ImportOptions{SessionID: "copy"}); err != nil {
				t.Fatal(err)
			}
			// A fork's header carries parentSession and seedLength.
			if _, err := s.Fork(ctx, "spec-examples", "child", -1); err != nil {
				t.Fatal(err)
			}
			got.Reset()
			if err := Export(ctx, s, "child", &got); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(got.String(), "\n"), "\n")
			if !strings.HasPrefix(lines[0], `{"type":"session","version":0,"id":"child","createdAt":`) || !strings.HasSuffix(lines[0], `,"parentSession":"spec-examples","seedLength":7}`) {
				t.Fatalf("child header = %s", lines[0])
			}
			if len(lines) != 8 || lines[7] != strings.Split(string(want), "\n")[7] {
				t.Fatalf("child export = %q", lines)
			}
			if err := Export(ctx, s, "nobody", &got); !errors.Is(err, ErrNotFound) {
				t.Fatalf("export of an unknown session: err = %v", err)
			}
		})
	}
}

func TestJSONLImportRefusals(t *testing.T) {
	ctx := context.Background()
	s := sqliteBackend(t).open(t)
	defer func() { _ = s.Close() }()
	hdr := `{"type":"session","version":0,"id":"x","createdAt":1}` + "\n"
	ok := `{"type":"plan/mode","seq":0,"time":5,"data":{"active":true}}` + "\n"
	cases := []struct{ name, in, want string }{
		{"empty", "", "empty input"},
		{"version 1", `{"type":"session","version":1,"id":"x","createdAt":1}` + "\n" + ok, `line 1: unsupported session format version 1; only version 0 is supported`},
		{"version missing", `{"type":"session","id":"x","createdAt":1}` + "\n", `line 1: session header has no "version"`},
		{"no header", ok, `line 1: first line must be the session header`},
		{"no id", `{"type":"session","version":0,"createdAt":1}` + "\n", `line 1: session header has no "id"`},
		{"unknown type", hdr + ok + `{"type":"vendor/x","seq":1,"time":5,"data":{}}` + "\n", `line 3: unknown event type "vendor/x" at seq 1 is not marked ignorable`},
		{"ignorable false", hdr + `{"type":"vendor/x","seq":0,"time":5,"data":{},"ignorable":false}` + "\n", `line 2: vendor/x event at seq 0 has ignorable false`},
		{"unknown field", hdr + `{"type":"plan/mode","seq":0,"time":5,"data":{"active":true},"source":"me"}` + "\n", `line 2: plan/mode event has unknown envelope field "source"`},
		{"seq gap", hdr + ok + `{"type":"plan/mode","seq":2,"time":5,"data":{"active":true}}` + "\n", `line 3: plan/mode event has seq 2; expected 1`},
		{"no data", hdr + `{"type":"plan/mode","seq":0,"time":5}` + "\n", `line 2: event has no "data"`},
		{"bad plan/mode", hdr + ok + "\n" + `{"type":"plan/mode","seq":1,"time":5,"data":{"active":42}}` + "\n",
			`line 4: invalid event: session "x" seq 1 (plan/mode) field data.active: plan/mode carries invalid active state 42; expected a boolean`},
		{"packed chunks", hdr + `{"type":"text-chunks","seq0":0,"time0":5,"dt":[1,1]}` + "\n", `line 2: packed chunk row "text-chunks" is not supported`},
		{"not json", hdr + "{oops\n", "line 2: event is not a JSON object"},
	}
	for _, c := range cases {
		_, _, err := Import(ctx, s, strings.NewReader(c.in), ImportOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: err = %v, want %q", c.name, err, c.want)
		}
		if _, err := s.Info(ctx, "x"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: refused import stored the session (%v)", c.name, err)
		}
	}
	// --allow-unknown keeps an unknown type verbatim.
	in := hdr + `{"type":"vendor/x","seq":0,"time":5,"data":{"k":[1,2]}}` + "\n"
	if _, tail, err := Import(ctx, s, strings.NewReader(in), ImportOptions{AllowUnknown: true}); err != nil || tail.NextSeq != 1 {
		t.Fatalf("import with AllowUnknown: %v, %+v", err, tail)
	}
	var out bytes.Buffer
	if err := Export(ctx, s, "x", &out); err != nil || out.String() != in {
		t.Fatalf("export = %q, %v; want %q", out.String(), err, in)
	}
}
