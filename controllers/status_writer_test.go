package controllers

import (
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestRefusedAsStale(t *testing.T) {
	gr := schema.GroupResource{Group: "agents.harness.dev", Resource: "agentsessions"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"resourceVersion conflict", apierrors.NewConflict(gr, "s", fmt.Errorf("the object has been modified")), true},
		// What the API server answers when a JSON patch "test" operation fails.
		{"failed test operation", apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", schema.GroupResource{}, "", "", 0, false), true},
		{"wrapped", fmt.Errorf("patch: %w", apierrors.NewConflict(gr, "s", fmt.Errorf("modified"))), true},
		{"an invalid status", apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "AgentSession"}, "s",
			field.ErrorList{field.Invalid(field.NewPath("status", "planMode", "pendingSource"), "X", "must be User or Exit")}), false},
		{"forbidden", apierrors.NewForbidden(gr, "s", fmt.Errorf("no")), false},
		{"not an API error", fmt.Errorf("connection refused"), false},
	} {
		if got := refusedAsStale(tc.err); got != tc.want {
			t.Errorf("%s: refusedAsStale = %v, want %v", tc.name, got, tc.want)
		}
	}
}
