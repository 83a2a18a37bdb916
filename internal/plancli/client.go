package plancli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// FieldManager is the field manager of every write the plugin makes.
const FieldManager = "kubectl-plan"

// resourceName is how errors name the resource, as kubectl does.
const resourceName = "agentsessions.agents.harness.dev"

// Options holds what every subcommand shares: the standard kubectl connection flags and the
// output streams.
type Options struct {
	Flags   *genericclioptions.ConfigFlags
	Streams genericiooptions.IOStreams

	c  client.WithWatch
	ns string
	// wait is how long a toggle waits for the manager's outcome (--wait).
	wait time.Duration
	// images are the files a toggle attaches to its message (--image).
	images []string
}

// complete builds the client and resolves the namespace from the flags and kubeconfig.
func (o *Options) complete() error {
	if o.c != nil {
		return nil
	}
	cfg, err := o.Flags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("cannot load the kubeconfig: %w", err)
	}
	ns, _, err := o.Flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return fmt.Errorf("cannot resolve the namespace: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("register the AgentSession API: %w", err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("register the core API: %w", err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("cannot build an API client: %w", err)
	}
	o.c, o.ns = c, ns
	return nil
}

// get reads one AgentSession by name.
func (o *Options) get(ctx context.Context, name string) (*v1alpha1.AgentSession, error) {
	as := &v1alpha1.AgentSession{}
	if err := o.c.Get(ctx, types.NamespacedName{Namespace: o.ns, Name: name}, as); err != nil {
		if nf := o.notFound(ctx, err, name); nf != nil {
			return nil, nf
		}
		return nil, o.explain(err, name, "get", "read the session")
	}
	return as, nil
}

// patchSpec writes a small JSON merge patch to the session's spec, guarded by the
// resourceVersion the decision was computed from: if anyone changed the object since, the API
// server refuses it with a conflict and the caller recomputes (retry.RetryOnConflict).
func (o *Options) patchSpec(ctx context.Context, as *v1alpha1.AgentSession, spec map[string]any, why string) (*v1alpha1.AgentSession, error) {
	body := map[string]any{
		"metadata": map[string]any{"resourceVersion": as.ResourceVersion},
		"spec":     spec,
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode the patch: %w", err)
	}
	obj := as.DeepCopy()
	if err := o.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, raw), client.FieldOwner(FieldManager)); err != nil {
		if apierrors.IsConflict(err) {
			return nil, err // retried by the caller
		}
		return nil, o.explain(err, as.Name, "patch", why)
	}
	return obj, nil
}

// explain turns an API error into a message that says what was wrong and what to do.
func (o *Options) explain(err error, name, verb, why string) error {
	switch {
	case meta.IsNoMatchError(err) || isNoResource(err):
		return fmt.Errorf("the AgentSession API (%s) is not installed in this cluster: install the planmode-operator CRDs (config/crd)", v1alpha1.GroupVersion)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("no AgentSession %q in namespace %q (list them with: kubectl plan list -n %s)", name, o.ns, o.ns)
	case apierrors.IsForbidden(err):
		msg := apiMessage(err)
		if strings.Contains(msg, "admission webhook") || strings.Contains(msg, "denied the request") {
			return fmt.Errorf("not allowed to %s: %s", why, msg)
		}
		return fmt.Errorf("not allowed to %s: this needs the %q permission on %s in namespace %q (server said: %s)", why, verb, resourceName, o.ns, msg)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return fmt.Errorf("the API server refused the change (%s): %s", why, apiMessage(err))
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("not logged in to the cluster (%s): %s", why, apiMessage(err))
	}
	return fmt.Errorf("cannot %s: %w", why, err)
}

func isNoResource(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	// A 404 that names no object: the resource type itself does not exist.
	d := st.Status().Details
	return apierrors.IsNotFound(err) && (d == nil || d.Name == "") && strings.Contains(st.Status().Message, "the server could not find the requested resource")
}

func apiMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Message != "" {
		return st.Status().Message
	}
	return err.Error()
}
