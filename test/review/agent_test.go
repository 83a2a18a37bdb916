package review_test

import (
	"encoding/json"
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
	"github.com/harness-dev/planmode-operator/pkg/refagent"
)

// agent drives one session's turns and steps through the real SDK, as the agent's service
// account, assembling each request header the way the reference agent does.
type agent struct {
	// ns is the session's namespace ("": the suite's, ns).
	ns, name   string
	c          *agentsdk.Client
	turn, step int64
	stepOpen   bool
	res        agentsdk.Result
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
	return &agent{name: name, c: c}
}

func (a *agent) get() *agentsv1alpha1.AgentSession {
	GinkgoHelper()
	as := &agentsv1alpha1.AgentSession{}
	namespace := a.ns
	if namespace == "" {
		namespace = ns
	}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: a.name}, as)).To(Succeed())
	return as
}

func (a *agent) startTurn() {
	GinkgoHelper()
	t, err := a.c.StartTurn(ctx)
	Expect(err).NotTo(HaveOccurred())
	a.turn, a.step = t, 0
}

// nextStep ends the open step, runs the step boundary and starts the next step with its input
// and the request header the boundary result implies.
func (a *agent) nextStep(input ...string) agentsdk.Result {
	GinkgoHelper()
	a.endStep()
	res, err := a.c.Boundary(ctx, a.turn, a.step+1, 20*time.Second)
	Expect(err).NotTo(HaveOccurred())
	msgs := make([]harness.Event, 0, len(input))
	for _, in := range input {
		msgs = append(msgs, agentsdk.UserText(in))
	}
	hdr := refagent.Header(res, harness.LLMCallConfig{Provider: "reference", Model: "scripted"}, refagent.DefaultSystem)
	Expect(a.c.StartStep(ctx, res, agentsdk.StepInput{Messages: msgs, Header: &hdr})).To(Succeed())
	a.step, a.stepOpen, a.res = a.step+1, true, res
	return res
}

func (a *agent) endStep() {
	GinkgoHelper()
	if a.stepOpen {
		Expect(a.c.EndStep(ctx, a.turn, a.step)).To(Succeed())
		a.stepOpen = false
	}
}

func (a *agent) endTurn() {
	GinkgoHelper()
	a.endStep()
	Expect(a.c.EndTurn(ctx, a.turn, harness.TurnCompleted)).To(Succeed())
}

// exit is one exit_plan_mode call running in the background.
type exit struct {
	res agentsdk.ExitResult
	err error
}

// callExit starts exit_plan_mode in the open step; the result arrives on the channel and is
// recorded in the log as the tool call (the plan its arguments) and its result.
func (a *agent) callExit(plan string) <-chan exit {
	ch := make(chan exit, 1)
	turn, step := a.turn, a.step
	go func() {
		defer GinkgoRecover()
		res, err := a.c.ExitPlanMode(ctx, plan, 60*time.Second)
		// The plan as the call's arguments, as agents record it (kubectl plan review --diff reads it).
		args, _ := json.Marshal(map[string]string{"plan": plan})
		evs, evErr := agentsdk.ExitToolEvents(turn, step, agentsdk.NewID(), string(args), res, err)
		if evErr == nil {
			_, evErr = a.c.Append(ctx, evs...)
		}
		Expect(evErr).NotTo(HaveOccurred())
		ch <- exit{res, err}
	}()
	return ch
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

func receive(ch <-chan exit) exit {
	GinkgoHelper()
	var e exit
	Eventually(ch).WithTimeout(30 * time.Second).Should(Receive(&e))
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
	evs, err := store.ReadFrom(ctx, a.c.SessionID(), 0, 0)
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
