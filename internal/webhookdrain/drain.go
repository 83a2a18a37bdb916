// Package webhookdrain lets a stopping manager replica hand its admission traffic to the
// others before it stops serving, so that a rolling upgrade refuses no write.
//
// The API server reaches the webhooks through their Service and keeps its connections to a
// replica open between requests. When a replica is deleted, kube-proxy stops routing new
// connections to it a moment later, and an open connection closed under a request fails that
// request: with failurePolicy Fail, a user's write refused ("connection refused", "EOF").
// So at the first SIGTERM the server keeps serving for the drain period, answering each request
// with "Connection: close" (the API server then opens its next connection to a replica that
// stays), and only then does the manager's context end and the server shut down, with no
// connection left that a request could still be sent on.
package webhookdrain

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Server is a webhook.Server whose handlers close their connections once draining starts.
type Server struct {
	webhook.Server
	draining atomic.Bool
}

// Wrap returns s with draining; register the webhooks on the result.
func Wrap(s webhook.Server) *Server { return &Server{Server: s} }

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

// Draining reports whether draining has started.
func (s *Server) Draining() bool { return s.draining.Load() }

// SignalContext is ctrl.SetupSignalHandler with a drain: at the first SIGTERM or SIGINT the
// server starts draining, and the context ends after drain (at once when drain is 0). A second
// signal exits at once with status 1.
func (s *Server) SignalContext(drain time.Duration) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		s.Drain(drain, cancel)
		<-ch
		os.Exit(1)
	}()
	return ctx
}

// Drain starts draining and calls stop after d, in the background.
func (s *Server) Drain(d time.Duration, stop context.CancelFunc) {
	s.draining.Store(true)
	if d <= 0 {
		stop()
		return
	}
	ctrl.Log.WithName("webhooks").Info("stopping: draining the webhook server before shutting down", "drain", d.String())
	time.AfterFunc(d, stop)
}
