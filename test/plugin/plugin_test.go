package plugin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/plancli"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// The harness's /plan replies, byte for byte, except that the entering replies name the
// kubectl command that leaves plan mode (SESSION, filled in by inKubectl) instead of /plan off.
const (
	onCommitted = "Plan mode on. Use kubectl plan off SESSION to leave."
	onDeferred  = "Entering plan mode (applies from the next step). Use kubectl plan off SESSION to leave."
	// The second line of a message's reply: which way the text reaches the agent.
	idleMessage   = "Message queued; the agent is idle, so it starts a turn with it."
	queuedMessage = "Message queued for the agent's next step, after the messages queued before it."
	offCommitted  = "Plan mode off."
	offDeferred   = "Leaving plan mode (applies from the next step)."
	offCancelled  = "Plan mode entry cancelled."
	// Where the harness's copy would not say what happened, the plugin says it plainly.
	offInactive = "Plan mode is already off."
	onAlready   = "Plan mode is already on. Use kubectl plan off SESSION to leave."
	onPending   = "Entering plan mode is already pending (applies from the next step). Use kubectl plan off SESSION to leave."
	offPending  = "Leaving plan mode is already pending (applies from the next step)."
)

// inKubectl is a reply as the plugin prints it for the session "demo" in namespace ns.
func inKubectl(reply, ns string) string {
	return strings.ReplaceAll(reply, "SESSION", "demo -n "+ns)
}

var _ = Describe("kubectl plan --help", func() {
	It("lists every subcommand and documents each one", func() {
		out := kplan("--help").OK()
		for _, sub := range []string{"on", "off", "message", "status", "log", "review", "approve", "revise", "dismiss"} {
			Expect(out).To(MatchRegexp(`(?m)^  %s\s+\S`, sub), "root help lists %q", sub)
			h := kplan(sub, "--help").OK()
			Expect(h).To(ContainSubstring("Usage:\n  kubectl plan "+sub), "help of %q", sub)
			Expect(h).To(ContainSubstring("Examples:"), "help of %q has examples", sub)
			Expect(h).To(ContainSubstring("--kubeconfig"), "help of %q has the standard kubectl flags", sub)
		}
		for _, text := range []string{onCommitted, onDeferred, offCommitted, offDeferred, offCancelled, offInactive} {
			Expect(out).To(ContainSubstring(text), "root help quotes the reply %q", text)
		}
		Expect(out).To(ContainSubstring("kubectl plan SESSION [off|TEXT...]"))
	})

	It("is found by kubectl's plugin mechanism", func() {
		out := kubectlRun(nil, "plugin", "list").OK()
		Expect(out).To(ContainSubstring(filepath.Join(pluginDir, "kubectl-plan")))
	})

	It("prints the help with no arguments", func() {
		Expect(kplan().OK()).To(ContainSubstring("Available Commands:"))
	})
})

