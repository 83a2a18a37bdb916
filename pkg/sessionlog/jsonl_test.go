package sessionlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

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
			wantTail := harness.Tail{NextSeq: 20, Active: true, LastPlanModeSeq: 8, LastShown: boolp(true), TurnOpen: true, Turn: 2, LastStepStartSeq: 15, Step: 1, StepOpen: true}
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
			if _, err := s.ClaimOwner(ctx, "spec-examples", Owner{Namespace: "a", Name: "spec", UID: "u"}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Fork(ctx, "spec-examples", "child", -1, Owner{Namespace: "a", Name: "child", UID: "u2"}); err != nil {
				t.Fatal(err)
			}
			got.Reset()
			if err := Export(ctx, s, "child", &got); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(got.String(), "\n"), "\n")
			if !strings.HasPrefix(lines[0], `{"type":"session","version":0,"id":"child","createdAt":`) ||
				!strings.HasSuffix(lines[0], `,"parentSession":"spec-examples","seedLength":7,"delegationDepth":0}`) {
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
		{"ignorable false", hdr + `{"type":"vendor/x","seq":0,"time":5,"data":{},"ignorable":false}` + "\n", `line 2: vendor/x event at seq 0 has ignorable false`},
		{"unknown field", hdr + `{"type":"plan/mode","seq":0,"time":5,"data":{"active":true},"source":"me"}` + "\n", `line 2: plan/mode event has unknown envelope field "source"`},
		{"seq gap", hdr + ok + `{"type":"plan/mode","seq":2,"time":5,"data":{"active":true}}` + "\n", `line 3: plan/mode event has seq 2; expected 1`},
		{"no data", hdr + `{"type":"plan/mode","seq":0,"time":5}` + "\n", `line 2: event has no "data"`},
		{"bad plan/mode", hdr + ok + "\n" + `{"type":"plan/mode","seq":1,"time":5,"data":{"active":42}}` + "\n",
			`line 4: invalid event: session "x" seq 1 (plan/mode) field data.active: plan/mode carries invalid active state 42; expected a boolean`},
		{"packed row without data", hdr + `{"type":"text-chunks","seq0":0,"time0":5,"dt":[1,1]}` + "\n",
			`line 2: malformed text-chunks storage row: envelope must be exactly {type, seq0, time0, data}: "data" is missing`},
		{"packed row dt", hdr + `{"type":"text-chunks","seq0":0,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b","c"]}}` + "\n",
			`line 2: malformed text-chunks storage row: dt length 1 does not match 3 members`},
		{"packed row seq", hdr + ok + `{"type":"text-chunks","seq0":3,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}` + "\n",
			`line 3: text-chunks storage row starts at seq 3; expected 1`},
		{"packed row field", hdr + `{"type":"tool-call-chunks","seq0":0,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"args":["a","b","c"]}}` + "\n",
			`line 2: malformed tool-call-chunks storage row: data must be exactly`},
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
	// An event type this package does not know, even one the published harness does not
	// declare and that is not marked ignorable, is kept verbatim: a newer harness's log
	// imports and exports unchanged.
	in := `{"type":"session","version":0,"id":"x","createdAt":1,"delegationDepth":0}` + "\n" +
		`{"type":"vendor/x","seq":0,"time":5,"data":{"k":[1,2],"s":"<\u2028>"}}` + "\n" +
		`{"type":"vendor/y","seq":1,"time":6,"data":{"b":"\u001f"},"ignorable":true}` + "\n"
	if _, tail, err := Import(ctx, s, strings.NewReader(in), ImportOptions{}); err != nil || tail.NextSeq != 2 {
		t.Fatalf("import of unknown types: %v, %+v", err, tail)
	}
	var out bytes.Buffer
	if err := Export(ctx, s, "x", &out); err != nil || out.String() != in {
		t.Fatalf("export = %q, %v; want %q", out.String(), err, in)
	}
}

// Logs the real harness (dsh 0.1.0-rc.8) wrote in test/harness's scenario A: plain JSONL, and
// its default encoding (zstd, one frame per flushed batch, chunk runs packed into rows).
const (
	realPlainLog = "testdata/harness/A_idle_review_approve.jsonl"
	realZstdLog  = "testdata/harness/A_idle_review_approve.jsonl.zstd"
)

