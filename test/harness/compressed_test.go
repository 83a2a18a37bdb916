package harness_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// zstdFrameMagic opens every zstd frame.
var zstdFrameMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// storageRow is one row of a decompressed harness log: an event ({type, seq, time, data,
// ...}) or a packed run of assistant/chunk deltas ({type, seq0, time0, data}).
type storageRow struct {
	Type  string          `json:"type"`
	Seq   *int64          `json:"seq"`
	Seq0  *int64          `json:"seq0"`
	Time0 int64           `json:"time0"`
	Data  json.RawMessage `json:"data"`
}

// packedRowData is the data of a packed row: {turn, step, index, dt, texts}, or for
// tool-call-chunks {turn, step, index, id, name?, dt, args}.
type packedRowData struct {
	Turn  int64    `json:"turn"`
	Step  int64    `json:"step"`
	Index int64    `json:"index"`
	ID    string   `json:"id"`
	Dt    []int64  `json:"dt"`
	Texts []string `json:"texts"`
	Args  []string `json:"args"`
}

// chunkDelta is the data of an assistant/chunk delta event.
type chunkDelta struct {
	Turn  int64 `json:"turn"`
	Step  int64 `json:"step"`
	Chunk struct {
		Type           string  `json:"type"`
		Index          int64   `json:"index"`
		Text           *string `json:"text"`
		ID             string  `json:"id"`
		ArgumentsDelta *string `json:"argumentsDelta"`
	} `json:"chunk"`
}

// checkStorageRows holds the operator's export of a compressed log to the harness's own
// storage rows (the log decompressed, nothing re-encoded): the header line comes back byte
// for byte; each row that is one event comes back byte for byte at its seq; each packed row
// comes back as its members, one assistant/chunk delta per member from seq0 on, at time0 plus
// the row's dt, with the row's turn, step, index (and call id) and the member as its text or
// arguments delta; and the rows cover every seq of the export exactly once. It returns the
// number of zstd frames and packed rows.
func checkStorageRows(t *testing.T, l *liveLog, export []byte) (frames, packed int) {
	t.Helper()
	frames = bytes.Count(l.Raw, zstdFrameMagic)
	rows := bytes.Split(bytes.TrimSuffix(l.Plain, []byte("\n")), []byte("\n"))
	lines := bytes.Split(bytes.TrimSuffix(export, []byte("\n")), []byte("\n"))
	if !bytes.Equal(rows[0], lines[0]) {
		t.Errorf("export header:\n got %s\nwant %s", lines[0], rows[0])
	}
	evs := parseEvents(t, export)
	covered := make([]int, len(evs))
	for i, line := range rows[1:] {
		var r storageRow
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%s row %d: %v", l.File, i+2, err)
		}
		switch {
		case r.Seq != nil:
			if s := *r.Seq; s < 0 || s >= int64(len(evs)) {
				t.Errorf("%s row %d: seq %d outside the export's %d events", l.File, i+2, s, len(evs))
			} else {
				covered[s]++
				if !bytes.Equal(lines[s+1], line) {
					t.Errorf("seq %d: the export differs from the harness's row:\n got %s\nwant %s", s, lines[s+1], line)
				}
			}
		case r.Seq0 != nil:
			packed++
			var pd packedRowData
			if err := json.Unmarshal(r.Data, &pd); err != nil {
				t.Fatalf("%s row %d: %v", l.File, i+2, err)
			}
			members, want := pd.Texts, "text-delta"
			if r.Type == "tool-call-chunks" {
				members, want = pd.Args, "tool-call-delta"
			} else if r.Type != "text-chunks" {
				t.Fatalf("%s row %d: packed row type %s, which no scenario's model streams", l.File, i+2, r.Type)
			}
			tm := r.Time0
			for k, m := range members {
				s := *r.Seq0 + int64(k)
				if k > 0 {
					tm += pd.Dt[k-1]
				}
				if s >= int64(len(evs)) {
					t.Errorf("%s row %d: member %d at seq %d is past the export", l.File, i+2, k, s)
					break
				}
				covered[s]++
				ev := evs[s]
				var d chunkDelta
				_ = ev.Decode(&d)
				got := d.Chunk.Text
				if want == "tool-call-delta" {
					got = d.Chunk.ArgumentsDelta
				}
				if ev.Type != harness.TypeAssistantChunk || ev.Time != tm || d.Turn != pd.Turn || d.Step != pd.Step ||
					d.Chunk.Type != want || d.Chunk.Index != pd.Index || d.Chunk.ID != pd.ID || got == nil || *got != m {
					t.Errorf("seq %d: the export has %s, the harness's %s row packs member %d %q at time %d", s, lines[s+1], r.Type, k, m, tm)
				}
			}
		default:
			t.Errorf("%s row %d: neither an event nor a packed row: %s", l.File, i+2, line)
		}
	}
	for s, n := range covered {
		if n != 1 {
			t.Errorf("seq %d: %d of the harness's storage rows hold it; want 1", s, n)
		}
	}
	return frames, packed
}

// streamsChunkRun reports whether the scenario's model streams a run of three or more deltas
// in one block: the scripted model streams a text word by word, and the harness packs a run
// of three or more assistant/chunk deltas into one storage row.
func streamsChunkRun(sc scenario) bool {
	for _, r := range sc.Model {
		deltas := 0
		for _, word := range strings.SplitAfter(r.Text, " ") { // as scriptedModel streams it
			if word != "" {
				deltas++
			}
		}
		if deltas >= 3 {
			return true
		}
	}
	return false
}