// Each row of the harness's set() decision table with its /plan reply: the state
// is what the manager reported in status; the plugin decides from it (--wait=0: no manager
// runs in these specs) and writes spec.planMode.active.
var _ = Describe("on and off: replies from the set() decision table", func() {
	type row struct {
		desired, selection *bool
		st                 agentsv1alpha1.PlanModeStatus
		args               string
		reply              string
		wantDesired        *bool
		noWrite            bool
	}
	// pend is the status while the user's selection of active is pending, during a turn (open)
	// or between turns.
	pend := func(active, open bool) agentsv1alpha1.PlanModeStatus {
		return agentsv1alpha1.PlanModeStatus{Active: !active, PendingActive: bp(active), Pending: true, PendingSource: agentsv1alpha1.PendingSourceUser, TurnOpen: open}
	}
	DescribeTable("reply and resulting spec",
		func(r row) {
			ns := newNamespace()
			before := newSession(ns, "demo", func(s *agentsv1alpha1.AgentSessionSpec) { s.PlanMode.Active = r.desired },
				func(s *agentsv1alpha1.AgentSessionStatus) { s.PlanMode = r.st; s.PlanMode.Selection = r.selection })
			args := append(strings.Fields(r.args), "demo", "-n", ns, "--wait=0")
			Expect(kplan(args...).OK()).To(Equal(line(inKubectl(r.reply, ns))))
			after := get(ns, "demo")
			Expect(after.Spec.PlanMode.Active).To(Equal(r.wantDesired))
			if r.noWrite {
				Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "a noop that spec already records writes nothing")
			}
		},
		Entry("L=F idle, on: committed",
			row{st: agentsv1alpha1.PlanModeStatus{},
				args: "on", reply: onCommitted, wantDesired: bp(true)}),
		Entry("L=F open, on: queued",
			row{st: agentsv1alpha1.PlanModeStatus{TurnOpen: true},
				args: "on", reply: onDeferred, wantDesired: bp(true)}),
		Entry("L=T idle (inherited), on: noop, already on",
			row{st: agentsv1alpha1.PlanModeStatus{Active: true},
				args: "on", reply: onAlready, wantDesired: bp(true)}),
		Entry("L=T selected, on again: noop, no write",
			row{desired: bp(true), selection: bp(true), st: agentsv1alpha1.PlanModeStatus{Active: true},
				args: "on", reply: onAlready, wantDesired: bp(true), noWrite: true}),
		Entry("L=T idle, off: committed",
			row{desired: bp(true), selection: bp(true), st: agentsv1alpha1.PlanModeStatus{Active: true},
				args: "off", reply: offCommitted, wantDesired: bp(false)}),
		Entry("L=T open, off: queued",
			row{desired: bp(true), selection: bp(true), st: agentsv1alpha1.PlanModeStatus{Active: true, TurnOpen: true},
				args: "off", reply: offDeferred, wantDesired: bp(false)}),
		Entry("L=F P=T open, off: cancelled",
			row{desired: bp(true), selection: bp(true), st: pend(true, true),
				args: "off", reply: offCancelled, wantDesired: bp(false)}),
		Entry("L=F P=T idle, off: cancelled",
			row{desired: bp(true), selection: bp(true), st: pend(true, false),
				args: "off", reply: offCancelled, wantDesired: bp(false)}),
		Entry("L=F P=T open, on: noop (already pending)",
			row{desired: bp(true), selection: bp(true), st: pend(true, true),
				args: "on", reply: onPending, wantDesired: bp(true), noWrite: true}),
		Entry("L=F, off: already inactive",
			row{st: agentsv1alpha1.PlanModeStatus{},
				args: "off", reply: offInactive, wantDesired: bp(false)}),
		Entry("L=T P=F open, off: noop, leaving already pending",
			row{desired: bp(false), selection: bp(false), st: pend(false, true),
				args: "off", reply: offPending, wantDesired: bp(false), noWrite: true}),
		Entry("L=F P=F residue, off: noop, already inactive",
			row{desired: bp(false), selection: bp(false), st: agentsv1alpha1.PlanModeStatus{PendingActive: bp(false), TurnOpen: true},
				args: "off", reply: offInactive, wantDesired: bp(false), noWrite: true}),
		Entry("L=F P=F residue open, on: queued",
			row{desired: bp(false), selection: bp(false), st: agentsv1alpha1.PlanModeStatus{PendingActive: bp(false), TurnOpen: true},
				args: "on", reply: onDeferred, wantDesired: bp(true)}),
		Entry("an entry the manager has not taken on yet, off during a turn: cancelled",
			row{desired: bp(true), st: agentsv1alpha1.PlanModeStatus{TurnOpen: true},
				args: "off", reply: offCancelled, wantDesired: bp(false)}),
		Entry("an entry the manager has not taken on yet, off between turns: plan mode off",
			row{desired: bp(true), st: agentsv1alpha1.PlanModeStatus{},
				args: "off", reply: offCommitted, wantDesired: bp(false)}),
		Entry("short form, no text: on",
			row{st: agentsv1alpha1.PlanModeStatus{},
				args: "", reply: onCommitted, wantDesired: bp(true)}),
	)

	It("short form: exactly 'off' leaves plan mode", func() {
		ns := newNamespace()
		newSession(ns, "demo", func(s *agentsv1alpha1.AgentSessionSpec) { s.PlanMode.Active = bp(true) },
			func(s *agentsv1alpha1.AgentSessionStatus) {
				s.PlanMode = agentsv1alpha1.PlanModeStatus{Active: true, Selection: bp(true)}
			})
		Expect(kplan("demo", "off", "-n", ns, "--wait=0").OK()).To(Equal(line(offCommitted)))
		Expect(get(ns, "demo").Spec.PlanMode.Active).To(Equal(bp(false)))
		Expect(get(ns, "demo").Spec.SteerQueue).To(BeEmpty())
	})

	It("refuses to re-select a value spec already holds when the state moved away from it, naming the fix, and writes nothing", func() {
		ns := newNamespace()
		// A plan approved before approvals deselected plan mode: the exit is pending, and spec
		// and the taken-on selection still say true, so "on" alone would change nothing.
		before := newSession(ns, "demo", func(s *agentsv1alpha1.AgentSessionSpec) { s.PlanMode.Active = bp(true) },
			func(s *agentsv1alpha1.AgentSessionStatus) {
				s.PlanMode = agentsv1alpha1.PlanModeStatus{Active: true, Selection: bp(true), TurnOpen: true, Pending: true, PendingActive: bp(false), PendingSource: agentsv1alpha1.PendingSourceExit}
			})
		for _, wait := range []string{"--wait=0", "--wait=1s"} {
			kplan("on", "demo", "-n", ns, wait).Fails("spec.planMode.active is already true", "the manager acts only on a changed value",
				"kubectl plan off demo && kubectl plan on demo")
			after := get(ns, "demo")
			Expect(after.Spec.PlanMode.Active).To(Equal(bp(true)))
			Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "no intermediate write: the plugin no longer writes false then true")
		}
	})

	It("warns when the PlanModeConfig in force is missing", func() {
		ns := newNamespace()
		newSession(ns, "demo", nil, nil)
		r := kplan("on", "demo", "-n", ns, "--wait=0")
		Expect(r.OK()).To(Equal(line(inKubectl(onCommitted, ns))))
		Expect(r.Err).To(ContainSubstring(`warning: PlanModeConfig "default" does not exist in namespace "` + ns + `"`))
	})
})

