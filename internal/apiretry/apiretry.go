// Package apiretry tells an API call that a retry can fix from one that it cannot.
package apiretry

import (
	"context"
	"errors"
	"net"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Transient reports whether err is worth the same call again: the API server answered 5xx (a
// request it could not finish in time under load is a 504) or 429, or the connection failed.
// A caller checks its own context first: once that is done, a DeadlineExceeded is its own
// deadline, not the server's.
func Transient(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code >= http.StatusInternalServerError || code == http.StatusTooManyRequests
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded)
}
