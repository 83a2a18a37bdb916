// Package apiretry tells an API call that a retry can fix from one that it cannot.
package apiretry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Transient reports whether err is worth the same call again: the API server answered 5xx (a
// request it could not finish in time under load is a 504) or 429, or the connection failed or
// was lost before the answer came. Only for a call that may be repeated: a write lost with its
// connection may have landed. A caller checks its own context first: once that is done, a
// DeadlineExceeded is its own deadline, not the server's.
func Transient(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code >= http.StatusInternalServerError || code == http.StatusTooManyRequests
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) ||
		utilnet.IsProbableEOF(err) || errors.Is(err, io.ErrUnexpectedEOF) ||
		// The HTTP/2 connection closed under the request (its health-check ping went
		// unanswered): client-go wraps that in a "Please retry" error of no type.
		strings.Contains(err.Error(), "http2: client connection lost")
}

// Until calls call until it succeeds, fails with an error that is not Transient, or ctx ends,
// and returns its last error. The pauses between calls start at first and double up to longest,
// with jitter, so a crowd of callers refused together does not come back together. retrying,
// when set, is told each error that will be retried and the pause before the retry.
func Until(ctx context.Context, first, longest time.Duration, call func() error, retrying func(err error, pause time.Duration)) error {
	for delay := first; ; delay = min(2*delay, longest) {
		err := call()
		if err == nil || ctx.Err() != nil || !Transient(err) {
			return err
		}
		pause := wait.Jitter(delay, 0.5)
		if retrying != nil {
			retrying(err, pause)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
