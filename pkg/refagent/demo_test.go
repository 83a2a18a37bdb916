package refagent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
	"github.com/harness-dev/planmode-operator/pkg/refagent"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// make run's demo agent behaves like a user's agent: a short first turn, then idle until a
// message; a plan presented only in plan mode (never an exit_plan_mode call the step did not
// declare), presented again after keep-planning, and the turn ends once approved.
var _ = Describe("the demo script (cmd/refagent/demo.txt)", func() {
	It("idles between messages and presents a plan only in plan mode", func() {
		root, err := framework.ModuleRoot()
		Expect(err).NotTo(HaveOccurred())
		f, err := os.Open(filepath.Join(root, "cmd", "refagent", "demo.txt"))
		Expect(err).NotTo(HaveOccurred())
		script, err := refagent.ParseScript(f)
		_ = f.Close()
		Expect(err).NotTo(HaveOccurred())

		e := newEnv("sqlite")
		a := e.newAgent("demo", nil)
		ctx, stop := waitContext()
		defer stop()
		done := make(chan error, 1)
		go func() {
			_, err := refagent.Run(ctx, refagent.Options{Client: a.c, Script: script, WaitForMessages: true, BoundaryTimeout: wait})
			done <- err
		}()

		By("a short first turn, then nothing until a message")
		Eventually(func() bool { t := a.tail(); return t.Turn == 1 && !t.TurnOpen }).WithTimeout(wait).Should(BeTrue())
		idle := a.tail().NextSeq
		Consistently(func() int64 { return a.tail().NextSeq }).WithTimeout(3*time.Second).Should(Equal(idle), "an idle agent appends nothing")

		message := func(id, text string, planOn bool) {
			patch := fmt.Sprintf(`{"spec":{"steerQueue":[{"id":%q,"text":%q}]}}`, id, text)
			if planOn {
				patch = fmt.Sprintf(`{"spec":{"planMode":{"active":true},"steerQueue":[{"id":%q,"text":%q}]}}`, id, text)
			}
			obj := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: a.name}}
			Expect(k8s.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
		}

		By("a message with plan mode off: a turn of work, no plan")
		message("m1", "tidy the README", false)
		Eventually(func() bool { t := a.tail(); return t.Turn == 2 && !t.TurnOpen }).WithTimeout(wait).Should(BeTrue())
		Expect(count(a.events(), harness.TypeToolCall)).To(Equal(3), "the first turn's read and two in the message's turn, no exit_plan_mode")
		Expect(a.get().Status.Agent.Review).To(BeNil())

		By("a message entering plan mode: the plan is presented and awaits review")
		message("m2", "propose the next change", true)
		// review waits for a plan other than the one named before to await a decision.
		review := func(before string) *v1alpha1.PlanReviewRequest {
			var r *v1alpha1.PlanReviewRequest
			Eventually(func() string {
				s := a.get()
				if s.Status.Agent == nil || s.Status.Agent.Review == nil || s.Status.Review == nil || s.Status.Review.ID != s.Status.Agent.Review.ID ||
					s.Status.Review.Phase != v1alpha1.ReviewPending || s.Status.Review.ID == before {
					return ""
				}
				r = s.Status.Agent.Review
				return r.ID
			}).WithTimeout(wait).ShouldNot(BeEmpty())
			return r
		}
		decide := func(r *v1alpha1.PlanReviewRequest, d v1alpha1.ReviewDecisionType, extra string) {
			patch := fmt.Sprintf(`{"spec":{%s"review":{"reviewID":%q,"decision":%q,"planSHA256":%q}}}`, extra, r.ID, d, planmode.PlanSHA256(r.Plan))
			obj := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: a.name}}
			Expect(k8s.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
		}
		first := review("")
		Expect(planmode.PlanTitle(first.Plan)).To(Equal("Demo plan"))
		decide(first, v1alpha1.ReviewKeepPlanning, "")
		second := review(first.ID)
		Expect(planmode.PlanTitle(second.Plan)).To(Equal("Demo plan, revised"))
		decide(second, v1alpha1.ReviewApprove, `"planMode":{"active":false},`)
		Eventually(func() bool { t := a.tail(); return t.Turn == 3 && !t.TurnOpen && !t.Active }).WithTimeout(wait).Should(BeTrue(),
			"approved: the turn ends out of plan mode")

		evs := a.events()
		Expect(find(evs, harness.TypeToolCall, harness.ExitToolName)).To(BeNumerically(">", find(evs, "plan/mode=true", "")))
		for _, ev := range evs {
			Expect(string(ev.Data)).NotTo(ContainSubstring("UNKNOWN_TOOL"), "an exit_plan_mode call the step did not declare")
		}
		stop()
		Eventually(done).WithTimeout(wait).Should(Receive(BeNil()))
	})
})
