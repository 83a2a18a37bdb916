package kubectlplan_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
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
	"github.com/harness-dev/planmode-operator/test/framework"
)

const ns = "default"

// agent is one session's StepAgent, as make run's demo agent identity.
type agent struct {
	name string
	*framework.StepAgent
}

// newSession creates an AgentSession with no selection, waits for the manager to take it on,
// and connects its agent.
func newSession(prefix string) *agent {
	GinkgoHelper()
	name := prefix + "-" + rand.String(5)
	Expect(k8s.Create(ctx, &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentsv1alpha1.AgentSessionSpec{SessionID: name}})).To(Succeed())
	a := &agent{name: name}
	Eventually(func(g Gomega) {
		as := a.get()
		g.Expect(as.Status.PlanMode.Config).NotTo(BeNil())
		g.Expect(as.Status.ObservedGeneration).To(Equal(as.Generation))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	c, err := agentsdk.New(ctx, agentsdk.Options{Config: agentCfg, Namespace: ns, Name: name, Store: store})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(c.Close)
	a.StepAgent = framework.NewStepAgent(ctx, GinkgoT(), c)
	return a
}

func (a *agent) get() *agentsv1alpha1.AgentSession {
	GinkgoHelper()
	as := &agentsv1alpha1.AgentSession{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: a.name}, as)).To(Succeed())
	return as
}

// serve runs the reference agent on the session: idle, a turn of one step for each message
// (the demo agent's way), until the spec ends.
func (a *agent) serve() {
	GinkgoHelper()
	script, err := refagent.ParseScript(strings.NewReader("on-message\nstep\n"))
	Expect(err).NotTo(HaveOccurred())
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := refagent.Run(sctx, refagent.Options{Client: a.Client, Script: script, WaitForMessages: true, BoundaryTimeout: 20 * time.Second})
		done <- err
	}()
	DeferCleanup(func() {
		stop()
		Eventually(done).WithTimeout(20 * time.Second).Should(Receive(BeNil()))
	})
}

// events reads the session's log.
func (a *agent) events() []harness.Event {
	GinkgoHelper()
	evs, err := store.ReadFrom(ctx, a.Client.SessionID(), 0, 0)
	Expect(err).NotTo(HaveOccurred())
	return evs
}

func (a *agent) tail() harness.Tail {
	GinkgoHelper()
	t, err := store.Tail(ctx, a.Client.SessionID())
	Expect(err).NotTo(HaveOccurred())
	return t
}

// planModeAt is one plan/mode event of the log: whether a turn was open at it, and the step
// whose step/start follows it (zero when none does), by the log's own fold (harness.Replay).
type planModeAt struct {
	active     bool
	turnOpen   bool
	turn, step int64
}

func planModes(evs []harness.Event) []planModeAt {
	var out []planModeAt
	for i, ev := range evs {
		if ev.Type != harness.TypePlanMode {
			continue
		}
		at := planModeAt{active: harness.Replay(evs[:i+1]).Active, turnOpen: harness.Replay(evs[:i]).TurnOpen}
		if j := slices.IndexFunc(evs[i:], func(e harness.Event) bool { return e.Type == harness.TypeStepStart }); j >= 0 {
			t := harness.Replay(evs[:i+j+1])
			at.turn, at.step = t.Turn, t.Step
		}
		out = append(out, at)
	}
	return out
}

// messageAt is where the user message text is in the log: the turn and step that hold it, and
// whether that turn started after seq from.
func messageAt(evs []harness.Event, text string, from int64) (turn, step int64, startedAfter, found bool) {
	at := slices.IndexFunc(evs, func(ev harness.Event) bool {
		var m harness.UserMessage
		return ev.Type == harness.TypeUserMessage && json.Unmarshal(ev.Data, &m) == nil &&
			m.Source.Kind == harness.SourceKindUser && len(m.Content) > 0 && m.Content[0].Text == text
	})
	if at < 0 {
		return 0, 0, false, false
	}
	t := harness.Replay(evs[:at])
	return t.Turn, t.Step, t.Turn > harness.Replay(evs[:min(int(from), len(evs))]).Turn, true
}
