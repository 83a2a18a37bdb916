package agentsdk_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	gomegatypes "github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework/apicount"
)

const testSection = "You are in plan mode. Stay in plan mode until exit_plan_mode succeeds.\n"

type fixture struct {
	ns, name, sessionID string
	agent               *agentsdk.Client
	api                 *apicount.Counter
}

// setup creates a PlanModeConfig "default", an AgentSession (answered by the floor when
// floorAck) and an agent client whose API requests are counted.
func setup(floorAck bool) *fixture {
	if floorAck {
		return setupAnswered("floor")
	}
	return setupAnswered("")
}

// setupAnswered is setup with the session labelled ackLabel=ack ("": no label), and the agent's
// requests passed through wrap (outside the counter) when given.
func setupAnswered(ack string, wrap ...transport.WrapperFunc) *fixture {
	f := &fixture{ns: newNamespace(), name: "agent", sessionID: "s-" + agentsdk.NewID()}
	Expect(k8s.Create(suiteCtx, &v1alpha1.PlanModeConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: v1alpha1.DefaultPlanModeConfigName},
		Spec:       v1alpha1.PlanModeConfigSpec{Section: testSection},
	})).To(Succeed())
	s := &v1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.name},
		Spec:       v1alpha1.AgentSessionSpec{SessionID: f.sessionID},
	}
	if ack != "" {
		s.Labels = map[string]string{ackLabel: ack}
	}
	Expect(k8s.Create(suiteCtx, s)).To(Succeed())
	f.api = apicount.New()
	agentCfg := f.api.Wrap(cfg)
	for _, w := range wrap {
		agentCfg.Wrap(w)
	}
	var err error
	f.agent, err = agentsdk.New(suiteCtx, agentsdk.Options{
		Config: agentCfg, Namespace: f.ns, Name: f.name, Store: store, SyncTimeout: 20 * time.Second,
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(f.agent.Close)
	return f
}

// patchStatus plays the manager: a merge patch of status.planMode.
func (f *fixture) patchStatus(planMode map[string]any) {
	body, err := json.Marshal(map[string]any{"status": map[string]any{"planMode": planMode}})
	Expect(err).NotTo(HaveOccurred())
	obj := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.name}}
	Expect(k8s.Status().Patch(suiteCtx, obj, client.RawPatch(types.MergePatchType, body), client.FieldOwner("planmode-manager"))).To(Succeed())
}

func (f *fixture) setSelection(active bool) {
	body := []byte(`{"spec":{"planMode":{"active":` + map[bool]string{true: "true", false: "false"}[active] + `}}}`)
	obj := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.name}}
	Expect(k8s.Patch(suiteCtx, obj, client.RawPatch(types.MergePatchType, body))).To(Succeed())
}

func (f *fixture) get() *v1alpha1.AgentSession {
	s := &v1alpha1.AgentSession{}
	Expect(k8s.Get(suiteCtx, types.NamespacedName{Namespace: f.ns, Name: f.name}, s)).To(Succeed())
	return s
}

func (f *fixture) events() []harness.Event {
	evs, err := store.ReadFrom(suiteCtx, f.sessionID, 0, 0)
	Expect(err).NotTo(HaveOccurred())
	return evs
}

func (f *fixture) tail() harness.Tail {
	t, err := store.Tail(suiteCtx, f.sessionID)
	Expect(err).NotTo(HaveOccurred())
	return t
}

func eventTypes(evs []harness.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
		if ev.Type == harness.TypeUserMessage && strings.Contains(string(ev.Data), `"form":"notice"`) {
			out[i] = "notice"
		}
	}
	return out
}

// askAtStepTwo runs step 1 of a new turn with nothing pending, selects plan mode and reports
// step 2's boundary, which must ask. It returns the turn, the log's next seq before the answer
// and the step's result.
func (f *fixture) askAtStepTwo() (turn, next int64, res agentsdk.Result) {
	turn, err := f.agent.StartTurn(suiteCtx)
	Expect(err).NotTo(HaveOccurred())
	res, err = f.agent.Boundary(suiteCtx, turn, 1, 5*time.Second)
	Expect(err).NotTo(HaveOccurred())
	Expect(f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{})).To(Succeed())
	Expect(f.agent.EndStep(suiteCtx, turn, 1)).To(Succeed())

	f.setSelection(true)
	f.waitUntilAsks()
	next = f.tail().NextSeq
	res, err = f.agent.Boundary(suiteCtx, turn, 2, 10*time.Second)
	Expect(err).NotTo(HaveOccurred())
	Expect(res.Asked).To(BeTrue())
	return turn, next, res
}

// waitUntilAsks waits until a boundary would ask the manager: a selection reached the watch.
func (f *fixture) waitUntilAsks() {
	Eventually(func() (bool, error) { return f.agent.WouldAsk(suiteCtx) }).
		WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(BeTrue())
}