func TestImportRealHarnessLogs(t *testing.T) {
	ctx := context.Background()
	s := sqliteBackend(t).open(t)
	defer func() { _ = s.Close() }()
	plain, err := os.ReadFile(realPlainLog)
	if err != nil {
		t.Fatal(err)
	}
	var hdr Header
	if err := json.Unmarshal(plain[:bytes.IndexByte(plain, '\n')], &hdr); err != nil {
		t.Fatal(err)
	}
	// Plain: imported without options (its permission/preset, sandbox/mode, approval/policy
	// and every other type kept), exported byte for byte given the header's cwd.
	info, tail, err := Import(ctx, s, bytes.NewReader(plain), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lines := int64(bytes.Count(plain, []byte("\n"))) - 1; tail.NextSeq != lines {
		t.Fatalf("imported %d events, the log has %d", tail.NextSeq, lines)
	}
	var out bytes.Buffer
	if err := ExportJSONL(ctx, s, info.ID, &out, ExportOptions{Cwd: hdr.Cwd}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), plain) {
		t.Fatalf("export differs from the harness's log:\n%s", firstLineDiff(out.String(), string(plain)))
	}

	// The same log cut into several zstd frames imports to the same events.
	var framed bytes.Buffer
	lines := bytes.SplitAfter(plain, []byte("\n"))
	for i := 0; i < len(lines); i += 10 {
		enc, err := zstd.NewWriter(&framed)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = enc.Write(bytes.Join(lines[i:min(i+10, len(lines))], nil))
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
	}
	info2, _, err := Import(ctx, s, &framed, ImportOptions{SessionID: "framed"})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := ExportJSONL(ctx, s, info2.ID, &out, ExportOptions{Cwd: hdr.Cwd}); err != nil {
		t.Fatal(err)
	}
	if want := bytes.Replace(plain, []byte(`"id":"`+info.ID+`"`), []byte(`"id":"framed"`), 1); !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("export of the multi-frame import differs:\n%s", firstLineDiff(out.String(), string(want)))
	}

	// The harness's default encoding: zstd frames with packed chunk rows, expanded on import.
	z, err := os.ReadFile(realZstdLog)
	if err != nil {
		t.Fatal(err)
	}
	info3, tail3, err := Import(ctx, s, bytes.NewReader(z), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.ReadFrom(ctx, info3.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	for i, ev := range evs {
		if ev.Seq != int64(i) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
		if ev.Type == harness.TypeAssistantChunk {
			chunks++
		}
	}
	if chunks == 0 || tail3.TurnOpen || tail3.Active || tail3.LastShown == nil || *tail3.LastShown {
		t.Fatalf("zstd import: %d assistant/chunk events, tail %s", chunks, fmtTail(tail3))
	}
}

func TestExpandChunkRows(t *testing.T) {
	ctx := context.Background()
	s := sqliteBackend(t).open(t)
	defer func() { _ = s.Close() }()
	in := `{"type":"session","version":0,"id":"rows","createdAt":1,"delegationDepth":0}` + "\n" +
		`{"type":"text-chunks","seq0":0,"time0":100,"data":{"turn":1,"step":2,"index":0,"dt":[2,3],"texts":["a \"q\"","b\n\u001f","c` + "\u2028" + `"]}}` + "\n" +
		`{"type":"tool-call-chunks","seq0":3,"time0":200,"data":{"turn":1,"step":2,"index":1,"id":"call_1","name":"read","dt":[0,1],"args":["{","\"x\"",":1}"]}}` + "\n" +
		`{"type":"reasoning-chunks","seq0":6,"time0":300,"data":{"turn":1,"step":2,"index":2,"dt":[0,0],"texts":["t","u","v"]}}` + "\n"
	want := `{"type":"session","version":0,"id":"rows","createdAt":1,"delegationDepth":0}` + "\n" +
		`{"type":"assistant/chunk","seq":0,"time":100,"data":{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"a \"q\""}}}` + "\n" +
		`{"type":"assistant/chunk","seq":1,"time":102,"data":{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"b\n\u001f"}}}` + "\n" +
		`{"type":"assistant/chunk","seq":2,"time":105,"data":{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"c` + "\u2028" + `"}}}` + "\n" +
		`{"type":"assistant/chunk","seq":3,"time":200,"data":{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":1,"id":"call_1","name":"read","argumentsDelta":"{"}}}` + "\n" +
		`{"type":"assistant/chunk","seq":4,"time":200,"data":{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":1,"id":"call_1","name":"read","argumentsDelta":"\"x\""}}}` + "\n" +
		`{"type":"assistant/chunk","seq":5,"time":201,"data":{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":1,"id":"call_1","name":"read","argumentsDelta":":1}"}}}` + "\n" +
		`{"type":"assistant/chunk","seq":6,"time":300,"data":{"turn":1,"step":2,"chunk":{"type":"reasoning-delta","index":2,"text":"t"}}}` + "\n" +
		`{"type":"assistant/chunk","seq":7,"time":300,"data":{"turn":1,"step":2,"chunk":{"type":"reasoning-delta","index":2,"text":"u"}}}` + "\n" +
		`{"type":"assistant/chunk","seq":8,"time":300,"data":{"turn":1,"step":2,"chunk":{"type":"reasoning-delta","index":2,"text":"v"}}}` + "\n"
	if _, _, err := Import(ctx, s, strings.NewReader(in), ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Export(ctx, s, "rows", &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Fatalf("expanded rows:\n%s", firstLineDiff(out.String(), want))
	}
}

func firstLineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n got %s\nwant %s", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("got %d lines, want %d", len(g), len(w))
}
