package apiretry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

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