var _ = Describe("Boundary", func() {
	It("makes no API write when nothing is pending and answers from the log", func() {
		f := setup(true)
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		Expect(turn).To(BeEquivalentTo(1))
		before := f.api.Writes()
		reads := f.api.Reads() // the initial lists and watches
		for step := int64(1); step <= 3; step++ {
			res, err := f.agent.Boundary(suiteCtx, turn, step, 5*time.Second)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Asked).To(BeFalse())
			Expect(res.Active).To(BeFalse())
			Expect(res.ExitAdmitted).To(BeFalse())
			Expect(res.Section).To(BeEmpty())
			Expect(res.Notice).To(BeEmpty())
			Expect(res.NextSeq).To(Equal(f.tail().NextSeq))
			Expect(f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{
				Messages: []harness.Event{agentsdk.UserText("go")},
				Header:   &harness.EpochHeader{Config: harness.LLMCallConfig{Provider: "p", Model: "m"}, System: "sys"},
			})).To(Succeed())
			Expect(f.agent.EndStep(suiteCtx, turn, step)).To(Succeed())
		}
		Expect(f.agent.EndTurn(suiteCtx, turn, harness.TurnCompleted)).To(Succeed())
		Expect(f.api.Writes()).To(BeZero(), "writes: %v", f.api.Breakdown())
		Expect(f.api.Writes() - before).To(BeZero())
		Expect(f.api.Reads()).To(Equal(reads), "no API read per step: the watch cache answers")
		Expect(f.get().Status.Agent).To(BeNil())
		// One header only (initial): later identical headers are not logged.
		Expect(eventTypes(f.events())).To(Equal([]string{
			"turn/start",
			"step/start", "user/message", "request/header", "step/end",
			"step/start", "user/message", "step/end",
			"step/start", "user/message", "step/end",
			"turn/end",
		}))
	})

	It("reports the boundary with one status write when a selection is pending, and waits for the answer", func() {
		f := setup(true)
		turn, next, res := f.askAtStepTwo()
		Expect(res.NextSeq).To(Equal(next)) // the floor appends nothing
		Expect(f.api.Writes()).To(BeEquivalentTo(1))
		Expect(f.api.WritesTo("PATCH", "agentsessions/status")).To(BeEquivalentTo(1))

		s := f.get()
		Expect(s.Status.Agent.Boundary).NotTo(BeNil())
		Expect(s.Status.Agent.Boundary.Turn).To(Equal(turn))
		Expect(s.Status.Agent.Boundary.Step).To(BeEquivalentTo(2))
		Expect(s.Status.Agent.Boundary.Seq).To(Equal(next))
		// The agent's field manager owns status.agent.boundary and nothing else.
		var owned string
		for _, mf := range s.ManagedFields {
			if mf.Manager == agentsdk.FieldManager {
				Expect(mf.Subresource).To(Equal("status"))
				owned += mf.FieldsV1.GetRawString()
			}
		}
		Expect(owned).To(ContainSubstring(`"f:boundary"`))
		Expect(owned).NotTo(ContainSubstring(`"f:planMode"`))

		// Answered: the next boundary has nothing pending and writes nothing.
		Expect(f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{})).To(Succeed())
		Expect(f.agent.EndStep(suiteCtx, turn, 2)).To(Succeed())
		res, err := f.agent.Boundary(suiteCtx, turn, 3, 5*time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Asked).To(BeFalse())
		Expect(f.api.Writes()).To(BeEquivalentTo(1))
	})

	It("sends the boundary report again when an overloaded API server answers 504, and is answered", func() {
		busy := &timeoutStatusWrites{left: 2}
		f := setupAnswered("floor", busy.wrap)
		_, next, res := f.askAtStepTwo()
		Expect(res.NextSeq).To(Equal(next))
		Expect(busy.refused.Load()).To(BeEquivalentTo(2), "two reports refused before one was taken")
		Expect(f.api.WritesTo("PATCH", "agentsessions/status")).To(BeEquivalentTo(1), "the report that reached the server")
		Expect(f.get().Status.Agent.Boundary.Seq).To(Equal(next))
	})

	It("starts with no discovery request and reads its watches uncompressed", func() {
		var (
			mu         sync.Mutex
			paths      []string
			compressed []string
		)
		record := func(next http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				resp, err := next.RoundTrip(req)
				mu.Lock()
				defer mu.Unlock()
				paths = append(paths, req.URL.Path)
				if err == nil && resp.Uncompressed { // the transport undid a gzip encoding
					compressed = append(compressed, req.URL.String())
				}
				return resp, err
			})
		}
		f := setupAnswered("floor", record)
		f.askAtStepTwo() // a report and its answer pass through the watch too
		mu.Lock()
		defer mu.Unlock()
		Expect(paths).To(ContainElement(HaveSuffix("/agentsessions")), "the session's list and watch")
		Expect(paths).To(ContainElement(HaveSuffix("/planmodeconfigs")))
		discovery := Or(Equal("/api"), Equal("/apis"), Equal("/apis/"+v1alpha1.GroupVersion.String()))
		Expect(paths).NotTo(ContainElement(discovery), "the two kinds are mapped without discovery")
		Expect(compressed).To(BeEmpty(), "one small object per event gains nothing from gzip")
	})

	It("is answered in the manager's status shape by the benchmark's size-matched floor, still with no log work", func() {
		f := setupAnswered("floor-manager-shape")
		_, next, res := f.askAtStepTwo()
		Expect(res.NextSeq).To(Equal(next)) // no append
		Expect(res.Notice).To(Equal(harness.NoticePlanOn))

		s := f.get()
		Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		Expect(ready).NotTo(BeNil())
		Expect(ready.ObservedGeneration).To(Equal(s.Generation))
		pm := s.Status.PlanMode
		Expect(pm.Config).NotTo(BeNil())
		Expect(pm.Config.SectionSHA256).To(HaveLen(16))
		Expect(pm.LastTransitionTime).NotTo(BeNil())
		Expect(pm.ToldActive).NotTo(BeNil())
		Expect(pm.Notice).To(Equal(&v1alpha1.OwedNotice{Seq: next, Text: harness.NoticePlanOn}))
		Expect(pm.LastBoundary.Notice).To(Equal(harness.NoticePlanOn))
		Expect(f.tail().NextSeq).To(Equal(next))
	})

	It("never waits longer than the bound: without an answer the step proceeds under the committed state (v2)", func() {
		f := setup(false)
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		f.patchStatus(map[string]any{"pending": true, "pendingActive": true, "pendingSource": "User"})
		f.waitUntilAsks()
		const wait = 300 * time.Millisecond
		start := time.Now()
		res, err := f.agent.Boundary(suiteCtx, turn, 1, wait)
		Expect(err).NotTo(HaveOccurred())
		// The bound plus one API round trip (the report), generously.
		Expect(time.Since(start)).To(BeNumerically("<", wait+time.Second))
		Expect(res.Asked).To(BeTrue())
		Expect(res.Unanswered).To(BeTrue())
		Expect(res.Active).To(BeFalse(), "the committed state, not the pending selection")
		Expect(res.NextSeq).To(BeEquivalentTo(1))
		Expect(f.get().Status.Agent.Boundary.Seq).To(BeEquivalentTo(1))
		// Asking again for the same boundary does not write the same report twice.
		res, err = f.agent.Boundary(suiteCtx, turn, 1, 200*time.Millisecond)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Unanswered).To(BeTrue())
		Expect(f.api.Writes()).To(BeEquivalentTo(1))
	})

	It("takes the manager's plan/mode and its notice when it wins the race for the step's seq after the wait (v2)", func() {
		f := setup(false)
		// Turn 1, step 1 in default mode with a header: the model was told "default".
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		res, err := f.agent.Boundary(suiteCtx, turn, 1, time.Second)
		Expect(err).NotTo(HaveOccurred())
		hdr := harness.EpochHeader{Config: harness.LLMCallConfig{Provider: "p", Model: "m"}, System: "base"}
		Expect(f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{Header: &hdr})).To(Succeed())
		Expect(f.agent.EndStep(suiteCtx, turn, 1)).To(Succeed())
		f.patchStatus(map[string]any{"pending": true, "pendingActive": true, "pendingSource": "User"})
		f.waitUntilAsks()
		res, err = f.agent.Boundary(suiteCtx, turn, 2, 200*time.Millisecond)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Unanswered).To(BeTrue())
		seq := res.NextSeq
		// The manager, back, appends plan/mode at the reported seq before the agent's step/start
		// (compare-and-swap: it wins); its answer is not written yet.
		_, err = store.Append(suiteCtx, f.sessionID, []harness.Event{{Type: "plan/mode", Seq: seq, Data: json.RawMessage(`{"active":true}`)}})
		Expect(err).NotTo(HaveOccurred())
		err = f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{Header: &hdr})
		Expect(err).To(MatchError(agentsdk.ErrLogChanged))
		start := time.Now()
		res, err = f.agent.Boundary(suiteCtx, turn, 2, 5*time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(time.Since(start)).To(BeNumerically("<", time.Second), "adopting the manager's plan/mode waits for nothing")
		Expect(res.Adopted).To(BeTrue())
		Expect(res.Active).To(BeTrue())
		Expect(res.Section).To(Equal(testSection))
		Expect(res.Notice).To(Equal(harness.NoticePlanOn), "the harness's narration: the last header said default")
		Expect(res.NextSeq).To(Equal(seq + 1))
		hdr.System = "base\n\n" + res.Section
		Expect(f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{Header: &hdr})).To(Succeed())
		Expect(eventTypes(f.events())).To(Equal([]string{
			"turn/start", "step/start", "request/header", "step/end",
			"plan/mode", "step/start", "notice", "request/header",
		}))
		Expect(f.api.Writes()).To(BeEquivalentTo(1), "one report, nothing else")
	})

	It("fails the proposal when the manager answers that its append failed, and asks again at the next boundary (v3)", func() {
		f := setup(false)
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		f.patchStatus(map[string]any{"pending": true, "pendingActive": true, "pendingSource": "User"})
		f.waitUntilAsks()
		type outcome struct {
			res agentsdk.Result
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			res, err := f.agent.Boundary(suiteCtx, turn, 1, 20*time.Second)
			done <- outcome{res, err}
		}()
		var b *v1alpha1.StepBoundary
		Eventually(func() *v1alpha1.StepBoundary {
			if a := f.get().Status.Agent; a != nil {
				b = a.Boundary
			}
			return b
		}).WithTimeout(10 * time.Second).ShouldNot(BeNil())
		const msg = "log store: unavailable; the selection stays pending for the next boundary"
		f.patchStatus(map[string]any{"lastBoundary": v1alpha1.BoundaryAck{
			Turn: b.Turn, Step: b.Step, Seq: b.Seq, Result: v1alpha1.BoundaryFailed, Reason: v1alpha1.ReasonLogStoreError,
			Message: msg, Time: metav1.Now(),
		}})
		var o outcome
		Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&o))
		var pf *agentsdk.ProposalFailedError
		Expect(errors.As(o.err, &pf)).To(BeTrue(), "got %v", o.err)
		Expect(pf.Reason).To(Equal(v1alpha1.ReasonLogStoreError))
		Expect(pf.Message).To(Equal(msg))
		Expect(f.events()).To(HaveLen(1), "nothing of the failed step is logged")
		// The selection is still pending: the next turn's first boundary asks again.
		Expect(f.agent.EndTurn(suiteCtx, turn, harness.TurnBlocked(o.err.Error()))).To(Succeed())
		turn2, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		ask, err := f.agent.WouldAsk(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		Expect(ask).To(BeTrue(), "the pending selection is asked for again")
		Expect(turn2).To(Equal(turn + 1))
	})

	It("fails the proposal with the manager's message when it refuses the report as invalid", func() {
		f := setup(false)
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		f.patchStatus(map[string]any{"pending": true, "pendingActive": true, "pendingSource": "User"})
		f.waitUntilAsks()
		type outcome struct {
			res agentsdk.Result
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			res, err := f.agent.Boundary(suiteCtx, turn, 1, 20*time.Second)
			done <- outcome{res, err}
		}()
		// Play the manager: answer the report it wrote.
		var b *v1alpha1.StepBoundary
		Eventually(func() *v1alpha1.StepBoundary {
			if a := f.get().Status.Agent; a != nil {
				b = a.Boundary
			}
			return b
		}).WithTimeout(10 * time.Second).ShouldNot(BeNil())
		f.patchStatus(map[string]any{"lastBoundary": v1alpha1.BoundaryAck{
			Turn: b.Turn, Step: b.Step, Seq: b.Seq, Result: v1alpha1.BoundaryFailed, Reason: v1alpha1.ReasonInvalidBoundary,
			Message: "invalid boundary report: status.agent.boundary.seq is 1, ahead", Time: metav1.Now(),
		}})
		var o outcome
		Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&o))
		Expect(o.err).To(MatchError(agentsdk.ErrProposalFailed))
		var pf *agentsdk.ProposalFailedError
		Expect(errors.As(o.err, &pf)).To(BeTrue())
		Expect(pf.Message).To(Equal("invalid boundary report: status.agent.boundary.seq is 1, ahead"))
		// The answer is final for that (turn, step, seq): no second report.
		_, err = f.agent.Boundary(suiteCtx, turn, 1, time.Second)
		Expect(err).To(MatchError(agentsdk.ErrProposalFailed))
		Expect(f.api.Writes()).To(BeEquivalentTo(1))
		// The agent ends the turn as blocked.
		Expect(f.agent.EndTurn(suiteCtx, turn, harness.TurnBlocked(pf.Message))).To(Succeed())
		Expect(eventTypes(f.events())).To(Equal([]string{"turn/start", "turn/end"}))
	})

	It("takes the committed state, section and notice from an Admitted acknowledgement", func() {
		f := setup(false)
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		res, err := f.agent.Boundary(suiteCtx, turn, 1, time.Second)
		Expect(err).NotTo(HaveOccurred())
		hdr := harness.EpochHeader{Config: harness.LLMCallConfig{Provider: "p", Model: "m"}, System: "base"}
		Expect(f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{Messages: []harness.Event{agentsdk.UserText("hi")}, Header: &hdr})).To(Succeed())
		Expect(f.agent.EndStep(suiteCtx, turn, 1)).To(Succeed())
		f.patchStatus(map[string]any{"pending": true, "pendingActive": true, "pendingSource": "User"})
		f.waitUntilAsks()
		done := make(chan agentsdk.Result, 1)
		go func() {
			defer GinkgoRecover()
			res, err := f.agent.Boundary(suiteCtx, turn, 2, 20*time.Second)
			Expect(err).NotTo(HaveOccurred())
			done <- res
		}()
		var b *v1alpha1.StepBoundary
		Eventually(func() *v1alpha1.StepBoundary {
			if a := f.get().Status.Agent; a != nil {
				b = a.Boundary
			}
			return b
		}).WithTimeout(10 * time.Second).ShouldNot(BeNil())
		// Play the manager: append plan/mode at the reported seq, then acknowledge.
		_, err = store.Append(suiteCtx, f.sessionID, []harness.Event{{Type: "plan/mode", Seq: b.Seq, Data: json.RawMessage(`{"active":true}`)}})
		Expect(err).NotTo(HaveOccurred())
		f.patchStatus(map[string]any{"pending": false, "active": true, "nextSeq": b.Seq + 1, "lastBoundary": v1alpha1.BoundaryAck{
			Turn: b.Turn, Step: b.Step, Seq: b.Seq, Result: v1alpha1.BoundaryAdmitted, Active: true,
			NextSeq: b.Seq + 1, Notice: harness.NoticePlanOn, Time: metav1.Now(),
		}})
		var res2 agentsdk.Result
		Eventually(done).WithTimeout(10 * time.Second).Should(Receive(&res2))
		Expect(res2.Active).To(BeTrue())
		Expect(res2.ExitAdmitted).To(BeTrue())
		Expect(res2.Section).To(Equal(testSection))
		Expect(res2.Notice).To(Equal(harness.NoticePlanOn))
		Expect(res2.NextSeq).To(Equal(b.Seq + 1))
		hdr.System = "base\n\n" + res2.Section
		Expect(f.agent.StartStep(suiteCtx, res2, agentsdk.StepInput{Messages: []harness.Event{agentsdk.UserText("steered")}, Header: &hdr})).To(Succeed())
		Expect(eventTypes(f.events())).To(Equal([]string{
			"turn/start", "step/start", "user/message", "request/header", "step/end",
			"plan/mode", "step/start", "user/message", "notice", "request/header",
		}))
		evs := f.events()
		var um struct {
			Content []harness.ContentBlock `json:"content"`
			Source  harness.MessageSource  `json:"source"`
			Role    string                 `json:"role"`
			ID      string                 `json:"id"`
		}
		Expect(json.Unmarshal(evs[8].Data, &um)).To(Succeed())
		Expect(um.Source).To(Equal(harness.MessageSource{Kind: "plugin", Plugin: "plan-mode", Form: "notice", Summary: harness.NoticePlanOn}))
		Expect(um.Content).To(Equal([]harness.ContentBlock{{Type: "text", Text: harness.NoticePlanOn}}))
		Expect(um.Role).To(Equal("user"))
		Expect(string(evs[8].SurfaceOp)).To(Equal(`"append"`))
		Expect(string(evs[9].Data)).To(ContainSubstring(`"reason":"change"`))
		Expect(string(evs[9].Data)).To(ContainSubstring("You are in plan mode."))
	})

	It("records a notice owed by a between-turns commit with no API write", func() {
		f := setup(false)
		// Turn 1 in default mode, with a header (the model was told "default").
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		res, err := f.agent.Boundary(suiteCtx, turn, 1, time.Second)
		Expect(err).NotTo(HaveOccurred())
		hdr := harness.EpochHeader{Config: harness.LLMCallConfig{Provider: "p", Model: "m"}, System: "base"}
		Expect(f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{Header: &hdr})).To(Succeed())
		Expect(f.agent.EndStep(suiteCtx, turn, 1)).To(Succeed())
		Expect(f.agent.EndTurn(suiteCtx, turn, harness.TurnCompleted)).To(Succeed())
		// Play the manager between turns: commit plan/mode, publish the owed notice.
		seq := f.tail().NextSeq
		_, err = store.Append(suiteCtx, f.sessionID, []harness.Event{{Type: "plan/mode", Seq: seq, Data: json.RawMessage(`{"active":true}`)}})
		Expect(err).NotTo(HaveOccurred())
		f.patchStatus(map[string]any{"active": true, "selection": true, "nextSeq": seq + 1,
			"notice": map[string]any{"seq": seq, "text": harness.NoticePlanOn}})
		f.setSelection(true)
		Eventually(func() bool {
			s := f.agent.Session()
			return s.Status.PlanMode.Notice != nil && s.Spec.PlanMode.Active != nil
		}).
			WithTimeout(10 * time.Second).Should(BeTrue())

		turn, err = f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		Expect(turn).To(BeEquivalentTo(2))
		res, err = f.agent.Boundary(suiteCtx, turn, 1, time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Asked).To(BeFalse())
		Expect(res.Active).To(BeTrue())
		Expect(res.Notice).To(Equal(harness.NoticePlanOn))
		Expect(res.Section).To(Equal(testSection))
		Expect(f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{Messages: []harness.Event{agentsdk.UserText("explore")}})).To(Succeed())
		Expect(f.agent.EndStep(suiteCtx, turn, 1)).To(Succeed())
		// Owed once: the second step has no notice.
		res, err = f.agent.Boundary(suiteCtx, turn, 2, time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Notice).To(BeEmpty())
		Expect(res.Active).To(BeTrue())
		Expect(f.api.Writes()).To(BeZero())
	})

	It("asks when the log has a plan/mode the status does not cover yet", func() {
		f := setup(true)
		seq := f.tail().NextSeq
		_, err := store.Append(suiteCtx, f.sessionID, []harness.Event{{Type: "plan/mode", Seq: seq, Data: json.RawMessage(`{"active":true}`)}})
		Expect(err).NotTo(HaveOccurred())
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		res, err := f.agent.Boundary(suiteCtx, turn, 1, 10*time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Asked).To(BeTrue())
		Expect(res.Active).To(BeTrue())
		Expect(f.api.Writes()).To(BeEquivalentTo(1))
	})

	It("refuses a boundary outside an open turn without writing", func() {
		f := setup(true)
		_, err := f.agent.Boundary(suiteCtx, 1, 1, time.Second)
		Expect(err).To(MatchError(agentsdk.ErrInvalidBoundary))
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		_, err = f.agent.Boundary(suiteCtx, turn+1, 1, time.Second)
		Expect(err).To(MatchError(agentsdk.ErrInvalidBoundary))
		res, err := f.agent.Boundary(suiteCtx, turn, 1, time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{})).To(Succeed())
		_, err = f.agent.Boundary(suiteCtx, turn, 2, time.Second)
		Expect(err).To(MatchError(ContainSubstring("still open")))
		Expect(f.api.Writes()).To(BeZero())
	})

	It("runs a plan-mode step whose PlanModeConfig is missing, with the guidance it last saw (v2)", func() {
		f := setup(false)
		f.patchStatus(map[string]any{"config": map[string]any{"name": "strict"}})
		seq := f.tail().NextSeq
		_, err := store.Append(suiteCtx, f.sessionID, []harness.Event{{Type: "plan/mode", Seq: seq, Data: json.RawMessage(`{"active":true}`)}})
		Expect(err).NotTo(HaveOccurred())
		f.patchStatus(map[string]any{"active": true, "nextSeq": seq + 1})
		Eventually(func() int64 { return f.agent.Session().Status.PlanMode.NextSeq }).WithTimeout(10 * time.Second).Should(Equal(seq + 1))
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		// Never seen: plan mode without a section, and the step says so.
		res, err := f.agent.Boundary(suiteCtx, turn, 1, time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Active).To(BeTrue())
		Expect(res.ExitAdmitted).To(BeTrue())
		Expect(res.GuidanceMissing).To(BeTrue())
		Expect(res.Section).To(BeEmpty())
		// Created: the watch delivers it and the step gets its text.
		cfgObj := &v1alpha1.PlanModeConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "strict"},
			Spec:       v1alpha1.PlanModeConfigSpec{Section: "strict guidance"},
		}
		Expect(k8s.Create(suiteCtx, cfgObj)).To(Succeed())
		Eventually(func() (string, error) {
			res, err := f.agent.Boundary(suiteCtx, turn, 1, time.Second)
			return res.Section, err
		}).WithTimeout(10 * time.Second).Should(Equal("strict guidance"))
		// Deleted again: the step keeps the text it last saw.
		Expect(k8s.Delete(suiteCtx, cfgObj)).To(Succeed())
		Eventually(func() (bool, error) {
			res, err := f.agent.Boundary(suiteCtx, turn, 1, time.Second)
			return res.GuidanceMissing && res.Section == "strict guidance", err
		}).WithTimeout(10 * time.Second).Should(BeTrue())
	})
})

