package apiretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Group: "agents.harness.dev", Resource: "agentsessions"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"504 request did not complete in time", apierrors.NewTimeoutError("request did not complete within requested timeout", 0), true},
		{"500 server timeout", apierrors.NewServerTimeout(gr, "patch", 1), true},
		{"429 too many requests", apierrors.NewTooManyRequests("slow down", 1), true},
		{"503 unavailable", apierrors.NewServiceUnavailable("starting"), true},
		{"500 internal", apierrors.NewInternalError(errors.New("etcdserver: request timed out")), true},
		{"wrapped 504", fmt.Errorf("report: %w", apierrors.NewTimeoutError("x", 0)), true},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true},
		{"deadline", context.DeadlineExceeded, true},
		{"HTTP/2 connection lost reading the answer", fmt.Errorf("unexpected error when reading response body. Please retry. Original error: %w", errors.New("http2: client connection lost")), true},
		{"GOAWAY", &url.Error{Op: "Patch", URL: "https://x", Err: errors.New("http2: server sent GOAWAY and closed the connection")}, true},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"404 not found", apierrors.NewNotFound(gr, "a"), false},
		{"403 forbidden", apierrors.NewForbidden(gr, "a", errors.New("no")), false},
		{"422 invalid", apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "AgentSession"}, "a", nil), false},
		{"409 conflict", apierrors.NewConflict(gr, "a", errors.New("changed")), false},
		{"canceled", context.Canceled, false},
		{"other", errors.New("encode: bad"), false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("%s: Transient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestUntil(t *testing.T) {
	busy := apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
	gr := schema.GroupResource{Group: "agents.harness.dev", Resource: "agentsessions"}

	t.Run("retries transient errors until the call succeeds", func(t *testing.T) {
		calls := 0
		var pauses []time.Duration
		err := Until(context.Background(), time.Millisecond, 2*time.Millisecond, func() error {
			if calls++; calls < 4 {
				return busy
			}
			return nil
		}, func(_ error, pause time.Duration) { pauses = append(pauses, pause) })
		if err != nil || calls != 4 {
			t.Fatalf("Until = %v after %d calls, want nil after 4", err, calls)
		}
		if len(pauses) != 3 || pauses[2] < 2*time.Millisecond || pauses[2] > 3*time.Millisecond {
			t.Fatalf("pauses %v: want 3, the last one capped at 2ms (+50%% jitter)", pauses)
		}
	})
	t.Run("stops at the first error a retry cannot fix", func(t *testing.T) {
		calls := 0
		forbidden := apierrors.NewForbidden(gr, "a", errors.New("no"))
		err := Until(context.Background(), time.Millisecond, time.Millisecond, func() error {
			if calls++; calls < 2 {
				return busy
			}
			return forbidden
		}, nil)
		if err != forbidden || calls != 2 {
			t.Fatalf("Until = %v after %d calls, want the 403 after 2", err, calls)
		}
	})
	t.Run("stops when the context ends, with the last error", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		calls := 0
		start := time.Now()
		err := Until(ctx, 10*time.Millisecond, 20*time.Millisecond, func() error { calls++; return busy }, nil)
		if !apierrors.IsTimeout(err) || calls < 2 {
			t.Fatalf("Until = %v after %d calls, want the 504 after at least 2", err, calls)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Until returned %s after the context ended, want at once", d)
		}
	})
}
