package kubectlplan_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/plancli"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// rows maps a table's rows by NAME to their cells, AGE left out. Cells are cut at the columns'
// offsets in the header: an unset field is an empty cell, as kubectl prints it.
func rows(table string) (header []string, byName map[string][]string) {
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	header = strings.Fields(lines[0])
	starts := make([]int, len(header))
	for i, h := range header {
		starts[i] = strings.Index(lines[0], h)
	}
	byName = map[string][]string{}
	for _, l := range lines[1:] {
		cells := make([]string, 0, len(header)-1)
		for i := 0; i < len(header)-1; i++ {
			end := min(starts[i+1], len(l))
			cells = append(cells, strings.TrimSpace(l[min(starts[i], len(l)):end]))
		}
		byName[cells[0]] = cells
	}
	return header, byName
}

// One vocabulary: kubectl plan list prints the columns of kubectl get agentsessions with the
// same headers and the same values for sessions in every state, kubectl plan status and its -o
// json say the same, and docs/kubectl-plan.md defines those words.
var _ = Describe("one vocabulary for the plan state, the pending plan mode and the review", func() {
	It("kubectl get, kubectl plan list, kubectl plan status and the docs agree", func() {
		fresh := newSession("v-fresh")
		on := newSession("v-on")
		Expect(kplan("on", on.name).OK()).To(ContainSubstring("Plan mode on."))
		entering := newSession("v-entering")
		entering.StartTurn()
		entering.NextStep()
		Expect(kplan("on", entering.name).OK()).To(ContainSubstring("Entering plan mode (applies from the next step)"))
		reviewing := newSession("v-review")
		Expect(kplan("on", reviewing.name).OK()).To(ContainSubstring("Plan mode on."))
		reviewing.StartTurn()
		reviewing.NextStep()
		exited := reviewing.CallExit("# Tidy the README\n\n1. Fix the heading.\n")
		Expect(kplan("review", reviewing.name, "--wait=30s").OK()).To(ContainSubstring("Tidy the README"))
		revised := newSession("v-revised")
		Expect(kplan("on", revised.name).OK()).To(ContainSubstring("Plan mode on."))
		revised.StartTurn()
		revised.NextStep()
		sentBack := revised.CallExit("# First draft\n")
		kplan("review", revised.name, "--wait=30s").OK()
		Expect(kplan("revise", revised.name, "more", "detail").OK()).To(ContainSubstring("back with your feedback"))
		Eventually(sentBack).Should(Receive(HaveField("Logged", BeNil())))

		want := map[string][]string{
			fresh.name:     {fresh.name, "false", "", "", "", "True"},
			on.name:        {on.name, "true", "", "true", "", "True"},
			entering.name:  {entering.name, "false", "true", "true", "", "False"},
			reviewing.name: {reviewing.name, "true", "", "true", string(agentsv1alpha1.ReviewPending), "True"},
			revised.name:   {revised.name, "true", "", "true", string(agentsv1alpha1.ReviewKeptPlanning), "True"},
		}
		getHeader, got := rows(kubectl(nil, "get", "agentsessions").OK())
		listHeader, listed := rows(kplan("list").OK())
		Expect(listHeader).To(Equal(getHeader), "the same columns")
		Expect(getHeader).To(Equal([]string{"NAME", plancli.ColumnPlanMode, plancli.ColumnPending, plancli.ColumnSelected, plancli.ColumnReview, plancli.ColumnReady, "AGE"}))
		for name, cells := range want {
			Expect(got[name]).To(Equal(cells), "kubectl get agentsessions, %s", name)
			Expect(listed[name]).To(Equal(cells), "kubectl plan list, %s", name)
		}

		By("kubectl plan status says the same, in sentences and as -o json")
		status := kplan("status", entering.name).OK()
		Expect(status).To(MatchRegexp(`Plan mode:\s+false \(off\), committed in the session log\n`))
		Expect(status).To(MatchRegexp(`Pending:\s+true \(on\) at the agent's next step boundary\n`))
		Expect(status).To(MatchRegexp(`Selected:\s+true \(on\) \(spec.planMode.active, by developer at \S+\)\n`), "the selection names who made it")
		var v plancli.StatusView
		Expect(json.Unmarshal([]byte(kplan("status", entering.name, "-o", "json").OK()), &v)).To(Succeed())
		Expect(v.PlanMode).To(BeFalse())
		Expect(v.Pending).To(HaveValue(BeTrue()))
		Expect(v.Selected).To(HaveValue(BeTrue()))
		Expect(kplan("status", revised.name).OK()).To(MatchRegexp(`Review:\s+"First draft" \(revision 1, review \S+, turn 1\): KeepPlanning by developer \(`))
		var list struct{ Items []plancli.SessionRow }
		Expect(json.Unmarshal([]byte(kplan("list", "-o", "json").OK()), &list)).To(Succeed())
		for _, r := range list.Items {
			if r.Name == reviewing.name {
				Expect(r.Review).To(Equal(agentsv1alpha1.ReviewPending))
				Expect(r.PlanMode).To(BeTrue())
			}
		}

		By("docs/kubectl-plan.md defines each word")
		doc, err := os.ReadFile(filepath.Join(repo, "docs", "kubectl-plan.md"))
		Expect(err).NotTo(HaveOccurred())
		for _, word := range []string{plancli.ColumnPlanMode, plancli.ColumnPending, plancli.ColumnSelected, plancli.ColumnReview,
			string(agentsv1alpha1.ReviewPending), string(agentsv1alpha1.ReviewApproved), string(agentsv1alpha1.ReviewKeptPlanning),
			string(agentsv1alpha1.ReviewDismissed), string(agentsv1alpha1.ReviewExpired), string(agentsv1alpha1.ReviewRejected)} {
			Expect(string(doc)).To(ContainSubstring("`"+word+"`"), "docs/kubectl-plan.md names %s", word)
		}

		By("leaving the review and the turns as they would end")
		reviewingNow := reviewing.get()
		review := reviewingNow.Status.Agent.Review
		Expect(kplan("approve", reviewing.name, "--plan-sha256", planmode.PlanSHA256(review.Plan)).OK()).To(ContainSubstring("Approved"))
		Eventually(exited).Should(Receive(HaveField("Logged", BeNil())))
		reviewing.EndTurn()
		revised.EndTurn()
		entering.EndTurn()
	})
})