var _ = Describe("messages: /plan TEXT", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		newSession(ns, "demo", nil, nil)
	})

	It("enters plan mode and queues the trimmed text with a fresh id (long form), each message kept, in order", func() {
		Expect(kplan("message", "demo", "draft", "the", "migration", "-n", ns, "--wait=0").OK()).To(Equal(line(inKubectl(onCommitted, ns)) + line(idleMessage)))
		as := get(ns, "demo")
		Expect(as.Spec.PlanMode.Active).To(Equal(bp(true)))
		Expect(as.Spec.SteerQueue).To(HaveLen(1))
		Expect(as.Spec.SteerQueue[0].Text).To(Equal("draft the migration"))
		Expect(as.Spec.SteerQueue[0].ID).To(HavePrefix("kp-"))
		first := as.Spec.SteerQueue[0].ID
		var managers []string
		for _, mf := range as.ManagedFields {
			if strings.Contains(mf.FieldsV1.GetRawString(), `"f:steerQueue"`) {
				managers = append(managers, mf.Manager)
			}
		}
		Expect(managers).To(Equal([]string{plancli.FieldManager}), "the plugin writes with its own field manager")

		// Plan mode is now on and a turn is open (as the manager would report): a second
		// message before the first was delivered is a noop selection that queues its text
		// after the first, under a new id.
		setStatus(ns, "demo", func(s *agentsv1alpha1.AgentSessionStatus) {
			s.PlanMode = agentsv1alpha1.PlanModeStatus{Active: true, Selection: bp(true), TurnOpen: true}
		})
		Expect(kplan("message", "demo", "  and the rollback  ", "-n", ns, "--wait=0").OK()).To(Equal(line(inKubectl(onAlready, ns)) + line(queuedMessage)))
		as = get(ns, "demo")
		Expect(as.Spec.SteerQueue).To(HaveLen(2))
		Expect(as.Spec.SteerQueue[0].ID).To(Equal(first))
		Expect(as.Spec.SteerQueue[1].Text).To(Equal("and the rollback"))
		Expect(as.Spec.SteerQueue[1].ID).NotTo(Equal(first))
	})

	It("short form: SESSION TEXT is an entry plus a message, 'off please' included", func() {
		Expect(kplan("demo", "  draft it ", "-n", ns, "--wait=0").OK()).To(Equal(line(inKubectl(onCommitted, ns)) + line(idleMessage)))
		Expect(get(ns, "demo").Spec.SteerQueue[0].Text).To(Equal("draft it"))
		// spec already selects plan mode (the manager has not taken it on in these specs): noop.
		Expect(kplan("demo", "off", "please", "-n", ns, "--wait=0").OK()).To(Equal(line(inKubectl(onAlready, ns)) + line(idleMessage)))
		as := get(ns, "demo")
		Expect(as.Spec.PlanMode.Active).To(Equal(bp(true)))
		Expect(as.Spec.SteerQueue[len(as.Spec.SteerQueue)-1].Text).To(Equal("off please"))
	})

	It("the long form treats 'off' as a message, and refuses a blank one", func() {
		Expect(kplan("message", "demo", "off", "-n", ns, "--wait=0").OK()).To(Equal(line(inKubectl(onCommitted, ns)) + line(idleMessage)))
		Expect(get(ns, "demo").Spec.SteerQueue[0].Text).To(Equal("off"))
		kplan("message", "demo", "   ", "-n", ns).Fails(`"message" needs a non-blank text`)
		kplan("message", "demo", "-n", ns).Fails(`"message" needs a session and the text`)
	})
})

