package plancli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

const testNS = "team-a"

// cli is Options on a fake API server holding objs, with its output in out and errOut.
type cli struct {
	*Options
	out, errOut *bytes.Buffer
}

func newCLI(t *testing.T, objs ...client.Object) *cli {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	return &cli{Options: &Options{Streams: streams, c: c, ns: testNS}, out: out, errOut: errOut}
}

// session returns an AgentSession named name in testNS with session ID name+"-id".
func session(name string) *v1alpha1.AgentSession {
	return &v1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name},
		Spec:       v1alpha1.AgentSessionSpec{SessionID: name + "-id"},
	}
}

func config(name string) *v1alpha1.PlanModeConfig {
	return &v1alpha1.PlanModeConfig{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name},
		Spec: v1alpha1.PlanModeConfigSpec{Section: "Plan first."}}
}

// read returns the demo session as the fake API server has it now.
func (c *cli) read(t *testing.T) *v1alpha1.AgentSession {
	t.Helper()
	as := &v1alpha1.AgentSession{}
	if err := c.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: "demo"}, as); err != nil {
		t.Fatal(err)
	}
	return as
}

// lines maps each output line, its runs of spaces collapsed, to true.
func lines(s string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(s, "\n") {
		out[strings.Join(strings.Fields(l), " ")] = true
	}
	return out
}

func wantLines(t *testing.T, got string, want ...string) {
	t.Helper()
	have := lines(got)
	for _, w := range want {
		if !have[w] {
			t.Errorf("no line %q in:\n%s", w, got)
		}
	}
}