var _ = Describe("log helpers", func() {
	It("re-sequences turn/end after a plan/mode the manager appended late, and refuses a foreign writer", func() {
		f := setup(false)
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		// A late boundary answer appended plan/mode where the agent's turn/end would go.
		seq := f.agent.NextSeq()
		_, err = store.Append(suiteCtx, f.sessionID, []harness.Event{{Type: "plan/mode", Seq: seq, Data: json.RawMessage(`{"active":true}`)}})
		Expect(err).NotTo(HaveOccurred())
		Expect(f.agent.EndTurn(suiteCtx, turn, harness.TurnBlocked("timeout"))).To(Succeed())
		Expect(eventTypes(f.events())).To(Equal([]string{"turn/start", "plan/mode", "turn/end"}))

		// Another writer's turn/start is not the manager's: refused, nothing appended.
		turn, err = f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		seq = f.agent.NextSeq()
		ev := agentsdk.UserText("intruder")
		ev.Seq = seq
		_, err = store.Append(suiteCtx, f.sessionID, []harness.Event{ev})
		Expect(err).NotTo(HaveOccurred())
		err = f.agent.EndTurn(suiteCtx, turn, harness.TurnCompleted)
		Expect(err).To(MatchError(agentsdk.ErrLogChanged))
		Expect(f.tail().NextSeq).To(Equal(seq + 1))
	})

	It("does not re-sequence step/start: the boundary decided its position", func() {
		f := setup(false)
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		res, err := f.agent.Boundary(suiteCtx, turn, 1, time.Second)
		Expect(err).NotTo(HaveOccurred())
		_, err = store.Append(suiteCtx, f.sessionID, []harness.Event{{Type: "plan/mode", Seq: res.NextSeq, Data: json.RawMessage(`{"active":true}`)}})
		Expect(err).NotTo(HaveOccurred())
		err = f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{})
		Expect(err).To(MatchError(agentsdk.ErrLogChanged))
		Expect(sessionlog.IsConflict(err)).To(BeTrue())
	})

	It("logs request/header only when it changes, with reason initial then change", func() {
		f := setup(true)
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		res, err := f.agent.Boundary(suiteCtx, turn, 1, time.Second)
		Expect(err).NotTo(HaveOccurred())
		h := harness.EpochHeader{Config: harness.LLMCallConfig{Provider: "p", Model: "m"}, System: "a"}
		Expect(f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{Header: &h})).To(Succeed())
		// A request-recovery retry reuses the frozen assembly: nothing logged.
		logged, err := f.agent.LogRequest(suiteCtx, h)
		Expect(err).NotTo(HaveOccurred())
		Expect(logged).To(BeFalse())
		h.System = "b"
		logged, err = f.agent.LogRequest(suiteCtx, h)
		Expect(err).NotTo(HaveOccurred())
		Expect(logged).To(BeTrue())
		evs := f.events()
		Expect(eventTypes(evs)).To(Equal([]string{"turn/start", "step/start", "request/header", "request/header"}))
		Expect(string(evs[2].Data)).To(ContainSubstring(`"reason":"initial"`))
		Expect(string(evs[3].Data)).To(ContainSubstring(`"reason":"change"`))

		// A new client on the same session resumes: its first header has reason resume.
		again, err := agentsdk.New(suiteCtx, agentsdk.Options{Config: cfg, Namespace: f.ns, Name: f.name, Store: store})
		Expect(err).NotTo(HaveOccurred())
		defer again.Close()
		Expect(again.Resumed()).To(BeTrue())
		logged, err = again.LogRequest(suiteCtx, h)
		Expect(err).NotTo(HaveOccurred())
		Expect(logged).To(BeTrue())
		evs = f.events()
		Expect(string(evs[len(evs)-1].Data)).To(ContainSubstring(`"reason":"resume"`))
	})

	It("asks the API server for watches of WatchTimeout to twice it, and client-go's 5 to 10 minutes without it", func() {
		// The timeoutSeconds of every watch the agent starts, by resource.
		watches := func(o agentsdk.Options) map[string][]int64 {
			var mu sync.Mutex
			got := map[string][]int64{}
			o.Config = rest.CopyConfig(cfg)
			o.Config.Wrap(func(next http.RoundTripper) http.RoundTripper {
				return roundTripFunc(func(req *http.Request) (*http.Response, error) {
					if q := req.URL.Query(); q.Get("watch") == "true" {
						secs, err := strconv.ParseInt(q.Get("timeoutSeconds"), 10, 64)
						if err != nil {
							secs = -1 // none: fails the range checks below
						}
						mu.Lock()
						got[path.Base(req.URL.Path)] = append(got[path.Base(req.URL.Path)], secs)
						mu.Unlock()
					}
					return next.RoundTrip(req)
				})
			})
			c, err := agentsdk.New(suiteCtx, o)
			Expect(err).NotTo(HaveOccurred())
			c.Close()
			mu.Lock()
			defer mu.Unlock()
			return got
		}
		f := setup(false)
		o := agentsdk.Options{Namespace: f.ns, Name: f.name, Store: store, SyncTimeout: 20 * time.Second}
		between := func(lo, hi time.Duration) gomegatypes.GomegaMatcher {
			return And(HaveLen(1), HaveEach(And(BeNumerically(">=", int64(lo/time.Second)), BeNumerically("<", int64(hi/time.Second)))))
		}
		def := watches(o)
		Expect(def).To(HaveKeyWithValue("agentsessions", between(5*time.Minute, 10*time.Minute)))
		Expect(def).To(HaveKeyWithValue("planmodeconfigs", between(5*time.Minute, 10*time.Minute)))
		o.WatchTimeout = 30 * time.Minute
		long := watches(o)
		Expect(long).To(HaveKeyWithValue("agentsessions", between(30*time.Minute, time.Hour)))
		Expect(long).To(HaveKeyWithValue("planmodeconfigs", between(30*time.Minute, time.Hour)))

		o.Config, o.WatchTimeout = cfg, time.Minute
		_, err := agentsdk.New(suiteCtx, o)
		Expect(err).To(MatchError("agentsdk: Options.WatchTimeout is 1m0s; use 0 (client-go's default, 5m0s) or at least 5m0s"))
	})

	It("refuses options that do not name a session", func() {
		_, err := agentsdk.New(context.Background(), agentsdk.Options{Config: cfg, Store: store, Namespace: "x"})
		Expect(err).To(MatchError(ContainSubstring("Options.Namespace and Options.Name")))
		ns := newNamespace()
		_, err = agentsdk.New(suiteCtx, agentsdk.Options{Config: cfg, Store: store, Namespace: ns, Name: "missing", SyncTimeout: 5 * time.Second})
		Expect(err).To(MatchError(agentsdk.ErrSessionNotFound))
	})

	It("refuses to start on a log another AgentSession owns (one log per session)", func() {
		f := setup(true) // its agent has claimed the log
		ns := newNamespace()
		Expect(k8s.Create(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: f.name},
			Spec: v1alpha1.AgentSessionSpec{SessionID: f.sessionID}})).To(Succeed())
		before, err := store.Tail(suiteCtx, f.sessionID)
		Expect(err).NotTo(HaveOccurred())
		_, err = agentsdk.New(suiteCtx, agentsdk.Options{Config: cfg, Store: store, Namespace: ns, Name: f.name, SyncTimeout: 5 * time.Second})
		Expect(err).To(MatchError(agentsdk.ErrSessionIDInUse))
		Expect(err).To(MatchError(ContainSubstring("create it with a spec.sessionID of its own")))
		after, err := store.Tail(suiteCtx, f.sessionID)
		Expect(err).NotTo(HaveOccurred())
		Expect(after).To(Equal(before), "the refused agent wrote to the log")
		again, err := agentsdk.New(suiteCtx, agentsdk.Options{Config: cfg, Store: store, Namespace: f.ns, Name: f.name, SyncTimeout: 5 * time.Second})
		Expect(err).NotTo(HaveOccurred(), "the owner's next agent process starts")
		again.Close()
	})
})