var _ = Describe("errors", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		newSession(ns, "demo", nil, nil)
	})

	It("names a missing session, and hints at a mistyped subcommand", func() {
		kplan("on", "nosuch", "-n", ns).Fails(`no AgentSession "nosuch" in namespace "` + ns + `"`)
		kplan("status", "nosuch", "-n", ns).Fails(`no AgentSession "nosuch"`)
		kplan("review", "nosuch", "-n", ns).Fails(`no AgentSession "nosuch"`)
		kplan("stauts", "demo", "-n", ns).Fails(`no AgentSession "stauts"`, `did you mean "status"?`)
	})

	It("checks arguments", func() {
		kplan("status", "-n", ns).Fails(`"status" needs exactly one argument, the session name`)
		kplan("on", "a", "b", "-n", ns).Fails(`"on" needs exactly one argument`)
		kplan("status", "demo", "-o", "wide", "-n", ns).Fails(`unknown output format "wide"`)
		kplan("log", "demo", "-n", ns).Fails("no session-log store: pass --store URL, set " + plancli.StoreEnv)
	})

	It("says which permission is missing", func() {
		By("a user with no access at all")
		kplan("on", "demo", "-n", ns, "--as", "mallory").Fails("not allowed to read the session",
			`"get" permission on agentsessions.agents.harness.dev in namespace "`+ns+`"`, `User "mallory" cannot get resource "agentsessions"`)
		By("a user who can read but not patch")
		grant(ns, "viewer", []string{"get", "list", "watch"})
		kplan("off", "demo", "-n", ns, "--as", "viewer", "--wait=0").Fails("not allowed to toggle plan mode", `"patch" permission on agentsessions.agents.harness.dev`)
		kplan("message", "demo", "hi", "-n", ns, "--as", "viewer", "--wait=0").Fails("not allowed to toggle plan mode and send a message", `"patch" permission`)
		Expect(kplan("status", "demo", "-n", ns, "--as", "viewer").OK()).To(ContainSubstring("Plan mode:"))
		Expect(get(ns, "demo").Spec.PlanMode.Active).To(BeNil(), "a refused toggle changes nothing")
	})
})

// grant gives a user verbs on agentsessions in one namespace.
func grant(ns, user string, verbs []string) {
	GinkgoHelper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{agentsv1alpha1.GroupVersion.Group}, Resources: []string{"agentsessions"}, Verbs: verbs}}}
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: user}}}
	Expect(k8sClient.Create(ctx, rb)).To(Succeed())
}

