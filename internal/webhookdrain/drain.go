// Package webhookdrain lets a stopping manager replica hand its work to the others at once and
// its admission traffic once the webhook Service has moved it, so that a rolling upgrade
// refuses no write and no replica's stop leaves the sessions unreconciled for a lease duration.
//
// The API server reaches the webhooks through their Service and keeps its connections to a
// replica open between requests. When a replica is deleted, kube-proxy stops routing new
// connections to it a moment later, and an open connection closed under a request fails that
// request: with failurePolicy Fail, a user's write refused ("connection refused", "EOF").
// So at the first SIGTERM the webhook server keeps serving for the drain period, answering each
// request with "Connection: close" (the API server then opens its next connection to a replica
// that stays), and only then shuts down, with no connection left that a request could still be
// sent on.
//
// The rest of the manager does not wait for that drain: its context ends at the signal, so its
// reconcilers stop and it releases the leader Lease at once, and another replica reconciles
// within one leader-election retry period. Were the release to wait for the drain, a pod deleted
// with no grace period (killed two seconds after its SIGTERM) would never release it, and the
// sessions would wait for the Lease to expire.
package webhookdrain

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Server is a webhook.Server that outlives the manager's context by the drain period, and whose
// handlers close their connections once draining starts.
type Server struct {
	webhook.Server
	draining atomic.Bool
	started  atomic.Bool
	// serving is the wrapped server's context: it ends when the drain does, or at Wait when
	// the manager stopped without a signal.
	serving context.Context
	stop    context.CancelFunc
	done    chan struct{} // closed once the wrapped server's Start returned, err set
	err     error
}

// Wrap returns s with draining; register the webhooks on the result and give it to the manager.
func Wrap(s webhook.Server) *Server {
	serving, stop := context.WithCancel(context.Background())
	return &Server{Server: s, serving: serving, stop: stop, done: make(chan struct{})}
}

// Register registers hook on the wrapped server, closing each connection after its response
// while draining.
func (s *Server) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		hook.ServeHTTP(w, r)
	}))
}

// Start runs the wrapped server and returns when ctx ends, leaving it serving until the drain
// ends (see Wait); an error of the wrapped server before that is returned at once.
func (s *Server) Start(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("the webhook server was started twice")
	}
	go func() {
		s.err = s.Server.Start(s.serving)
		close(s.done)
	}()
	select {
	case <-s.done:
		return s.err
	case <-ctx.Done():
		return nil
	}
}

// Wait returns once the wrapped server has shut down: at the end of the drain a signal started,
// at once when the manager stopped for another reason. Call it after the manager's Start
// returned, before the process exits.
func (s *Server) Wait() {
	if !s.draining.Load() {
		s.stop()
	}
	if s.started.Load() {
		<-s.done
	}
}

// Draining reports whether draining has started.
func (s *Server) Draining() bool { return s.draining.Load() }

// SignalContext is ctrl.SetupSignalHandler with a drain: at the first SIGTERM or SIGINT the
// server starts draining for drain and the returned context ends. A second signal exits at
// once with status 1.
func (s *Server) SignalContext(drain time.Duration) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		s.Drain(drain)
		cancel()
		<-ch
		os.Exit(1)
	}()
	return ctx
}

// Drain starts draining and stops the server after d (at once when d is 0).
func (s *Server) Drain(d time.Duration) {
	s.draining.Store(true)
	if d <= 0 {
		s.stop()
		return
	}
	ctrl.Log.WithName("webhooks").Info("stopping: draining the webhook server before shutting it down", "drain", d.String())
	time.AfterFunc(d, s.stop)
}
