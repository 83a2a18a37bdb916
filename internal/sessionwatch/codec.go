// Package sessionwatch lists and watches AgentSessions for the manager's cache, decoding each
// object in one pass of encoding/json/v2 (github.com/go-json-experiment/json, the proposal Go
// ships as encoding/json/v2).
//
// client-go's JSON path reads every watched object several times over: the frame reader scans
// it, the watch event is scanned to find its kind and again to decode it, the object is scanned
// to find its kind, then validated and decoded by a reflection decoder that scans each value it
// skips. That was the largest part of the manager's CPU at a restart, and the manager's objects
// are larger than a minimal controller's (docs/performance.md). Here the frame reader validates
// each frame once, the watch event's type and object are sliced from it, and the object is
// decoded in one pass. Anything else (a Status in an error event or an error answer, an object
// that is not an AgentSession, a frame not as the API server writes it) goes to client-go's
// decoder, so errors read as they do from any client. --session-decoder=client-go puts
// client-go's path back.
package sessionwatch

import (
	"bytes"
	"errors"
	"io"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// decodeOptions are client-go's JSON decoding rules where encoding/json/v2 differs by default:
// names match case-sensitively (v2's default, as in sigs.k8s.io/json), a repeated name takes the
// last value, and invalid UTF-8 reads as U+FFFD rather than failing the object.
var decodeOptions = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// negotiatedSerializer serves JSON only: the REST client asks for it (rest.Config.ContentType),
// and a CRD's API serves no protobuf.
type negotiatedSerializer struct {
	fallback runtime.NegotiatedSerializer // client-go's, without conversion
	info     runtime.SerializerInfo
}

// newNegotiatedSerializer is the serializer of a REST client of AgentSessions.
func newNegotiatedSerializer(scheme *runtime.Scheme) (*negotiatedSerializer, error) {
	fallback := serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)}
	json, ok := runtime.SerializerInfoForMediaType(fallback.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok || json.StreamSerializer == nil {
		return nil, errors.New("client-go's codec factory serves no JSON stream")
	}
	info := json
	info.Serializer = objectDecoder{Serializer: json.Serializer}
	info.StreamSerializer = &runtime.StreamSerializerInfo{
		EncodesAsText: true,
		Serializer:    watchEventDecoder{Serializer: json.StreamSerializer.Serializer},
		Framer:        framer{},
	}
	return &negotiatedSerializer{fallback: fallback, info: info}, nil
}

func (n *negotiatedSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{n.info}
}

func (n *negotiatedSerializer) EncoderForVersion(e runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return n.fallback.EncoderForVersion(e, gv)
}

// DecoderToVersion returns d as it is: without conversion, as controller-runtime's clients decode.
func (n *negotiatedSerializer) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}

// objectDecoder decodes AgentSessions and AgentSessionLists in one pass, and hands anything else
// to client-go's JSON serializer. Like controller-runtime's decoder it zeroes the object it
// decodes into, and like any decoder without conversion it clears the decoded object's kind.
type objectDecoder struct {
	runtime.Serializer // client-go's: it encodes, and decodes what this one does not
}

func (d objectDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	switch into := into.(type) {
	case nil:
		// A watch event's object: an AgentSession, or a Status in an error event.
		s := &agentsv1alpha1.AgentSession{}
		if jsonv2.Unmarshal(data, s, decodeOptions) == nil && s.GroupVersionKind() == agentsv1alpha1.AgentSessionKind {
			return cleared(s, agentsv1alpha1.AgentSessionKind)
		}
	case *agentsv1alpha1.AgentSession:
		*into = agentsv1alpha1.AgentSession{}
		if jsonv2.Unmarshal(data, into, decodeOptions) == nil && into.GroupVersionKind() == agentsv1alpha1.AgentSessionKind {
			return cleared(into, agentsv1alpha1.AgentSessionKind)
		}
		*into = agentsv1alpha1.AgentSession{}
	case *agentsv1alpha1.AgentSessionList:
		*into = agentsv1alpha1.AgentSessionList{}
		if jsonv2.Unmarshal(data, into, decodeOptions) == nil && into.GroupVersionKind() == agentsv1alpha1.AgentSessionListKind {
			return cleared(into, agentsv1alpha1.AgentSessionListKind)
		}
		*into = agentsv1alpha1.AgentSessionList{}
	}
	// Not what this decoder reads, or not well formed: client-go's decoder says what it is.
	out, gvk, err := d.Serializer.Decode(data, defaults, into)
	if out != nil {
		out.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	}
	return out, gvk, err
}