var _ = Describe("the message queue", func() {
	It("delivers two messages queued before the first was delivered, each once, in order; a restarted agent repeats none", func() {
		f := setup(true)
		obj := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.name}}
		Expect(k8s.Patch(suiteCtx, obj, client.RawPatch(types.MergePatchType,
			[]byte(`{"spec":{"steerQueue":[{"id":"q1","text":"first"},{"id":"q2","text":"second"}]}}`)))).To(Succeed())
		Eventually(func() int { return len(f.agent.PendingMessages()) }).WithTimeout(10 * time.Second).Should(Equal(2))
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		res, err := f.agent.Boundary(suiteCtx, turn, 1, time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Messages).To(HaveLen(2))
		Expect(f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{Messages: []harness.Event{agentsdk.UserText("prompt")}})).To(Succeed())
		Expect(f.agent.EndStep(suiteCtx, turn, 1)).To(Succeed())
		evs := f.events()
		Expect(eventTypes(evs)).To(Equal([]string{"turn/start", "step/start", "user/message", "user/message", "user/message", "step/end"}))
		Expect(string(evs[3].Data)).To(ContainSubstring(`"text":"first"`))
		Expect(string(evs[4].Data)).To(ContainSubstring(`"text":"second"`))
		Expect(f.get().Status.Agent.SteerID).To(Equal("q2"))
		res, err = f.agent.Boundary(suiteCtx, turn, 2, time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Messages).To(BeEmpty(), "delivered once")

		// A third message, written the way kubectl plan message writes it (recorded ones dropped).
		Expect(k8s.Patch(suiteCtx, obj, client.RawPatch(types.MergePatchType,
			[]byte(`{"spec":{"steerQueue":[{"id":"q3","text":"third"}]}}`)))).To(Succeed())
		Eventually(func() int { return len(f.agent.PendingMessages()) }).WithTimeout(10 * time.Second).Should(Equal(1))
		// A new agent process (a restart) sees only the undelivered one.
		again, err := agentsdk.New(suiteCtx, agentsdk.Options{Config: cfg, Namespace: f.ns, Name: f.name, Store: store, SyncTimeout: 20 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		defer again.Close()
		Expect(again.PendingMessages()).To(Equal([]v1alpha1.SteerMessage{{ID: "q3", Text: "third"}}))
	})
})

