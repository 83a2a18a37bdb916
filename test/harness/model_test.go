package harness_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// reply is one scripted answer of the model, consumed in request order (a retried request
// takes the next one).
type reply struct {
	Text  string     `json:"text,omitempty"`
	Tools []toolCall `json:"tools,omitempty"`
	// Hold keeps the request open until the driver releases it (/test/release?n=N), so a
	// scenario can act while that step's request is in flight.
	Hold bool `json:"hold,omitempty"`
	// Status, when set, answers with this HTTP status and an error body instead.
	Status int `json:"status,omitempty"`
}

type toolCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// seenRequest is what the model saw in one chat-completions request.
type seenRequest struct {
	N           int      `json:"n"`
	PlanSection bool     `json:"planSection"`
	Tools       []string `json:"tools"`
	Messages    int      `json:"messages"`
	System      string   `json:"-"`
}

// planSectionMarker opens the plan:policy section of the harness's system prompt.
const planSectionMarker = "You are in plan mode"

// scriptedModel is an OpenAI-compatible chat-completions server (SSE) that plays a script. It
// also serves the driver's synchronisation calls: /test/await?n=N answers once request N has
// arrived, /test/release?n=N lets a held request N answer.
type scriptedModel struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	script []reply
	seen   []seenRequest
	// arrived[n] is closed when request n arrives; release[n] when the driver releases it.
	arrived, release map[int]chan struct{}
	calls            int
}

func newScriptedModel(t *testing.T, script []reply) *scriptedModel {
	m := &scriptedModel{t: t, script: script, arrived: map[int]chan struct{}{}, release: map[int]chan struct{}{}}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.close)
	return m
}

// close releases every held request so the server can shut down.
func (m *scriptedModel) close() {
	m.mu.Lock()
	for n := range m.script {
		closeOnce(m.chanLocked(m.release, n))
	}
	m.mu.Unlock()
	m.srv.Close()
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

func (m *scriptedModel) chanLocked(set map[int]chan struct{}, n int) chan struct{} {
	c, ok := set[n]
	if !ok {
		c = make(chan struct{})
		set[n] = c
	}
	return c
}

func (m *scriptedModel) requests() []seenRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]seenRequest(nil), m.seen...)
}

func (m *scriptedModel) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/test/await" || r.URL.Path == "/test/release":
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil {
			http.Error(w, "n must be a request number", http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		arrived, release := m.chanLocked(m.arrived, n), m.chanLocked(m.release, n)
		m.mu.Unlock()
		if r.URL.Path == "/test/release" {
			closeOnce(release)
			return
		}
		select {
		case <-arrived:
		case <-r.Context().Done():
		case <-time.After(60 * time.Second): // a bound on a broken scenario, not a synchronisation
			http.Error(w, fmt.Sprintf("request %d never arrived", n), http.StatusGatewayTimeout)
		}
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		m.complete(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (m *scriptedModel) complete(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var system strings.Builder
	for _, msg := range req.Messages {
		if msg.Role == "system" {
			var s string
			if json.Unmarshal(msg.Content, &s) != nil {
				s = string(msg.Content)
			}
			system.WriteString(s)
		}
	}
	m.mu.Lock()
	n := len(m.seen)
	seen := seenRequest{N: n, PlanSection: strings.Contains(system.String(), planSectionMarker), Messages: len(req.Messages), System: system.String()}
	for _, tl := range req.Tools {
		seen.Tools = append(seen.Tools, tl.Function.Name)
	}
	m.seen = append(m.seen, seen)
	rep := reply{Text: "done."}
	if n < len(m.script) {
		rep = m.script[n]
	}
	arrived, release := m.chanLocked(m.arrived, n), m.chanLocked(m.release, n)
	m.mu.Unlock()
	closeOnce(arrived)
	if rep.Hold {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
	}
	if rep.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		_, _ = io.WriteString(w, `{"error":{"message":"scripted failure","type":"server_error"}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any) {
		c := map[string]any{"id": "scripted", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		b, _ := json.Marshal(c)
		_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	// Word by word, as a model streams: the harness packs such delta runs in its default logs.
	for _, word := range strings.SplitAfter(rep.Text, " ") {
		if word != "" {
			chunk(map[string]any{"content": word}, nil)
		}
	}
	for i, tc := range rep.Tools {
		m.mu.Lock()
		m.calls++
		id := fmt.Sprintf("call_%d", m.calls)
		m.mu.Unlock()
		args := string(tc.Args)
		if args == "" {
			args = "{}"
		}
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": id, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": args}}}}, nil)
	}
	finish := "stop"
	if len(rep.Tools) > 0 {
		finish = "tool_calls"
	}
	chunk(map[string]any{}, finish)
	usage, _ := json.Marshal(map[string]any{"id": "scripted", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
		"choices": []any{}, "usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
	_, _ = fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", usage)
}
