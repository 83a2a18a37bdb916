package webhooks

import (
	"context"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// logRefusals wraps an admission handler so that every refusal is an info line in the manager's
// log, naming the object, the user and the API server's message: an operator reading the
// manager's log sees why a write was turned away without asking the user for kubectl's output.
// Allowed requests, the common case, log nothing.
func logRefusals(h admission.Handler, log logr.Logger) admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		resp := h.Handle(ctx, req)
		if resp.Allowed {
			return resp
		}
		var code int32
		var msg string
		if r := resp.Result; r != nil {
			code, msg = r.Code, r.Message
		}
		kind := req.Kind.Kind
		if req.SubResource != "" {
			kind += "/" + req.SubResource
		}
		log.Info("refused", "operation", req.Operation, "kind", kind, "namespace", req.Namespace, "name", req.Name,
			"user", req.UserInfo.Username, "code", code, "message", msg)
		return resp
	})
}