var _ = Describe("status", func() {
	It("shows plan mode, pending, selected, config, last change, review and readiness", func() {
		ns := newNamespace()
		now := metav1.Now()
		newSession(ns, "demo", func(s *agentsv1alpha1.AgentSessionSpec) {
			s.PlanMode.Active = bp(false)
			s.PlanMode.ConfigRef = &agentsv1alpha1.ConfigReference{Name: "strict"}
		}, func(s *agentsv1alpha1.AgentSessionStatus) {
			s.PlanMode = agentsv1alpha1.PlanModeStatus{Active: true, Pending: true, PendingActive: bp(false), PendingSource: agentsv1alpha1.PendingSourceUser,
				Selection: bp(false), TurnOpen: true, NextSeq: 42, LastTransitionTime: &now,
				Config: &agentsv1alpha1.ConfigInForce{Name: "strict", Generation: 3, SectionSHA256: "0123456789abcdef0123"}}
			s.Agent = &agentsv1alpha1.AgentReport{Review: &agentsv1alpha1.PlanReviewRequest{ID: "r1", Plan: "# Fix the flake\n\n1. retry\n", Turn: 4}}
			s.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "SelectionPending", Message: "plan mode off is selected", LastTransitionTime: now}}
		})
		out := kplan("status", "demo", "-n", ns).OK()
		Expect(out).To(MatchRegexp(`Plan mode:\s+true \(on\), committed in the session log\n`))
		Expect(out).To(MatchRegexp(`Pending:\s+false \(off\) at the agent's next step boundary\n`))
		Expect(out).To(MatchRegexp(`Selected:\s+false \(off\) \(spec.planMode.active\)\n`))
		Expect(out).To(MatchRegexp(`Turn:\s+open`))
		Expect(out).To(MatchRegexp(`Config:\s+strict \(generation 3, section sha256 0123456789ab\)\n`))
		Expect(out).To(MatchRegexp(`Last change:\s+` + now.UTC().Format("2006-01-02T15:04:05Z")))
		Expect(out).To(MatchRegexp(`Review:\s+"Fix the flake" \(review r1, turn 4\): posted, not opened by the manager yet\n`))
		Expect(out).To(MatchRegexp(`Ready:\s+False SelectionPending: plan mode off is selected\n`))

		var v plancli.StatusView
		Expect(json.Unmarshal([]byte(kplan("status", "demo", "-n", ns, "-o", "json").OK()), &v)).To(Succeed())
		Expect(v.PlanMode).To(BeTrue())
		Expect(v.Pending).To(Equal(bp(false)))
		Expect(v.Selected).To(Equal(bp(false)))
		Expect(v.ConfigRef).To(Equal("strict"))
		Expect(v.Review.ID).To(Equal("r1"))
		Expect(kplan("status", "demo", "-n", ns, "-o", "yaml").OK()).To(ContainSubstring("planMode: true"))
	})

	It("reads a fresh session with nothing reported yet", func() {
		ns := newNamespace()
		newSession(ns, "demo", nil, nil)
		out := kplan("status", "demo", "-n", ns).OK()
		Expect(out).To(MatchRegexp(`Plan mode:\s+false \(off\), committed in the session log\n`))
		Expect(out).To(MatchRegexp(`Selected:\s+none \(no selection: the session follows its log\)\n`))
		Expect(out).To(MatchRegexp(`Config:\s+default \(requested; not read by the manager yet\)\n`))
		Expect(out).To(MatchRegexp(`Review:\s+none \(no plan presented\)\n`))
		Expect(out).To(MatchRegexp(`Ready:\s+unknown`))
	})
})