var _ = Describe("messages with images", func() {
	It("records a queued message's images before its text as the harness's image blocks, reads their bytes by content address, and the API refuses a message with neither", func() {
		f := setup(true)
		data := []byte("\x89PNG not really, the SDK checks only the digest")
		sum := sha256.Sum256(data)
		id := "sha256:" + hex.EncodeToString(sum[:])
		Expect(k8s.Create(suiteCtx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: v1alpha1.ImageConfigMapName(id)},
			BinaryData: map[string][]byte{v1alpha1.ImageDataKey: data}})).To(Succeed())
		obj := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.name}}
		err := k8s.Patch(suiteCtx, obj, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"steerQueue":[{"id":"empty"}]}}`)))
		Expect(err).To(MatchError(ContainSubstring("a message needs text or at least one image")))
		img := `{"attachmentId":"` + id + `","mediaType":"image/png","width":3,"height":2,"bytes":` + strconv.Itoa(len(data)) + `,"name":"mockup.png"}`
		Expect(k8s.Patch(suiteCtx, obj, client.RawPatch(types.MergePatchType, []byte(
			`{"spec":{"steerQueue":[{"id":"i1","text":"like this","images":[`+img+`]},{"id":"i2","images":[`+img+`]}]}}`)))).To(Succeed())
		Eventually(func() int { return len(f.agent.PendingMessages()) }).WithTimeout(10 * time.Second).Should(Equal(2))

		pending := f.agent.PendingMessages()
		got, err := f.agent.ImageData(suiteCtx, pending[0].Images[0])
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(Equal(data))
		other := pending[0].Images[0]
		other.AttachmentID = "sha256:" + strings.Repeat("0", 64)
		_, err = f.agent.ImageData(suiteCtx, other)
		Expect(err).To(MatchError(ContainSubstring("not found")), "an image never stored is an error")

		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		res, err := f.agent.Boundary(suiteCtx, turn, 1, time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{})).To(Succeed())
		Expect(f.agent.EndStep(suiteCtx, turn, 1)).To(Succeed())
		evs := f.events()
		Expect(eventTypes(evs)).To(Equal([]string{"turn/start", "step/start", "user/message", "user/message", "step/end"}))
		block := `{"type":"image","attachment":` + img + `}`
		Expect(string(evs[2].Data)).To(HavePrefix(`{"content":[` + block + `,{"type":"text","text":"like this"}],"source":{"kind":"user"},"role":"user","id":`))
		Expect(string(evs[3].Data)).To(HavePrefix(`{"content":[`+block+`],"source":{"kind":"user"},"role":"user","id":`), "an image-only message has no text block")
		Expect(f.get().Status.Agent.SteerID).To(Equal("i2"))
	})
})

var _ = Describe("CloseInterrupted", func() {
	It("closes a turn an earlier process left open, once", func() {
		f := setup(true)
		turn, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		res, err := f.agent.Boundary(suiteCtx, turn, 1, time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(f.agent.StartStep(suiteCtx, res, agentsdk.StepInput{})).To(Succeed())
		// The process dies here; a new one starts on the same session.
		again, err := agentsdk.New(suiteCtx, agentsdk.Options{Config: cfg, Namespace: f.ns, Name: f.name, Store: store})
		Expect(err).NotTo(HaveOccurred())
		defer again.Close()
		_, err = again.StartTurn(suiteCtx)
		Expect(err).To(MatchError(ContainSubstring("still open")))
		closed, err := again.CloseInterrupted(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		Expect(closed).To(BeTrue())
		evs := f.events()
		Expect(eventTypes(evs)).To(Equal([]string{"turn/start", "step/start", "step/end", "turn/end"}))
		Expect(string(evs[3].Data)).To(Equal(`{"turn":1,"reason":{"kind":"interrupted"}}`))
		closed, err = again.CloseInterrupted(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		Expect(closed).To(BeFalse())
		turn, err = again.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		Expect(turn).To(BeEquivalentTo(2))
	})
})

var _ = Describe("least privilege", func() {
	It("works under a per-agent Role limited to its own AgentSession by resourceNames", func() {
		f := setup(true)
		f.agent.Close()
		sa := "planmode-agent-" + f.name
		Expect(k8s.Create(suiteCtx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: sa}})).To(Succeed())
		Expect(k8s.Create(suiteCtx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: sa},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"agentsessions"}, ResourceNames: []string{f.name}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"agentsessions/status"}, ResourceNames: []string{f.name}, Verbs: []string{"patch"}},
				{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"planmodeconfigs"}, Verbs: []string{"get", "list", "watch"}},
			},
		})).To(Succeed())
		Expect(k8s.Create(suiteCtx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: f.ns, Name: sa}},
		})).To(Succeed())
		as := rest.CopyConfig(cfg)
		as.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + f.ns + ":" + sa}
		var agent *agentsdk.Client
		// RBAC bindings take effect asynchronously in the authorizer's cache.
		Eventually(func() error {
			c, err := agentsdk.New(suiteCtx, agentsdk.Options{Config: as, Namespace: f.ns, Name: f.name, Store: store, SyncTimeout: 3 * time.Second})
			agent = c
			return err
		}).WithTimeout(20 * time.Second).Should(Succeed())
		defer agent.Close()
		turn, err := agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		res, err := agent.Boundary(suiteCtx, turn, 1, 5*time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(agent.StartStep(suiteCtx, res, agentsdk.StepInput{})).To(Succeed())
		Expect(agent.EndStep(suiteCtx, turn, 1)).To(Succeed())
		f.setSelection(true)
		Eventually(func() bool { s := agent.Session(); return s != nil && s.Spec.PlanMode.Active != nil }).WithTimeout(10 * time.Second).Should(BeTrue())
		res, err = agent.Boundary(suiteCtx, turn, 2, 10*time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Asked).To(BeTrue())

		// The same identity cannot read another session.
		other := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "other"}, Spec: v1alpha1.AgentSessionSpec{SessionID: "other-" + f.sessionID}}
		Expect(k8s.Create(suiteCtx, other)).To(Succeed())
		_, err = agentsdk.New(suiteCtx, agentsdk.Options{Config: as, Namespace: f.ns, Name: "other", Store: store, SyncTimeout: 2 * time.Second})
		Expect(err).To(HaveOccurred())
	})
})

// racingStore lets the "manager" commit a plan/mode between the agent's tail read and its
// append, once, to make the turn/start race deterministic.
type racingStore struct {
	sessionlog.Store
	race func()
}

func (r *racingStore) Append(ctx context.Context, id string, evs []harness.Event) (harness.Tail, error) {
	if r.race != nil && len(evs) > 0 && evs[0].Type == harness.TypeTurnStart {
		race := r.race
		r.race = nil
		race()
	}
	return r.Store.Append(ctx, id, evs)
}

var _ = Describe("turn/start racing a between-turns commit", func() {
	It("re-reads the tail and re-sequences turn/start after the manager's plan/mode", func() {
		f := setup(false)
		rs := &racingStore{Store: store}
		agent, err := agentsdk.New(suiteCtx, agentsdk.Options{Config: cfg, Namespace: f.ns, Name: f.name, Store: rs})
		Expect(err).NotTo(HaveOccurred())
		defer agent.Close()
		rs.race = func() {
			t := f.tail()
			_, err := store.Append(suiteCtx, f.sessionID, []harness.Event{{Type: "plan/mode", Seq: t.NextSeq, Data: json.RawMessage(`{"active":true}`)}})
			Expect(err).NotTo(HaveOccurred())
		}
		turn, err := agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		Expect(turn).To(BeEquivalentTo(1))
		Expect(rs.race).To(BeNil(), "the race ran")
		Expect(eventTypes(f.events())).To(Equal([]string{"plan/mode", "turn/start"}))
		Expect(agent.NextSeq()).To(BeEquivalentTo(2))
	})
})

// timeoutStatusWrites answers the first `left` status PATCHes itself as an API server does a
// write it could not finish in time (504 Timeout, no Retry-After, so client-go does not resend
// it), and passes everything else on.
type timeoutStatusWrites struct {
	mu      sync.Mutex
	left    int
	refused atomic.Int32
}

func (t *timeoutStatusWrites) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		t.mu.Lock()
		refuse := req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/status") && t.left > 0
		if refuse {
			t.left--
		}
		t.mu.Unlock()
		if !refuse {
			return next.RoundTrip(req)
		}
		t.refused.Add(1)
		if req.Body != nil {
			_ = req.Body.Close()
		}
		body, _ := json.Marshal(apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0).Status())
		return &http.Response{
			StatusCode: http.StatusGatewayTimeout, Status: "504 Gateway Timeout", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:  http.Header{"Content-Type": []string{"application/json"}},
			Body:    io.NopCloser(bytes.NewReader(body)),
			Request: req, ContentLength: int64(len(body)),
		}, nil
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
