package sessionwatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"
	"sigs.k8s.io/randfill"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

func testScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := agentsv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// served is obj as the API server serves it: with its kind, as JSON.
func served(t testing.TB, obj runtime.Object, gvk schema.GroupVersionKind) []byte {
	t.Helper()
	obj = obj.DeepCopyObject()
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// randomSessions fills AgentSessions at random, every field of the API reached, with
// apimachinery's own fuzzer functions for the metav1 types (valid times, selectors, metadata).
func randomSessions(t testing.TB, n int, seed int64) []*agentsv1alpha1.AgentSession {
	t.Helper()
	codecs := serializer.NewCodecFactory(testScheme(t))
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), codecs).NilChance(0.3).NumElements(0, 3)
	f.Funcs(func(fv *metav1.FieldsV1, c randfill.Continue) {
		fv.SetRawBytes([]byte(fmt.Sprintf(`{"f:status":{"f:planMode":{},"f:x%d":{}}}`, c.Intn(100))))
	})
	out := make([]*agentsv1alpha1.AgentSession, n)
	for i := range out {
		s := &agentsv1alpha1.AgentSession{}
		f.Fill(s)
		out[i] = s
	}
	return out
}

// clientGoDecode is how client-go and controller-runtime decode obj's JSON without conversion.
func clientGoDecode(t testing.TB, data []byte, into runtime.Object) runtime.Object {
	t.Helper()
	codecs := serializer.NewCodecFactory(testScheme(t))
	d := codecs.WithoutConversion().DecoderToVersion(mustJSON(t, codecs.WithoutConversion()).Serializer, agentsv1alpha1.GroupVersion)
	out, _, err := d.Decode(data, nil, into)
	if err != nil {
		t.Fatalf("client-go cannot decode %s: %v", data, err)
	}
	return out
}