var _ = Describe("review, approve, revise, dismiss", func() {
	const plan = "# Fix the flake\n\n1. Find the race.\n2. Add the lock.\n"
	var ns string
	post := func(id, text string) {
		setStatus(ns, "demo", func(s *agentsv1alpha1.AgentSessionStatus) {
			now := metav1.Now()
			s.Agent = &agentsv1alpha1.AgentReport{Review: &agentsv1alpha1.PlanReviewRequest{ID: id, Plan: text, Turn: 2, RequestedAt: &now}}
			s.Review = &agentsv1alpha1.ReviewStatus{ID: id, Phase: agentsv1alpha1.ReviewPending}
		})
	}
	BeforeEach(func() {
		ns = newNamespace()
		newSession(ns, "demo", func(s *agentsv1alpha1.AgentSessionSpec) { s.PlanMode.Active = bp(true) },
			func(s *agentsv1alpha1.AgentSessionStatus) {
				s.PlanMode = agentsv1alpha1.PlanModeStatus{Active: true, Selection: bp(true), TurnOpen: true}
			})
	})

	It("says when nothing is under review", func() {
		for _, sub := range []string{"review", "approve", "revise", "dismiss"} {
			kplan(sub, "demo", "-n", ns).Fails("nothing under review", `session "demo" has not presented a plan`)
		}
		Expect(get(ns, "demo").Spec.ReviewVotes).To(BeEmpty())
	})

	It("prints the plan under review, verbatim", func() {
		post("r1", plan)
		out := kplan("review", "demo", "-n", ns).OK()
		Expect(out).To(HavePrefix("Plan:       Fix the flake\nReview ID:  r1\nTurn:       2\n"), "no revision before the manager opens the review")
		Expect(out).To(ContainSubstring("State:      Pending, awaiting a decision (kubectl plan approve|revise|dismiss demo)\n"))
		Expect(out).To(HaveSuffix("\n\n" + plan))
		Expect(kplan("review", "demo", "-n", ns, "--raw").OK()).To(Equal(plan))
	})

	It("approves the plan it read, once, and refuses a stale review id", func() {
		post("r1", plan)
		kplan("approve", "demo", "-n", ns, "--review-id", "r0").Fails(`stale review id "r0": the plan under review is now "Fix the flake" (review r1)`)
		Expect(get(ns, "demo").Spec.ReviewVotes).To(BeEmpty())

		Expect(kplan("approve", "demo", "-n", ns, "--review-id", "r1", "--wait=0").OK()).To(Equal(line(`Approved "Fix the flake" (review r1): the agent leaves plan mode at its next step.`)))
		Expect(lastVote(ns)).To(Equal(&agentsv1alpha1.ReviewDecision{ReviewID: "r1", Decision: agentsv1alpha1.ReviewApprove,
			PlanSHA256: planmode.PlanSHA256(plan)}), "the vote names the digest of the text read")
		Expect(get(ns, "demo").Spec.PlanMode.Active).To(Equal(bp(false)), "the approval that completes the review deselects plan mode in the same write")
		kplan("approve", "demo", "-n", ns).Fails(`nothing under review: the plan "Fix the flake" (review r1) was already decided: Approve`)
		kplan("dismiss", "demo", "-n", ns).Fails("already decided")
		Expect(kplan("review", "demo", "-n", ns).OK()).To(ContainSubstring("State:      Pending; decision Approve written, waiting for the manager\n"))
	})

	It("keeps planning with and without feedback, and dismisses, each naming the newest review", func() {
		post("r1", plan)
		Expect(kplan("revise", "demo", "-n", ns, "--feedback", "consider the resume path", "--wait=0").OK()).
			To(Equal(line(`Sent "Fix the flake" (review r1) back with your feedback: the agent keeps planning; the session stays in plan mode.`)))
		Expect(lastVote(ns)).To(Equal(&agentsv1alpha1.ReviewDecision{ReviewID: "r1", Decision: agentsv1alpha1.ReviewKeepPlanning, Feedback: "consider the resume path",
			PlanSHA256: planmode.PlanSHA256(plan)}))

		post("r2", "# Fix the flake, v2\n")
		Expect(kplan("revise", "demo", "-n", ns, "--wait=0").OK()).To(Equal(line(`Sent "Fix the flake, v2" (review r2) back: the agent keeps planning; the session stays in plan mode.`)))
		Expect(lastVote(ns)).To(Equal(&agentsv1alpha1.ReviewDecision{ReviewID: "r2", Decision: agentsv1alpha1.ReviewKeepPlanning,
			PlanSHA256: planmode.PlanSHA256("# Fix the flake, v2\n")}), "no feedback left over from r1")

		post("r3", "no heading at all")
		Expect(kplan("dismiss", "demo", "-n", ns, "--wait=0").OK()).To(Equal(line(
			`Dismissed the review of "Plan" (review r3): the agent stops its turn; the session stays in plan mode until you run kubectl plan off demo.`)))
		Expect(lastVote(ns)).To(Equal(&agentsv1alpha1.ReviewDecision{ReviewID: "r3", Decision: agentsv1alpha1.ReviewDismiss,
			PlanSHA256: planmode.PlanSHA256("no heading at all")}))
		Expect(get(ns, "demo").Spec.PlanMode.Active).To(Equal(bp(true)), "only an approval deselects plan mode")
	})

	It("refuses a decision from a user without patch permission", func() {
		post("r1", plan)
		grant(ns, "viewer", []string{"get"})
		kplan("approve", "demo", "-n", ns, "--as", "viewer").Fails("not allowed to decide the plan review", `"patch" permission`)
		Expect(get(ns, "demo").Spec.ReviewVotes).To(BeEmpty())
	})
})

