package review_test

import (
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// agent is one session's StepAgent, as the agent's service account.
type agent struct {
	ns, name string
	*framework.StepAgent
}

// newSession creates an AgentSession (as the toggler would) and starts its agent.
func newSession(spec func(*agentsv1alpha1.AgentSessionSpec)) *agent {
	GinkgoHelper()
	name := "s-" + rand.String(6)
	as := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentsv1alpha1.AgentSessionSpec{SessionID: name}}
	if spec != nil {
		spec(&as.Spec)
	}
	Expect(k8s.Create(ctx, as)).To(Succeed())
	c, err := agentsdk.New(ctx, agentsdk.Options{Config: impersonate(agentUser), Namespace: ns, Name: name, Store: store})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(c.Close)
	return newAgent(ns, name, c)
}

// newAgent drives session namespace/name through c.
func newAgent(namespace, name string, c *agentsdk.Client) *agent {
	return &agent{ns: namespace, name: name, StepAgent: framework.NewStepAgent(ctx, GinkgoT(), c)}
}

func (a *agent) get() *agentsv1alpha1.AgentSession {
	GinkgoHelper()
	as := &agentsv1alpha1.AgentSession{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: a.ns, Name: a.name}, as)).To(Succeed())
	return as
}

// postedReview waits until the agent's review request is visible, and returns its id.
func (a *agent) postedReview() string {
	GinkgoHelper()
	var id string
	Eventually(func(g Gomega) {
		as := a.get()
		g.Expect(as.Status.Agent).NotTo(BeNil())
		g.Expect(as.Status.Agent.Review).NotTo(BeNil())
		g.Expect(as.Status.Review).NotTo(BeNil(), "the manager opens the review")
		g.Expect(as.Status.Review.ID).To(Equal(as.Status.Agent.Review.ID))
		g.Expect(as.Status.Review.Phase).To(Equal(agentsv1alpha1.ReviewPending))
		id = as.Status.Agent.Review.ID
	}).WithTimeout(20 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	return id
}

// receive waits for an exit_plan_mode call's outcome, recorded in the log.
func receive(ch <-chan framework.ExitCall) framework.ExitCall {
	GinkgoHelper()
	var e framework.ExitCall
	Eventually(ch).WithTimeout(30 * time.Second).Should(Receive(&e))
	Expect(e.Logged).NotTo(HaveOccurred(), "record the exit_plan_mode call in the log")
	return e
}

func exitErr(err error) *agentsdk.ExitError {
	GinkgoHelper()
	var ee *agentsdk.ExitError
	Expect(errors.As(err, &ee)).To(BeTrue(), "want an *agentsdk.ExitError, got %v", err)
	return ee
}

// events reads the session's log.
func (a *agent) events() []harness.Event {
	GinkgoHelper()
	evs, err := store.ReadFrom(ctx, a.Client.SessionID(), 0, 0)
	Expect(err).NotTo(HaveOccurred())
	return evs
}

func types(evs []harness.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
		if e.Type == harness.TypePlanMode {
			out[i] += " " + string(e.Data)
		}
	}
	return out
}