func mustNegotiatedSerializer(t testing.TB, scheme *runtime.Scheme) *negotiatedSerializer {
	t.Helper()
	ns, err := newNegotiatedSerializer(scheme)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func mustJSON(t testing.TB, ns runtime.NegotiatedSerializer) runtime.SerializerInfo {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	return info
}

// refusingSerializer fails every call: an objectDecoder given it shows that it decoded alone.
type refusingSerializer struct{ runtime.Serializer }

func (refusingSerializer) Decode([]byte, *schema.GroupVersionKind, runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	return nil, nil, errors.New("fell back to client-go")
}

func TestTheDecoderReadsEverySessionAsClientGoDoes(t *testing.T) {
	fast := objectDecoder{Serializer: refusingSerializer{}}
	for i, s := range randomSessions(t, 500, 1) {
		data := served(t, s, agentsv1alpha1.AgentSessionKind)
		want := clientGoDecode(t, data, &agentsv1alpha1.AgentSession{})

		got, gvk, err := fast.Decode(data, nil, nil)
		if err != nil {
			t.Fatalf("session %d: %v\n%s", i, err, data)
		}
		if *gvk != agentsv1alpha1.AgentSessionKind {
			t.Fatalf("session %d: kind %v", i, gvk)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("session %d decodes otherwise than client-go's (-client-go +here):\n%s\n%s", i, cmp.Diff(want, got), data)
		}
		// Into an object that holds another session: nothing of it stays.
		into := randomSessions(t, 1, int64(i)+1000)[0]
		if _, _, err := fast.Decode(data, nil, into); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(into, want) {
			t.Fatalf("session %d decoded into a used object (-client-go +here):\n%s", i, cmp.Diff(want, into))
		}
	}
}

func TestTheEdgesOfJSONReadAsClientGoReadsThem(t *testing.T) {
	const head = `"apiVersion":"agents.harness.dev/v1alpha1","kind":"AgentSession"`
	for name, doc := range map[string]string{
		"invalid UTF-8":       "{" + head + `,"metadata":{"name":"s","annotations":{"a":"` + "\xff\xfe ok" + `"}},"spec":{"sessionID":"` + "\xc3" + `"}}`,
		"a repeated name":     `{` + head + `,"metadata":{"name":"first","name":"last"},"spec":{"sessionID":"x"}}`,
		"escapes":             `{` + head + `,"metadata":{"name":"s","labels":{"k":"\u003c\u00e9\ud83d\ude00\n\"\\/"}},"spec":{"sessionID":"\t"}}`,
		"nulls":               `{` + head + `,"metadata":{"name":"s","labels":null,"creationTimestamp":null},"spec":{"sessionID":"x","planMode":null},"status":null}`,
		"unknown fields":      `{` + head + `,"metadata":{"name":"s"},"spec":{"sessionID":"x","future":{"a":[1,2,{"b":null}]}},"extra":true}`,
		"names of other case": `{` + head + `,"metadata":{"Name":"s"},"Spec":{"sessionID":"x"},"spec":{"SessionID":"y"}}`,
		"large numbers":       `{` + head + `,"metadata":{"name":"s","generation":9223372036854775807},"spec":{"sessionID":"x"},"status":{"observedGeneration":-9223372036854775808}}`,
		"spaces":              " {\n  " + head + " ,\t\"metadata\" : { \"name\" : \"s\" } }\n",
	} {
		data := []byte(doc)
		want := clientGoDecode(t, data, &agentsv1alpha1.AgentSession{})
		got, _, err := objectDecoder{Serializer: refusingSerializer{}}.Decode(data, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s decodes otherwise than client-go's (-client-go +here):\n%s", name, cmp.Diff(want, got))
		}
	}
}

func TestTheDecoderReadsAListAsClientGoDoes(t *testing.T) {
	list := &agentsv1alpha1.AgentSessionList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next"}}
	for _, s := range randomSessions(t, 20, 2) {
		s.SetGroupVersionKind(agentsv1alpha1.AgentSessionKind) // items carry their kind in a list
		list.Items = append(list.Items, *s)
	}
	data := served(t, list, agentsv1alpha1.AgentSessionListKind)
	want := clientGoDecode(t, data, &agentsv1alpha1.AgentSessionList{})
	got := &agentsv1alpha1.AgentSessionList{Items: make([]agentsv1alpha1.AgentSession, 3)}
	if _, _, err := (objectDecoder{Serializer: refusingSerializer{}}).Decode(data, nil, got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the list decodes otherwise than client-go's (-client-go +here):\n%s", cmp.Diff(want, got))
	}
}

func TestWhatIsNotASessionIsClientGosToDecode(t *testing.T) {
	ns := mustNegotiatedSerializer(t, testScheme(t))
	d := mustJSON(t, ns).Serializer
	status := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 1 (2)"}
	data := served(t, status, metav1.SchemeGroupVersion.WithKind("Status"))
	got, _, err := d.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := got.(*metav1.Status); !ok || st.Code != 410 || st.Reason != metav1.StatusReasonExpired || st.Kind != "" {
		t.Fatalf("a Status decodes as %#v", got)
	}
	// An answer that is not JSON: client-go's error, as from any client.
	if _, _, err := d.Decode([]byte("<html>"), nil, &agentsv1alpha1.AgentSession{}); err == nil {
		t.Fatal("no error for an answer that is not JSON")
	}
	// A session whose field has the wrong type: client-go's decoder names it.
	_, _, err = d.Decode([]byte(`{"apiVersion":"agents.harness.dev/v1alpha1","kind":"AgentSession","spec":{"sessionID":7}}`), nil, &agentsv1alpha1.AgentSession{})
	if err == nil || !strings.Contains(err.Error(), "sessionID") {
		t.Fatalf("a wrong type reads %v", err)
	}
}

// watchStream is events as the API server writes a watch: one JSON value per line.
func watchStream(t testing.TB, events []watch.Event) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, e := range events {
		var gvk schema.GroupVersionKind
		switch e.Object.(type) {
		case *metav1.Status:
			gvk = metav1.SchemeGroupVersion.WithKind("Status")
		default:
			gvk = agentsv1alpha1.AgentSessionKind
		}
		ev, err := json.Marshal(metav1.WatchEvent{Type: string(e.Type), Object: runtime.RawExtension{Raw: served(t, e.Object, gvk)}})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(ev)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// decodeWatch reads stream as client-go's REST client reads a watch with ns.
func decodeWatch(t testing.TB, ns runtime.NegotiatedSerializer, stream []byte) ([]watch.Event, error) {
	t.Helper()
	objectDecoder, streamingSerializer, framer, err := runtime.NewClientNegotiator(ns, agentsv1alpha1.GroupVersion).StreamDecoder(runtime.ContentTypeJSON, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream))), streamingSerializer), objectDecoder)
	var out []watch.Event
	for {
		typ, obj, err := d.Decode()
		if err != nil {
			return out, err
		}
		out = append(out, watch.Event{Type: typ, Object: obj})
	}
}

func TestAWatchReadsAsClientGoReadsIt(t *testing.T) {
	scheme := testScheme(t)
	sessions := randomSessions(t, 40, 3)
	big := sessions[0].DeepCopy()
	big.Status.Agent = &agentsv1alpha1.AgentReport{Review: &agentsv1alpha1.PlanReviewRequest{ID: "r1", Plan: strings.Repeat("a plan longer than any buffer\n", 4000)}}
	events := make([]watch.Event, 0, len(sessions)+3)
	events = append(events, watch.Event{Type: watch.Added, Object: big})
	types := []watch.EventType{watch.Added, watch.Modified, watch.Deleted}
	for i, s := range sessions {
		events = append(events, watch.Event{Type: types[i%3], Object: s})
	}
	bookmark := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "99", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	events = append(events, watch.Event{Type: watch.Bookmark, Object: bookmark})
	events = append(events, watch.Event{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}})
	stream := watchStream(t, events)

	codecs := serializer.NewCodecFactory(scheme)
	want, wantErr := decodeWatch(t, serializer.WithoutConversionCodecFactory{CodecFactory: codecs}, stream)
	got, gotErr := decodeWatch(t, mustNegotiatedSerializer(t, scheme), stream)
	if !errors.Is(wantErr, io.EOF) || !errors.Is(gotErr, io.EOF) {
		t.Fatalf("the stream ends with %v here and %v in client-go", gotErr, wantErr)
	}
	if len(got) != len(events) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%d events read, %d written; (-client-go +here):\n%s", len(got), len(events), cmp.Diff(want, got))
	}
}