func cleared(obj runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, *schema.GroupVersionKind, error) {
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return obj, &gvk, nil
}

// watchEventDecoder reads a watch event's type and slices its object from the frame, which the
// framer has validated; client-go then decodes the object with objectDecoder. A frame that is not
// the API server's {"type":...,"object":...} goes to client-go's decoder.
type watchEventDecoder struct {
	runtime.Serializer // client-go's: it encodes, and decodes what this one does not
}

func (d watchEventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if ev, ok := into.(*metav1.WatchEvent); ok {
		if typ, obj, ok := splitWatchEvent(data); ok {
			*ev = metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: obj}}
			return ev, nil, nil
		}
	}
	return d.Serializer.Decode(data, defaults, into)
}

var (
	eventPrefix    = []byte(`{"type":"`)
	eventObjectKey = []byte(`","object":`)
)

// splitWatchEvent reads {"type":"T","object":O} as the API server writes it (no spaces, type
// first, no escapes in T, nothing after O), O being the rest of the frame but its closing brace.
// The frame is one valid JSON value (the framer checked), so O is one too once its opening
// brace closes at its last byte.
func splitWatchEvent(frame []byte) (typ string, obj []byte, ok bool) {
	frame = bytes.TrimRight(frame, " \t\r\n")
	rest, ok := bytes.CutPrefix(frame, eventPrefix)
	if !ok || len(rest) == 0 || rest[len(rest)-1] != '}' {
		return "", nil, false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", nil, false
	}
	obj, ok = bytes.CutPrefix(rest[end:], eventObjectKey)
	if !ok {
		return "", nil, false
	}
	obj = obj[:len(obj)-1]
	if !oneObject(obj) {
		return "", nil, false
	}
	return string(rest[:end]), obj, true
}

// oneObject reports whether b, valid JSON but for what may follow its first value, is one
// object: it opens with a brace that closes at its last byte. Strings, most of an object's
// bytes, are skipped to their closing quote; nothing else needs checking in JSON already
// validated.
func oneObject(b []byte) bool {
	if len(b) == 0 || b[0] != '{' {
		return false
	}
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			end, ok := stringEnd(b, i)
			if !ok {
				return false
			}
			i = end
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i == len(b)-1
			}
		}
	}
	return false
}

// stringEnd is the index of the quote that closes the string opening at b[start]: the next
// quote after an even number of backslashes.
func stringEnd(b []byte, start int) (int, bool) {
	for j := start + 1; ; j++ {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, false
		}
		j += k
		escapes := 0
		for m := j - 1; m > start && b[m] == '\\'; m-- {
			escapes++
		}
		if escapes%2 == 0 {
			return j, true
		}
	}
}

// framer splits a watch stream into its JSON values, validating each once.
type framer struct{}

func (framer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &frameReader{r: r, dec: jsontext.NewDecoder(r, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))}
}

func (framer) NewFrameWriter(w io.Writer) io.Writer { return w }

// frameReader returns one JSON value per Read, as client-go's JSON frame reader does: a value
// longer than the caller's buffer is returned in parts, each but the last with io.ErrShortBuffer.
type frameReader struct {
	r         io.ReadCloser
	dec       *jsontext.Decoder
	remaining []byte
}

func (f *frameReader) Read(data []byte) (int, error) {
	if len(f.remaining) == 0 {
		v, err := f.dec.ReadValue()
		if err != nil {
			return 0, streamError(err)
		}
		n := copy(data, v)
		if n == len(v) {
			return n, nil
		}
		f.remaining = append(f.remaining[:0], v[n:]...) // v is valid only until the next read
		return n, io.ErrShortBuffer
	}
	n := copy(data, f.remaining)
	f.remaining = f.remaining[n:]
	if len(f.remaining) > 0 {
		return n, io.ErrShortBuffer
	}
	return n, nil
}

func (f *frameReader) Close() error { return f.r.Close() }

// streamError is err as client-go's watcher tells its cases apart, by identity: io.EOF for a
// stream that ended between values, io.ErrUnexpectedEOF for one cut inside a value. Other errors
// keep the connection's error in their chain and its text, which is what the watcher reads.
func streamError(err error) error {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return io.ErrUnexpectedEOF
	case errors.Is(err, io.EOF):
		return io.EOF
	}
	return err
}
