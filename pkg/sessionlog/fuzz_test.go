package sessionlog

// Fuzz targets for the session log's bad-input paths: the stored-row decoder and event
// validation, Append's all-or-nothing refusal, and JSONL import. Run one for a while with
//
//	go test ./pkg/sessionlog -run '^$' -fuzz FuzzImportJSONL -fuzztime 60s
//
// Without -fuzz the seed corpus runs as ordinary tests.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/connstr"
	"github.com/harness-dev/planmode-operator/pkg/connstr/connstrtest"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// fuzzStore opens one SQLite store per fuzz worker process.
func fuzzStore(f *testing.F) Store {
	f.Helper()
	s, err := OpenSQLite(context.Background(), filepath.Join(f.TempDir(), "fuzz.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Close() })
	return s
}

var fuzzSession atomic.Int64

func nextFuzzSession() string { return fmt.Sprintf("fz-%d-%d", os.Getpid(), fuzzSession.Add(1)) }

// FuzzDecodeStoredRow feeds arbitrary stored rows to the decoder both backends use. A row is
// either refused as corrupt (naming the session and seq) or yields an event that validates,
// folds, and survives a JSONL line round trip.
func FuzzDecodeStoredRow(f *testing.F) {
	f.Add(int64(0), "plan/mode", int64(1), []byte(`{"active":true}`), false, "", false, "", false)
	f.Add(int64(3), "plan/mode", int64(1), []byte(`{"active":"yes"}`), false, "", false, "", false)
	f.Add(int64(1), "turn/start", int64(1), []byte(`{"turn":-1}`), false, "", false, "", false)
	f.Add(int64(2), "user/message", int64(5), []byte(`{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"m"}`), false, "", false, `"append"`, true)
	f.Add(int64(2), "user/message", int64(5), []byte(`{"content":[],"source":{"kind":"user"},"role":"user","id":"m"}`), false, "[1,2]", true, `{"op":"replace","start":0,"end":1}`, true)
	f.Add(int64(9), "tool/x", int64(5), []byte(`{"a":-0}`), true, "[1,", true, `"prepend"`, true)
	f.Add(int64(-1), "", int64(-5), []byte("\xff\xfe"), false, "", false, "", false)
	f.Add(int64(4), "step/end", int64(1), []byte(`{"turn":1,"step":9223372036854775808}`), false, "", false, "", false)
	f.Fuzz(func(t *testing.T, seq int64, typ string, tm int64, data []byte, ignorable bool, seqs string, hasSeqs bool, surfaceOp string, hasSurface bool) {
		row := rawRow{seq: seq, typ: typ, time: tm, data: data, ignorable: ignorable}
		if hasSeqs {
			row.seqs = &seqs
		}
		if hasSurface {
			row.surfaceOp = &surfaceOp
		}
		ev, err := row.event("fuzz")
		if err != nil {
			var c *CorruptError
			if !errors.As(err, &c) || c.SessionID != "fuzz" || c.Seq != seq || c.Reason == "" {
				t.Fatalf("refusal is not a CorruptError naming session and seq: %#v", err)
			}
			return
		}
		if _, verr := check("fuzz", &ev); verr != nil {
			t.Fatalf("decoded event does not validate: %v", verr)
		}
		if seq == 0 {
			if _, err := harness.FoldTail([]harness.Event{ev}); err != nil {
				t.Fatalf("FoldTail of a valid event: %v", err)
			}
		}
		line := AppendJSONL(nil, &ev)
		if !json.Valid(bytes.TrimSpace(line)) {
			t.Fatalf("exported line is not JSON: %q", line)
		}
	})
}

// FuzzAppendValidation appends one arbitrary event to a fresh session: either it is stored and
// reads back equal (data compacted), or it is refused with a ValidationError and nothing is
// stored (the tail stays empty, the session has no header).
func FuzzAppendValidation(f *testing.F) {
	s := fuzzStore(f)
	f.Add("plan/mode", []byte(`{"active":false}`), "", int64(0))
	f.Add("plan/mode", []byte(`{"active":1}`), "", int64(0))
	f.Add("plan/mode", []byte(`{"active":true,"by":"x"}`), "", int64(0))
	f.Add("request/header", []byte(`{"header":[],"reason":"initial"}`), "", int64(0))
	f.Add("user/message", []byte(`{"content":[{"type":"text","text":"x"}],"source":{"kind":""},"role":"user","id":"1"}`), `"append"`, int64(0))
	f.Add("step/start", []byte(`{"turn":1,"step":1e3}`), "", int64(0))
	f.Add("command/done", []byte(`{"commandId":"c","kind":"success","sourceEventSeq":-1}`), "", int64(0))
	f.Add("x/y", []byte(`{"n":-0.0e1}`), "", int64(0))
	f.Add("turn/start", []byte(`{"turn":1}`), "", int64(7))
	f.Add("session", []byte(`{}`), "", int64(0))
	f.Fuzz(func(t *testing.T, typ string, data []byte, surfaceOp string, seq int64) {
		ctx := context.Background()
		id := nextFuzzSession()
		ev := harness.Event{Type: typ, Seq: seq, Time: 1785406800000, Data: data}
		if surfaceOp != "" {
			ev.SurfaceOp = json.RawMessage(surfaceOp)
		}
		tail, err := s.Append(ctx, id, []harness.Event{ev})
		if err != nil {
			if !IsInvalid(err) && !IsConflict(err) {
				t.Fatalf("refusal is neither a ValidationError nor a ConflictError: %v", err)
			}
			if IsConflict(err) && seq == 0 {
				t.Fatalf("conflict for an append at seq 0 of a new session: %v", err)
			}
			got, terr := s.Tail(ctx, id)
			if terr != nil || got.NextSeq != 0 {
				t.Fatalf("refused append left a tail %+v (%v)", got, terr)
			}
			if evs, rerr := s.ReadFrom(ctx, id, 0, 0); rerr != nil || len(evs) != 0 {
				t.Fatalf("refused append left events %v (%v)", evs, rerr)
			}
			return
		}
		if seq != 0 || tail.NextSeq != 1 {
			t.Fatalf("append at seq %d accepted with tail %+v", seq, tail)
		}
		evs, err := s.ReadFrom(ctx, id, 0, 0)
		if err != nil || len(evs) != 1 {
			t.Fatalf("read back: %v %v", evs, err)
		}
		var want bytes.Buffer
		_ = json.Compact(&want, data)
		if evs[0].Type != typ || !bytes.Equal(evs[0].Data, want.Bytes()) {
			t.Fatalf("read back %s %s, appended %s %s", evs[0].Type, evs[0].Data, typ, want.Bytes())
		}
		if ft, err := harness.FoldTail(evs); err != nil || !tailsEqual(ft, tail) {
			t.Fatalf("fold %+v (%v) differs from the stored tail %+v", ft, err, tail)
		}
	})
}

func tailsEqual(a, b harness.Tail) bool {
	if (a.LastShown == nil) != (b.LastShown == nil) || (a.LastShown != nil && *a.LastShown != *b.LastShown) {
		return false
	}
	a.LastShown, b.LastShown = nil, nil
	return a == b
}

// FuzzImportJSONL imports arbitrary JSONL. Invalid input is refused with nothing stored;
// accepted input exports back to JSONL that imports again to the same events.
func FuzzImportJSONL(f *testing.F) {
	s := fuzzStore(f)
	if b, err := os.ReadFile("testdata/spec-examples.jsonl"); err == nil {
		f.Add(b)
		lines := strings.SplitAfter(string(b), "\n")
		f.Add([]byte(strings.Join(lines[:6], "")))
		f.Add([]byte(lines[0] + lines[2])) // a seq gap
	}
	hdr := `{"type":"session","version":0,"id":"x","createdAt":1}` + "\n"
	for _, body := range []string{
		"",
		`{"type":"plan/mode","seq":0,"time":1,"data":{"active":true}}`,
		`{"type":"plan/mode","seq":0,"time":1,"data":{"active":null}}`,
		`{"type":"plan/mode","seq":1,"time":1,"data":{"active":true}}`,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"extra":1}`,
		`{"type":"text-chunks","seq0":0}`,
		`{"type":"future/type","seq":0,"time":1,"data":{}}`,
		`{"type":"future/type","seq":0,"time":1,"data":{},"ignorable":true}`,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}` + "\n" + `{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
		`{"type":"user/message","seq":0,"time":1,"data":{"content":"x","source":{"kind":"user"},"role":"user","id":"1"},"sourceEventSeqs":[],"surfaceOp":"append"}`,
		`not json`,
	} {
		f.Add([]byte(hdr + body))
	}
	f.Add([]byte(`{"type":"session","version":1,"id":"x","createdAt":1}`))
	f.Add([]byte(`{"type":"session","version":0,"createdAt":1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		ctx := context.Background()
		id := nextFuzzSession()
		info, tail, err := Import(ctx, s, bytes.NewReader(in), ImportOptions{SessionID: id})
		if err != nil {
			if _, ierr := s.Info(ctx, id); !errors.Is(ierr, ErrNotFound) {
				t.Fatalf("refused import (%v) left a session header (%v)", err, ierr)
			}
			if got, _ := s.Tail(ctx, id); got.NextSeq != 0 {
				t.Fatalf("refused import (%v) left a tail %+v", err, got)
			}
			if err.Error() == "" {
				t.Fatal("refusal without a message")
			}
			return
		}
		if info.ID != id {
			t.Fatalf("imported as %q, asked for %q", info.ID, id)
		}
		var out bytes.Buffer
		if err := Export(ctx, s, id, &out); err != nil {
			t.Fatalf("export of an imported session: %v", err)
		}
		id2 := nextFuzzSession()
		_, tail2, err := Import(ctx, s, bytes.NewReader(out.Bytes()), ImportOptions{SessionID: id2})
		if err != nil {
			t.Fatalf("re-import of the export failed: %v\n%s", err, out.Bytes())
		}
		if !tailsEqual(tail, tail2) {
			t.Fatalf("re-import tail %+v differs from %+v", tail2, tail)
		}
		a, _ := s.ReadFrom(ctx, id, 0, 0)
		b, _ := s.ReadFrom(ctx, id2, 0, 0)
		if len(a) != len(b) {
			t.Fatalf("re-import has %d events, want %d", len(b), len(a))
		}
		for i := range a {
			if !bytes.Equal(AppendJSONL(nil, &a[i]), AppendJSONL(nil, &b[i])) {
				t.Fatalf("event %d differs after the round trip:\n%s%s", i, AppendJSONL(nil, &a[i]), AppendJSONL(nil, &b[i]))
			}
		}
	})
}

// FuzzOpenKeepsThePasswordSecret: whatever the password and however the connection string is
// written (connstrtest.Forms: URLs raw, escaped, in the query, multi-host; key=value quoted
// and not), opening the store (nothing listens at 127.0.0.1:1) fails with an error, read-write
// and read-only, that shows no part of it, and so does the string as every binary logs it
// (connstr.Redact).
func FuzzOpenKeepsThePasswordSecret(f *testing.F) {
	for _, c := range connstrtest.Cores {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, core string) {
		if strings.IndexByte(core, 0) >= 0 {
			return
		}
		pw := connstrtest.Password(core)
		ctx := context.Background()
		for _, form := range connstrtest.Forms {
			conn := form.Build(pw)
			outs := []string{connstr.Redact(conn)}
			for name, open := range map[string]func() (Store, error){
				"Open":         func() (Store, error) { return Open(ctx, conn, CallTimeout(2*time.Second)) },
				"OpenReadOnly": func() (Store, error) { return OpenReadOnly(ctx, conn) },
			} {
				s, err := open()
				if err == nil {
					_ = s.Close()
					t.Fatalf("form %s: %s(%s) succeeded with nothing listening", form.Name, name, connstr.Redact(conn))
				}
				outs = append(outs, err.Error())
			}
			for _, out := range outs {
				if connstrtest.Leaks(out) {
					t.Fatalf("form %s, password %q: %q shows part of it", form.Name, pw, out)
				}
			}
		}
	})
}