func TestAWatchCutShortEndsAsClientGosDoes(t *testing.T) {
	scheme := testScheme(t)
	stream := watchStream(t, []watch.Event{{Type: watch.Added, Object: randomSessions(t, 1, 4)[0]}})
	clientGo := serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)}
	for _, cut := range []int{len(stream) / 2, 5} {
		_, wantErr := decodeWatch(t, clientGo, stream[:cut])
		_, gotErr := decodeWatch(t, mustNegotiatedSerializer(t, scheme), stream[:cut])
		if gotErr != io.ErrUnexpectedEOF || wantErr != gotErr {
			t.Fatalf("a stream cut at %d of %d bytes ends with %v here, %v in client-go (the watcher tells io.ErrUnexpectedEOF by identity)", cut, len(stream), gotErr, wantErr)
		}
	}
	_, wantErr := decodeWatch(t, clientGo, nil)
	got, err := decodeWatch(t, mustNegotiatedSerializer(t, scheme), nil)
	if err != io.EOF || wantErr != io.EOF || len(got) != 0 {
		t.Fatalf("an empty stream reads %d events and ends with %v here, %v in client-go", len(got), err, wantErr)
	}
	// Not JSON at all: an error that is neither end.
	if _, err := decodeWatch(t, mustNegotiatedSerializer(t, scheme), []byte("<html>\n")); err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a stream that is not JSON ends with %v", err)
	}
}

func TestAWatchEventNotAsTheAPIServerWritesItIsClientGosToRead(t *testing.T) {
	obj := served(t, randomSessions(t, 1, 5)[0], agentsv1alpha1.AgentSessionKind)
	for _, frame := range []string{
		`{"object":` + string(obj) + `,"type":"MODIFIED"}`,
		`{ "type" : "MODIFIED", "object" : ` + string(obj) + ` }`,
		`{"type":"MODI\u0046IED","object":` + string(obj) + `}`,
		`{"type":"MODIFIED","object":` + string(obj) + `,"extra":{"a":"}"}}`,
		`{"type":"MODIFIED","object":` + string(obj) + `,"extra":[1]}`,
	} {
		got, gotErr := decodeWatch(t, mustNegotiatedSerializer(t, testScheme(t)), []byte(frame))
		if !errors.Is(gotErr, io.EOF) || len(got) != 1 || got[0].Type != watch.Modified {
			t.Fatalf("%.60s...: %v, %d events", frame, gotErr, len(got))
		}
		if s, ok := got[0].Object.(*agentsv1alpha1.AgentSession); !ok || s.Name == "" && s.ResourceVersion == "" {
			t.Fatalf("%.60s...: the object reads %#v", frame, got[0].Object)
		}
	}
}

// BenchmarkWatchDecode reads a watch of 1,000 sessions of the boundary storm's shape, as the
// manager's cache reads its first list at a restart, with each decoder.
func BenchmarkWatchDecode(b *testing.B) {
	// A session as served after the boundary storm of make bench-scale.
	stormSession, err := os.ReadFile(filepath.Join("testdata", "storm-session.json"))
	if err != nil {
		b.Fatal(err)
	}
	s := &agentsv1alpha1.AgentSession{}
	if err := json.Unmarshal(stormSession, s); err != nil {
		b.Fatal(err)
	}
	events := make([]watch.Event, 1000)
	for i := range events {
		events[i] = watch.Event{Type: watch.Added, Object: s}
	}
	stream := watchStream(b, events)
	scheme := testScheme(b)
	for _, d := range []struct {
		name string
		ns   runtime.NegotiatedSerializer
	}{
		{"client-go", serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)}},
		{"jsonv2", mustNegotiatedSerializer(b, scheme)},
	} {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				got, err := decodeWatch(b, d.ns, stream)
				if err != io.EOF || len(got) != len(events) {
					b.Fatalf("%d events, %v", len(got), err)
				}
			}
		})
	}
}

func TestOneObjectEndsWhereItsBraceCloses(t *testing.T) {
	for in, want := range map[string]bool{
		`{}`:                       true,
		`{"a":"}"}`:                true,
		`{"a":"\"}"}`:              true,
		`{"a":"\\"}`:               true,
		`{"a":["}",{"b":"]"}]}`:    true,
		`{"a":1},"b":2`:            false,
		`{"a":"\\"},"b":{"c":"}"}`: false,
		`{"a":1}}`:                 false,
		`[{"a":1}]`:                false,
		``:                         false,
	} {
		if got := oneObject([]byte(in)); got != want {
			t.Errorf("oneObject(%s) = %v, want %v", in, got, want)
		}
	}
}
