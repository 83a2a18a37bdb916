// Package chatmodel is the scripted OpenAI-compatible chat-completions server (SSE) for runs of
// the real DeepSeek harness (DEEPSEEK_BASE_URL): replies by request number ("done." when none
// is scripted), streamed word by word as a model streams them, held requests, scripted HTTP
// failures, and what each request carried (the plan section, the declared tools). A driver in
// another process synchronises over HTTP: GET /test/await?n=N answers once request N has
// arrived, GET /test/release?n=N lets a held request N answer. test/e2e, test/harness's
// scenarios, the dsh benchmark and make run AGENT=dsh (cmd/localenv) use it.
package chatmodel

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// PlanSectionMarker opens the plan:policy section the tests' PlanModeConfigs render.
const PlanSectionMarker = "You are in plan mode"

// scripted names the model and the completion in every chunk.
const scripted = "scripted"

// Reply is one scripted answer; its JSON form is a scenario's (test/harness/testdata).
type Reply struct {
	Text  string `json:"text,omitempty"`
	Tools []Tool `json:"tools,omitempty"`
	// Hold keeps the request open until Release (or /test/release).
	Hold bool `json:"hold,omitempty"`
	// Status, when set, answers with this HTTP status and an error body instead.
	Status int `json:"status,omitempty"`
}

// Tool is one tool call of a reply; Args is its JSON arguments ("{}" when empty). In JSON,
// args is the arguments object itself.
type Tool struct{ Name, Args string }

// UnmarshalJSON reads {"name": ..., "args": {...}}.
func (t *Tool) UnmarshalJSON(b []byte) error {
	var raw struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	t.Name, t.Args = raw.Name, string(raw.Args)
	return nil
}

// Seen is what one request carried.
type Seen struct {
	N           int // the request's number, from 0
	PlanSection bool
	Tools       []string
	Messages    int
	System      string
}

// Model is the server. Its zero value is not usable; call New.
type Model struct {
	srv      *httptest.Server
	mu       sync.Mutex
	replies  map[int]Reply
	fallback func(n int, seen Seen) Reply
	seen     []Seen
	arrived  map[int]chan struct{}
	release  map[int]chan struct{}
	toolCall int
}

// New starts a model on loopback.
func New() *Model {
	m := &Model{replies: map[int]Reply{}, arrived: map[int]chan struct{}{}, release: map[int]chan struct{}{}}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	return m
}

// NewOn starts a model listening on addr (host:port, port 0 for any): for agents that reach it
// from elsewhere than loopback, such as pods on a test cluster's bridge.
func NewOn(addr string) (*Model, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("chatmodel: listen on %s: %w", addr, err)
	}
	m := &Model{replies: map[int]Reply{}, arrived: map[int]chan struct{}{}, release: map[int]chan struct{}{}}
	m.srv = httptest.NewUnstartedServer(http.HandlerFunc(m.serve))
	_ = m.srv.Listener.Close()
	m.srv.Listener = l
	m.srv.Start()
	return m, nil
}

// URL is the base URL for DEEPSEEK_BASE_URL.
func (m *Model) URL() string { return m.srv.URL }

// Close releases held requests and stops the server.
func (m *Model) Close() {
	m.mu.Lock()
	for n, c := range m.release {
		closeOnce(c)
		delete(m.release, n)
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

func (m *Model) ch(set map[int]chan struct{}, n int) chan struct{} {
	c, ok := set[n]
	if !ok {
		c = make(chan struct{})
		set[n] = c
	}
	return c
}

// Script sets the reply to request n (0-based, counted over the model's life).
func (m *Model) Script(n int, r Reply) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replies[n] = r
}

// ScriptAll sets the replies to requests 0, 1, ... in order.
func (m *Model) ScriptAll(rs []Reply) {
	for n, r := range rs {
		m.Script(n, r)
	}
}

// Fallback sets the reply of every request with none scripted; f gets the request's number
// and what it carried, and must not call the model's methods.
func (m *Model) Fallback(f func(n int, seen Seen) Reply) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fallback = f
}

// Requests returns what every request so far carried.
func (m *Model) Requests() []Seen {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Seen(nil), m.seen...)
}

// Arrived is closed when request n arrives.
func (m *Model) Arrived(n int) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ch(m.arrived, n)
}

// Release lets held request n answer.
func (m *Model) Release(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	closeOnce(m.ch(m.release, n))
}

func (m *Model) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/test/await" || r.URL.Path == "/test/release":
		m.sync(w, r)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		m.complete(w, r)
	default:
		http.NotFound(w, r)
	}
}

// sync serves a driver's /test/await and /test/release.
func (m *Model) sync(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.URL.Query().Get("n"))
	if err != nil {
		http.Error(w, "n must be a request number", http.StatusBadRequest)
		return
	}
	if r.URL.Path == "/test/release" {
		m.Release(n)
		return
	}
	select {
	case <-m.Arrived(n):
	case <-r.Context().Done():
	case <-time.After(60 * time.Second): // a bound on a broken scenario, not a synchronisation
		http.Error(w, fmt.Sprintf("request %d never arrived", n), http.StatusGatewayTimeout)
	}
}

func (m *Model) complete(w http.ResponseWriter, r *http.Request) {
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
	seen := Seen{PlanSection: strings.Contains(system.String(), PlanSectionMarker), Messages: len(req.Messages), System: system.String()}
	for _, t := range req.Tools {
		seen.Tools = append(seen.Tools, t.Function.Name)
	}
	m.mu.Lock()
	n := len(m.seen)
	seen.N = n
	m.seen = append(m.seen, seen)
	rep, ok := m.replies[n]
	if !ok && m.fallback != nil {
		rep = m.fallback(n, seen)
	}
	if rep.Text == "" && len(rep.Tools) == 0 {
		rep.Text = "done."
	}
	arrived, release := m.ch(m.arrived, n), m.ch(m.release, n)
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
	bw := bufio.NewWriter(w)
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": scripted, "object": "chat.completion.chunk", "created": 0, "model": scripted,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		_, _ = fmt.Fprintf(bw, "data: %s\n\n", b)
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
		m.toolCall++
		id := fmt.Sprintf("call_%d", m.toolCall)
		m.mu.Unlock()
		args := tc.Args
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
	usage, _ := json.Marshal(map[string]any{"id": scripted, "object": "chat.completion.chunk", "created": 0, "model": scripted,
		"choices": []any{}, "usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
	_, _ = fmt.Fprintf(bw, "data: %s\n\ndata: [DONE]\n\n", usage)
	_ = bw.Flush()
}