var _ = Describe("log", func() {
	It("shows the plan-relevant events and exports the whole session as harness JSONL", func() {
		ns := newNamespace()
		as := newSession(ns, "demo", nil, nil)
		section := "You are in plan mode. Stay in plan mode until exit_plan_mode succeeds."
		Expect(k8sClient.Create(ctx, &agentsv1alpha1.PlanModeConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
			Spec: agentsv1alpha1.PlanModeConfigSpec{Section: section}})).To(Succeed())

		url := "sqlite://" + filepath.Join(GinkgoT().TempDir(), "log.db")
		store, err := sessionlog.Open(ctx, url)
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = store.Close() }()
		raw := func(typ, data string) harness.Event {
			return harness.Event{Type: typ, Data: json.RawMessage(data)}
		}
		user := func(text, source string) harness.Event {
			e := raw("user/message", `{"content":[{"type":"text","text":"`+text+`"}],"source":`+source+`,"role":"user","id":"m-`+text[:3]+`"}`)
			e.SurfaceOp = json.RawMessage(`"append"`)
			return e
		}
		events := []harness.Event{
			raw("turn/start", `{"turn":1}`),
			raw("step/start", `{"turn":1,"step":1}`),
			user("hello", `{"kind":"user"}`),
			raw("request/header", `{"header":{"config":{"model":"m"},"system":"base","tools":[{"name":"read"}]},"reason":"initial"}`),
			raw("assistant/message", `{"role":"assistant","content":[]}`),
			raw("step/end", `{"turn":1,"step":1}`),
			raw("plan/mode", `{"active":true}`),
			raw("step/start", `{"turn":1,"step":2}`),
			user("The user switched this session to plan mode.", `{"kind":"plugin","plugin":"plan-mode","form":"notice","summary":"The user switched this session to plan mode."}`),
			raw("request/header", `{"header":{"config":{"model":"m"},"system":"base\n\n`+section+`","tools":[{"name":"exit_plan_mode"},{"name":"read"}]},"reason":"change"}`),
			raw("tool/call", `{"turn":1,"step":2,"callId":"c1","name":"exit_plan_mode","arguments":"{}"}`),
			raw("tool/call", `{"turn":1,"step":2,"callId":"c2","name":"read","arguments":"{}"}`),
			raw("tool/result", `{"turn":1,"step":2,"message":{"role":"toolResult","callId":"c1","toolName":"exit_plan_mode",`+
				`"content":[{"type":"text","text":"Plan approved — plan mode exited; carry out the plan starting with your next step."}],"isError":false}}`),
			raw("tool/result", `{"turn":1,"step":2,"message":{"role":"toolResult","callId":"c2","toolName":"read","content":[{"type":"text","text":"file"}],"isError":false}}`),
			raw("step/end", `{"turn":1,"step":2}`),
			raw("turn/end", `{"turn":1,"reason":{"kind":"completed"}}`),
		}
		for i := range events {
			if events[i].SurfaceOp == nil && (events[i].Type == "tool/result") {
				events[i].SurfaceOp = json.RawMessage(`"append"`)
			}
		}
		_, err = store.Append(ctx, as.Spec.SessionID, harness.Sequence(0, events...))
		Expect(err).NotTo(HaveOccurred())

		out := kplan("log", "demo", "-n", ns, "--store", url).OK()
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		Expect(lines[0]).To(MatchRegexp(`^SEQ\s+TIME\s+EVENT\s+DETAIL$`))
		got := make([]string, 0, len(lines)-1)
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			got = append(got, f[0]+" "+f[2]+" "+strings.Join(f[3:], " "))
		}
		Expect(got).To(Equal([]string{
			"0 turn/start turn 1",
			"1 step/start turn 1 step 1",
			`2 user/message message from the user: "hello"`,
			"3 request/header reason=initial plan=off tools=[read]",
			"5 step/end turn 1 step 1",
			"6 plan/mode plan mode on (active=true)",
			"7 step/start turn 1 step 2",
			"8 user/message plan-mode notice (plugin): The user switched this session to plan mode.",
			"9 request/header reason=change plan=on guidance=current config tools=[exit_plan_mode,read]",
			"10 tool/call exit_plan_mode (call c1, turn 1 step 2)",
			"12 tool/result exit_plan_mode result (call c1, ok): Plan approved — plan mode exited; carry out the plan starting with your next step.",
			"14 step/end turn 1 step 2",
			"15 turn/end turn 1 (completed)",
		}))

		By("--jsonl: the header line, then every event verbatim; the store URL may come from the environment")
		r := kubectlRun([]string{plancli.StoreEnv + "=" + url}, "plan", "log", "demo", "-n", ns, "--jsonl")
		jl := strings.Split(strings.TrimSuffix(r.OK(), "\n"), "\n")
		Expect(jl).To(HaveLen(1 + len(events)))
		var hdr map[string]any
		Expect(json.Unmarshal([]byte(jl[0]), &hdr)).To(Succeed())
		Expect(hdr).To(HaveKeyWithValue("type", "session"))
		Expect(hdr).To(HaveKeyWithValue("id", as.Spec.SessionID))
		stored, err := store.ReadFrom(ctx, as.Spec.SessionID, 0, 0)
		Expect(err).NotTo(HaveOccurred())
		for i, ev := range stored {
			want, err := json.Marshal(ev)
			Expect(err).NotTo(HaveOccurred())
			Expect(jl[i+1]).To(MatchJSON(want))
		}
		Expect(jl[7]).To(HavePrefix(`{"type":"plan/mode","seq":6,"time":`))
	})

	It("fails clearly on a bad store URL", func() {
		ns := newNamespace()
		newSession(ns, "demo", nil, nil)
		kplan("log", "demo", "-n", ns, "--store", "mysql://x").Fails("cannot open the session-log store", "unknown store URL")
		// A path with no log is an error naming it, and reading creates no file there.
		missing := filepath.Join(GinkgoT().TempDir(), "empty.db")
		kplan("log", "demo", "-n", ns, "--store", "sqlite://"+missing).Fails("no SQLite session log at " + missing)
		_, err := os.Stat(missing)
		Expect(err).To(MatchError(os.ErrNotExist), "kubectl plan log created the store file")
		// A store that exists but has no log for the session.
		url := "sqlite://" + filepath.Join(GinkgoT().TempDir(), "log.db")
		store, err := sessionlog.Open(ctx, url)
		Expect(err).NotTo(HaveOccurred())
		Expect(store.Close()).To(Succeed())
		kplan("log", "demo", "-n", ns, "--store", url).Fails("has no log in this store yet")
	})
})

// lastVote is the newest decision kubectl plan appended to the demo session's spec.reviewVotes.
func lastVote(ns string) *agentsv1alpha1.ReviewDecision {
	GinkgoHelper()
	v := get(ns, "demo").Spec.ReviewVotes
	Expect(v).NotTo(BeEmpty())
	return &v[len(v)-1]
}
