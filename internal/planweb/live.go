package planweb

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Live updates: one watch per session served (a hub), whatever the number of pages open on it;
// each change is read again through the Backend and pushed to the pages as a Server-Sent Event.

// liveState is what the page updates in place. Its strings are set as text, never as HTML.
type liveState struct {
	PlanSHA256 string `json:"planSHA256"`
	Revision   int64  `json:"revision"`
	Phase      string `json:"phase"`
	State      string `json:"state"`
	Approvals  string `json:"approvals"`
	Decisions  string `json:"decisions"`
	Open       bool   `json:"open"`
	Closed     bool   `json:"closed"`
	// Error says why the state could not be read or watched.
	Error string `json:"error,omitempty"`
	// Set per page: Stale, the page shows an older plan; Message, what changed, in words.
	Stale   bool   `json:"stale"`
	Message string `json:"message,omitempty"`
}

type hub struct {
	mu      sync.Mutex
	cur     liveState
	read    bool
	changed chan struct{}
}

// hubFor is the hub of session ns/name, started on first use.
func (s *server) hubFor(ns, name string) *hub {
	h, loaded := s.hubs.LoadOrStore(ns+"/"+name, &hub{changed: make(chan struct{})})
	if !loaded {
		go s.runHub(h.(*hub), ns, name)
	}
	return h.(*hub)
}

// refresh reads the session again and publishes its state.
func (s *server) refresh(ctx context.Context, h *hub, ns, name string) {
	st := liveState{}
	rv, err := s.o.Backend.Review(ctx, ns, name)
	if err != nil {
		st.Error = err.Error()
	} else {
		st = liveState{PlanSHA256: rv.PlanSHA256, Revision: rv.Revision, Phase: rv.Phase, State: rv.State,
			Approvals: rv.Approvals, Decisions: rv.Decisions, Open: rv.Open, Closed: rv.Closed}
	}
	h.publish(st)
}

func (s *server) runHub(h *hub, ns, name string) {
	refresh := func() { s.refresh(s.ctx, h, ns, name) }
	refresh()
	for s.ctx.Err() == nil {
		err := s.o.Backend.Watch(s.ctx, ns, name, refresh)
		if s.ctx.Err() != nil {
			return
		}
		if err != nil {
			h.publish(liveState{Error: "live updates paused: " + err.Error()})
		}
		// Watch again after a pause; a restarted watch sends the current object first.
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		refresh()
	}
}

func (h *hub) publish(st liveState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st.Error != "" && h.read {
		// Keep the last state known, with the error.
		e := st.Error
		st = h.cur
		st.Error = e
	}
	if h.read && st == h.cur {
		return
	}
	h.cur, h.read = st, true
	close(h.changed)
	h.changed = make(chan struct{})
}

// snapshot is the current state (ok once read) and a channel closed at the next change.
func (h *hub) snapshot() (liveState, bool, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur, h.read, h.changed
}

// forPage says what changed for a page that shows the plan with digest shown.
func (st liveState) forPage(shown string) liveState {
	switch {
	case st.Error != "":
		st.Message = st.Error
	case st.PlanSHA256 != shown:
		st.Stale = true
		switch {
		case st.PlanSHA256 == "":
			st.Message = "The plan this page shows is no longer under review. Reload the page."
		case shown == "":
			st.Message = fmt.Sprintf("The agent presented a plan (revision %d). Reload the page to read it.", st.Revision)
		default:
			st.Message = fmt.Sprintf("The agent posted a new plan (revision %d) since this page was loaded: the decisions here no longer apply. Reload the page to read it.", st.Revision)
		}
	case st.Closed:
		st.Message = "This review was decided: " + st.State
	case !st.Open:
		st.Message = "A decision was written: " + st.State
	}
	return st
}

// events streams the session's state to a review page (text/event-stream).
func (s *server) events(w http.ResponseWriter, r *http.Request, ns, name string) {
	fl, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, http.StatusInternalServerError, fmt.Errorf("this connection cannot stream events"))
		return
	}
	shown := r.URL.Query().Get("shown")
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	h := s.hubFor(ns, name)
	var last liveState
	sent := false
	send := func() bool {
		st, read, ch := h.snapshot()
		if read && (!sent || st != last) {
			out := st.forPage(shown)
			if sent && out.Message == "" && (st.Decisions != last.Decisions || st.Approvals != last.Approvals) {
				out.Message = "Updated: " + st.Approvals + "; decisions: " + st.Decisions
			}
			data, err := json.Marshal(out)
			if err != nil {
				return false
			}
			if _, err := fmt.Fprintf(w, "event: state\ndata: %s\n\n", data); err != nil {
				return false
			}
			fl.Flush()
			last, sent = st, true
		}
		select {
		case <-ch:
			return true
		case <-r.Context().Done():
			return false
		case <-s.done:
			// The last state first: it may be the decision that stops the server, which the
			// watch may not have reported yet.
			rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			s.refresh(rctx, h, ns, name)
			cancel()
			if st2, _, _ := h.snapshot(); st2 != last {
				data, err := json.Marshal(st2.forPage(shown))
				if err == nil {
					_, _ = fmt.Fprintf(w, "event: state\ndata: %s\n\n", data)
				}
			}
			_, _ = fmt.Fprint(w, "event: stopped\ndata: {}\n\n")
			fl.Flush()
			return false
		}
	}
	for send() {
	}
}

// stopWhenDecided stops the server once the manager closed the review of ns/name (decided by
// anyone), or a new plan replaced it, after it was open.
func (s *server) stopWhenDecided(ns, name string) {
	h := s.hubFor(ns, name)
	var first string
	for {
		st, read, ch := h.snapshot()
		if read && st.Error == "" {
			if first == "" && st.PlanSHA256 != "" && !st.Closed {
				first = st.PlanSHA256
			}
			if first != "" && (st.Closed || st.PlanSHA256 != first) {
				s.stop()
				return
			}
		}
		select {
		case <-ch:
		case <-s.done:
			return
		}
	}
}
