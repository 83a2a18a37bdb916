//go:build faultinject

// Package faultinject kills the manager (SIGKILL, as kill -9 would) at a named point between
// reading the session log, appending to it and writing an AgentSession's status. It is compiled
// in only with the faultinject build tag (test/reliability builds the manager that way); the
// default build (off.go) returns its arguments unchanged.
//
// Environment:
//
//	PLANMODE_CRASH_POINT  after-tail | after-append | before-status | after-status
//	PLANMODE_CRASH_SKIP   how many hits of that point to let pass before the crash (default 0)
package faultinject

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"k8s.io/client-go/rest"

	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// The crash points, in the order one reconcile passes them.
const (
	// AfterTail: the log tail has been read, nothing appended or written yet.
	AfterTail = "after-tail"
	// AfterAppend: a plan/mode was appended (compare-and-swap succeeded), the status that
	// records it is not written yet.
	AfterAppend = "after-append"
	// BeforeStatus: a status write is about to be sent to the API server.
	BeforeStatus = "before-status"
	// AfterStatus: the API server accepted a status write; the reconcile has not returned.
	AfterStatus = "after-status"
)

// Points lists every crash point.
var Points = []string{AfterTail, AfterAppend, BeforeStatus, AfterStatus}

// Enabled reports that this build can crash on purpose.
const Enabled = true

var (
	point = os.Getenv("PLANMODE_CRASH_POINT")
	skip  = func() int64 {
		n, _ := strconv.ParseInt(os.Getenv("PLANMODE_CRASH_SKIP"), 10, 64)
		return n
	}()
	hits atomic.Int64
)

// Hit crashes the process when name is the configured point and its skip count is used up.
func Hit(name string) {
	if name != point {
		return
	}
	if hits.Add(1) <= skip {
		return
	}
	fmt.Fprintf(os.Stderr, "faultinject: SIGKILL at %s (hit %d)\n", name, hits.Load())
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not deliverable late; never go on past the point
}

// WrapStore hits AfterTail after every successful Tail read and AfterAppend after every
// successful Append of the manager's store.
func WrapStore(s sessionlog.Store) sessionlog.Store { return store{s} }

type store struct{ sessionlog.Store }

func (s store) Tail(ctx context.Context, id string) (harness.Tail, error) {
	t, err := s.Store.Tail(ctx, id)
	if err == nil && !strings.HasPrefix(id, "planmode-readyz") {
		Hit(AfterTail)
	}
	return t, err
}

func (s store) Append(ctx context.Context, id string, evs []harness.Event) (harness.Tail, error) {
	t, err := s.Store.Append(ctx, id, evs)
	if err == nil {
		Hit(AfterAppend)
	}
	return t, err
}

// WrapConfig hits BeforeStatus before every AgentSession status write the manager sends and
// AfterStatus after the API server accepted it.
func WrapConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return transport{rt} })
	return cfg
}

type transport struct{ next http.RoundTripper }

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	status := (req.Method == http.MethodPatch || req.Method == http.MethodPut) &&
		strings.Contains(req.URL.Path, "/agentsessions/") && strings.HasSuffix(req.URL.Path, "/status")
	if status {
		Hit(BeforeStatus)
	}
	resp, err := t.next.RoundTrip(req)
	if status && err == nil && resp.StatusCode < 300 {
		Hit(AfterStatus)
	}
	return resp, err
}
