package review_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// Review integrity with real identities: each person has their own client certificate (no
// impersonation: the API server authenticates them), and each namespace's agent is a service
// account with its own token, bound to its sessions with spec.agent. team-r has a ReviewPolicy
// (two distinct approvers, not the requester); team-b has none. docs/review.md describes what
// each check stops.

const (
	nsPolicy   = "team-r"
	nsNoPolicy = "team-b"
	planA      = "# Fix the flake\n\n1. Read parser.go.\n2. Add the lock.\n"
	planB      = "# Fix the flake\n\n1. Read parser.go.\n2. Add the lock with a timeout.\n3. Run the unit tests.\n"
	swappedB   = "# Delete the production database\n\n1. kubectl delete pvc --all\n"
)

// person is a user with credentials of their own.
type person struct {
	name, kubeconfig string
	cfg              *rest.Config
	c                client.Client
}

func newPerson(name string, groups ...string) *person {
	GinkgoHelper()
	u, err := testEnv.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	Expect(err).NotTo(HaveOccurred())
	kc, err := u.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	p := &person{name: name, kubeconfig: filepath.Join(GinkgoT().TempDir(), "kubeconfig"), cfg: u.Config()}
	Expect(os.WriteFile(p.kubeconfig, kc, 0o600)).To(Succeed())
	p.c, err = client.New(p.cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return p
}

// kplan runs `kubectl plan ARGS... -n NS` through the real kubectl with the person's own
// kubeconfig.
func (p *person) kplan(namespace string, args ...string) framework.CmdResult {
	GinkgoHelper()
	return p.kubectl(namespace, append([]string{"plan"}, args...)...)
}

func (p *person) kubectl(namespace string, args ...string) framework.CmdResult {
	GinkgoHelper()
	return runKubectlWith(p.kubeconfig, append(args, "-n", namespace)...)
}

// agentIdentity is a namespace's agent service account, authenticated by a token the API server
// issued for it.
type agentIdentity struct {
	user string
	cfg  *rest.Config
	c    client.Client
}

func newAgentIdentity(namespace string) agentIdentity {
	GinkgoHelper()
	Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: agentSA}})).To(Succeed())
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, agentSA, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	c := rest.AnonymousClientConfig(cfg)
	c.BearerToken = tr.Status.Token
	id := agentIdentity{user: "system:serviceaccount:" + namespace + ":" + agentSA, cfg: c}
	id.c, err = client.New(c, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return id
}

// rsession is one session of these specs and, when started, its agent (the real SDK, as the
// namespace's service account).
type rsession struct {
	ns, name string
	ident    agentIdentity
	*agent   // the SDK agent, once startAgent ran
}

func (s *rsession) get() *agentsv1alpha1.AgentSession {
	GinkgoHelper()
	as := &agentsv1alpha1.AgentSession{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.name}, as)).To(Succeed())
	return as
}

// postRaw writes status.agent.review as the agent service account would (a merge patch), and
// returns the API server's answer.
func (s *rsession) postRaw(review string) error {
	body := `{"status":{"agent":{"review":` + review + `}}}`
	return s.ident.c.Status().Patch(ctx, s.get(), client.RawPatch(k8stypes.MergePatchType, []byte(body)))
}

// startAgent starts the session's agent, with its liveness Lease as real agents keep it, and
// opens a turn with one step, in plan mode.
func (s *rsession) startAgent() {
	GinkgoHelper()
	c, err := agentsdk.New(ctx, agentsdk.Options{Config: s.ident.cfg, Namespace: s.ns, Name: s.name, Store: store})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(c.Close)
	lease, err := agentsdk.StartLease(ctx, s.ident.cfg, s.ns, s.name, logr.Discard())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(lease.Stop)
	s.agent = newAgent(s.ns, s.name, c)
	s.StartTurn()
	s.NextStep("plan the fix")
}

// opened waits for the manager to open the review of the plan under review and returns it.
func (s *rsession) opened() *agentsv1alpha1.ReviewStatus {
	GinkgoHelper()
	var rs *agentsv1alpha1.ReviewStatus
	Eventually(func(g Gomega) {
		as := s.get()
		g.Expect(as.Status.Agent).NotTo(BeNil())
		g.Expect(as.Status.Agent.Review).NotTo(BeNil())
		g.Expect(as.Status.Review).NotTo(BeNil())
		g.Expect(as.Status.Review.ID).To(Equal(as.Status.Agent.Review.ID))
		rs = as.Status.Review
	}).WithTimeout(20 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	return rs
}

// appendVote appends a vote to spec.reviewVotes with a JSON patch, as c.
func appendVote(c client.Client, s *rsession, vote map[string]any) error {
	as := s.get()
	ops := []map[string]any{{"op": "add", "path": "/spec/reviewVotes/-", "value": vote}}
	if len(as.Spec.ReviewVotes) == 0 {
		ops = []map[string]any{{"op": "test", "path": "/spec/reviewVotes", "value": nil}, {"op": "add", "path": "/spec/reviewVotes", "value": []any{vote}}}
	}
	body, err := json.Marshal(ops)
	Expect(err).NotTo(HaveOccurred())
	return c.Patch(ctx, as, client.RawPatch(k8stypes.JSONPatchType, body))
}

var _ = Describe("review integrity with real identities", Ordered, func() {
	var rita, sam, tom *person
	agents := map[string]agentIdentity{}

	// newRSession is created by tom (who so selects plan mode and is the requester), bound to
	// the namespace's agent, and committed in plan mode between turns.
	newRSession := func(namespace string, spec func(*agentsv1alpha1.AgentSessionSpec)) *rsession {
		GinkgoHelper()
		s := &rsession{ns: namespace, name: "r-" + rand.String(6), ident: agents[namespace]}
		as := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: s.name},
			Spec: agentsv1alpha1.AgentSessionSpec{SessionID: s.name, PlanMode: agentsv1alpha1.PlanModeSpec{Active: bp(true)},
				Agent: &agentsv1alpha1.AgentBinding{ServiceAccountName: agentSA}}}
		if spec != nil {
			spec(&as.Spec)
		}
		Expect(tom.c.Create(ctx, as)).To(Succeed())
		Expect(s.get().Spec.PlanMode.SelectedBy).To(HaveField("Username", tom.name), "stamped at creation from tom's credentials")
		Eventually(func() bool { return s.get().Status.PlanMode.Active }).WithTimeout(20 * time.Second).Should(BeTrue())
		return s
	}

	BeforeAll(func() {
		for _, n := range []string{nsPolicy, nsNoPolicy} {
			Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
			Expect(k8s.Create(ctx, &agentsv1alpha1.PlanModeConfig{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "default"},
				Spec: agentsv1alpha1.PlanModeConfigSpec{Section: planSection}})).To(Succeed())
			bind := func(name, role string, subject rbacv1.Subject) {
				Expect(k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: n},
					RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
					Subjects: []rbacv1.Subject{subject}})).To(Succeed())
			}
			user := func(u string) rbacv1.Subject {
				return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u}
			}
			bind("agent", "agentsession-agent-role", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: n, Name: agentSA})
			bind("tom-edit", "agentsession-editor-role", user(toggler))
			// tom may approve too, so that only the ReviewPolicy stops him approving his own request.
			for _, u := range []string{toggler, reviewer, "sam@example.com"} {
				bind("review-"+strings.Split(u, "@")[0], "agentsession-reviewer-role", user(u))
			}
			agents[n] = newAgentIdentity(n)
		}
		rita, sam, tom = newPerson(reviewer, "reviewers"), newPerson("sam@example.com", "reviewers"), newPerson(toggler, "developers")

		By("installing config/rbac's admission policy for agent Leases")
		data, err := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", "agent_lease_policy.yaml"))
		Expect(err).NotTo(HaveOccurred())
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		var policy admissionregistrationv1.ValidatingAdmissionPolicy
		Expect(dec.Decode(&policy)).To(Succeed())
		var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
		Expect(dec.Decode(&binding)).To(Succeed())
		Expect(k8s.Create(ctx, &policy)).To(Succeed())
		Expect(k8s.Create(ctx, &binding)).To(Succeed())
	})

	It("refuses the withdraw-and-repost swap, the approval of an unseen text, and control characters in a plan", func() {
		s := newRSession(nsNoPolicy, nil)
		Expect(s.postRaw(fmt.Sprintf(`{"id":"r1","plan":%q,"turn":0}`, planA))).To(Succeed())
		Expect(s.opened().Revision).To(BeEquivalentTo(1))
		read := rita.kplan(s.ns, "review", s.name).OK()
		Expect(read).To(ContainSubstring("Revision:   1 (the session's first plan)\n"))
		Expect(read).To(ContainSubstring("Posted:     "))
		Expect(read).To(ContainSubstring(" by " + s.ident.user + "\n"))

		By("the agent withdraws r1 and posts other text under the same id: refused")
		Expect(s.postRaw(`null`)).To(Succeed())
		Eventually(func() []agentsv1alpha1.ReviewRevision { return s.get().Status.ReviewHistory }).WithTimeout(10 * time.Second).
			Should(ConsistOf(HaveField("Phase", agentsv1alpha1.ReviewWithdrawn)))
		err := s.postRaw(fmt.Sprintf(`{"id":"r1","plan":%q,"turn":0}`, swappedB))
		Expect(err).To(MatchError(ContainSubstring(`status.agent.review.plan: Forbidden: review id "r1" was already used for another text (revision 1, sha256 ` +
			planmode.PlanSHA256(planA) + `): a review id names one text forever; post the changed plan under a new review id`)))

		By("the other text under a new id is the next revision; the approval of the text read binds to revision 1 and is refused")
		Expect(s.postRaw(fmt.Sprintf(`{"id":"r2","plan":%q,"turn":0}`, swappedB))).To(Succeed())
		Expect(s.opened().Revision).To(BeEquivalentTo(2))
		rita.kplan(s.ns, "approve", s.name, "--revision", "1").Fails(`revision 1 is not the plan under review: revision 2 ("Delete the production database", review r2) is; nothing was decided`)
		rita.kplan(s.ns, "approve", s.name, "--plan-sha256", planmode.PlanSHA256(planA)).Fails(`is not the text you read: its SHA-256 is ` + planmode.PlanSHA256(swappedB))
		Expect(appendVote(rita.c, s, map[string]any{"reviewID": "r2", "decision": "Approve", "planSHA256": planmode.PlanSHA256(planA)})).
			To(MatchError(ContainSubstring(`is not the digest of the plan under review "r2"`)))
		Expect(appendVote(rita.c, s, map[string]any{"reviewID": "r2", "decision": "Approve"})).
			To(MatchError(ContainSubstring(`this decision cannot count: an approval must name the SHA-256 of the plan text it approves (planSHA256)`)))
		as := s.get()
		Expect(as.Spec.ReviewVotes).To(BeEmpty())
		Expect(as.Status.Review.Phase).To(Equal(agentsv1alpha1.ReviewPending))

		By("a plan holding control characters is refused, naming the field, the byte offset and the fix")
		for plan, at := range map[string]string{
			"# Plan\n\n2. Run the unit tests.\r3. curl x | sudo sh\n": "U+000D (CR) at byte offset 30",
			"# Plan\x1b[2K\n":                  "U+001B (ESC) at byte offset 6",
			"# Plan\n\x1b]52;c;ZXZpbA==\x07\n": "U+001B (ESC) at byte offset 7",
			"# Plan\n\x00\n":                   "U+0000 (NUL) at byte offset 7",
		} {
			body, _ := json.Marshal(map[string]any{"id": "r3", "plan": plan, "turn": 0})
			err := s.postRaw(string(body))
			Expect(err).To(MatchError(ContainSubstring(`status.agent.review.plan: Invalid value:`)), "%q", plan)
			Expect(err).To(MatchError(ContainSubstring(`holds the control character `+at)), "%q", plan)
			Expect(err).To(MatchError(ContainSubstring(`remove it (and use \n line endings, not \r\n)`)), "%q", plan)
		}
		Expect(s.get().Status.Agent.Review.ID).To(Equal("r2"), "nothing changed")
	})

	It("refuses a forged decider, and records the decider in status, the Event, the manager's log, kubectl plan status and log", func() {
		s := newRSession(nsNoPolicy, nil)
		Expect(s.postRaw(fmt.Sprintf(`{"id":"r1","plan":%q,"turn":0}`, planA))).To(Succeed())
		s.opened()
		digest := planmode.PlanSHA256(planA)

		By("a vote naming another decider, and a selection naming another selector, are refused")
		Expect(appendVote(rita.c, s, map[string]any{"reviewID": "r1", "decision": "Approve", "planSHA256": digest,
			"decidedBy": map[string]any{"username": sam.name}})).
			To(MatchError(ContainSubstring(`spec.reviewVotes[0].decidedBy: Forbidden: names "sam@example.com", but this write was made by "rita@example.com": ` +
				`it is stamped by the admission webhook from the authenticated request (mutating-webhook-configuration), never chosen by the client: leave it out`)))
		err := rita.c.Patch(ctx, s.get(), client.RawPatch(k8stypes.MergePatchType,
			[]byte(`{"spec":{"planMode":{"active":false,"selectedBy":{"username":"sam@example.com","groups":null}}}}`)))
		Expect(err).To(MatchError(ContainSubstring(`spec.planMode.selectedBy: Forbidden: names "sam@example.com", but this write was made by "rita@example.com"`)))
		Expect(s.get().Spec.ReviewVotes).To(BeEmpty())

		By("rita approves: the webhook stamps her from her certificate")
		out := rita.kplan(s.ns, "approve", s.name, "--revision", "1").OK()
		Expect(out).To(Equal("Approved \"Fix the flake\" (review r1): the agent leaves plan mode at its next step.\n"))
		as := s.get()
		Expect(as.Spec.ReviewVotes).To(HaveLen(1))
		Expect(as.Spec.ReviewVotes[0].DecidedBy.Username).To(Equal(rita.name))
		Expect(as.Spec.ReviewVotes[0].DecidedBy.Groups).To(ContainElement("reviewers"))
		Expect(as.Spec.PlanMode.Active).To(Equal(bp(false)), "the approving write deselects plan mode")
		Expect(as.Spec.PlanMode.SelectedBy.Username).To(Equal(rita.name))

		By("an existing vote cannot be rewritten")
		err = rita.c.Patch(ctx, as, client.RawPatch(k8stypes.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/spec/reviewVotes/0/decidedBy/username","value":"sam@example.com"}]`)))
		Expect(err).To(HaveOccurred())

		By("status, Event and the manager's log name her")
		Eventually(func(g Gomega) {
			rs := s.get().Status.Review
			g.Expect(rs.Phase).To(Equal(agentsv1alpha1.ReviewApproved))
			g.Expect(rs.Votes).To(ConsistOf(And(HaveField("By.Username", rita.name), HaveField("Counted", true))))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(s.get().Status.ReviewHistory[0].DecidedBy).To(Equal([]string{rita.name}))
		note := "plan review r1 (revision 1): Approved by rita@example.com"
		Eventually(func(g Gomega) {
			var evs eventsv1.EventList
			g.Expect(k8s.List(ctx, &evs, client.InNamespace(s.ns))).To(Succeed())
			var notes []string
			for _, e := range evs.Items {
				if e.Regarding.Name == s.name && e.Reason == "ReviewDecided" {
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(ContainElement(note))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(managerLog.String()).To(MatchRegexp(regexp.QuoteMeta(note) + `\s+\{"agentSession": \{"name":"` + s.name + `","namespace":"` + s.ns + `"\}, "reason": "ReviewDecided"`))

		By("kubectl plan status and log show who decided and who selected")
		Eventually(func() []agentsv1alpha1.PlanModeChange { return s.get().Status.PlanMode.Changes }).WithTimeout(10*time.Second).Should(ConsistOf(
			And(HaveField("Active", true), HaveField("Cause", agentsv1alpha1.PlanModeChangeSelection), HaveField("By.Username", tom.name)),
			And(HaveField("Active", false), HaveField("Cause", agentsv1alpha1.PlanModeChangeApproval), HaveField("Revision", BeEquivalentTo(1)))),
			"the creation's plan mode on, and the approved exit appended between turns")
		status := rita.kplan(s.ns, "status", s.name).OK()
		Expect(status).To(MatchRegexp(`Selected:\s+false \(off\) \(spec.planMode.active, by rita@example.com at \S+\)\n`))
		Expect(status).To(MatchRegexp(`Review:\s+"Fix the flake" \(revision 1, review r1, turn 0\): Approved by rita@example.com \(`))
		log := rita.kplan(s.ns, "log", s.name, "--store", storeURL).OK()
		Expect(log).To(MatchRegexp(`plan/mode\s+plan mode on \(active=true\) selected by tom@example.com\n`))
		Expect(log).To(MatchRegexp(`plan/mode\s+plan mode off \(active=false\) by the approval of revision 1 \(completed by rita@example.com\)\n`))
	})

	It("with a policy of two approvers, not the requester: the requester's approval does not count, one leaves it pending, the second approves", func() {
		By("the policy is validated with field paths")
		bad := &agentsv1alpha1.ReviewPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: nsPolicy, Name: "lax"},
			Spec: agentsv1alpha1.ReviewPolicySpec{Approvals: 3, Approvers: &agentsv1alpha1.Approvers{Users: []string{rita.name, sam.name}}}}
		err := k8s.Create(ctx, bad)
		Expect(err).To(MatchError(ContainSubstring(`metadata.name: Invalid value: "lax": a namespace has one ReviewPolicy, named "default"`)))
		Expect(err).To(MatchError(ContainSubstring(`spec.approvals: Invalid value: 3: needs 3 distinct approvers, but spec.approvers names only 2 user(s) and no group`)))
		Expect(k8s.Create(ctx, &agentsv1alpha1.ReviewPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: nsPolicy, Name: "default"},
			Spec: agentsv1alpha1.ReviewPolicySpec{Approvals: 2, SelfApproval: agentsv1alpha1.SelfApprovalForbidden}})).To(Succeed())

		s := newRSession(nsPolicy, nil)
		s.startAgent()
		ch := s.CallExit(planA)
		rs := s.opened()
		Expect(rs.Requester).To(HaveField("Username", tom.name))
		Expect(rs.ApprovalsRequired).To(BeEquivalentTo(2))

		By("tom, who selected plan mode, may not approve his own request")
		tom.kplan(s.ns, "approve", s.name, "--revision", "1").Fails(`this decision cannot count: "tom@example.com" selected plan mode for this work (spec.planMode.selectedBy), so is its requester, ` +
			`and ReviewPolicy team-r/default forbids approving your own request (spec.selfApproval: Forbidden): ask another approver`)
		Expect(s.get().Spec.ReviewVotes).To(BeEmpty())

		By("one approval leaves the review pending")
		Expect(rita.kplan(s.ns, "approve", s.name, "--revision", "1").OK()).To(Equal(`Approved "Fix the flake" (review ` + rs.ID +
			`): 1 more approval needed (ReviewPolicy team-r/default needs 2 distinct approvers); the plan stays under review until then.` + "\n"))
		as := s.get()
		Expect(as.Status.Review.Phase).To(Equal(agentsv1alpha1.ReviewPending))
		Expect(as.Status.Review.Approvals).To(BeEquivalentTo(1))
		Expect(as.Spec.PlanMode.Active).To(Equal(bp(true)), "not approved yet: plan mode stays selected")
		Consistently(ch).WithTimeout(300*time.Millisecond).ShouldNot(Receive(), "one approval of two answers nothing")
		Expect(rita.kplan(s.ns, "review", s.name).OK()).To(ContainSubstring(
			"State:      Pending, awaiting approval: 1 of 2 (ReviewPolicy team-r/default needs 2 distinct approvers); 1 more approval needed"))
		rita.kplan(s.ns, "approve", s.name, "--revision", "1").Fails(`"rita@example.com" already decided review "` + rs.ID + `"`)

		By("the second approver approves")
		Expect(sam.kplan(s.ns, "approve", s.name, "--revision", "1").OK()).To(Equal(`Approved "Fix the flake" (review ` + rs.ID + "): the agent leaves plan mode at its next step.\n"))
		e := receive(ch)
		Expect(e.Err).NotTo(HaveOccurred())
		Expect(e.Result.Approved).To(BeTrue())
		as = s.get()
		Expect(as.Status.ReviewHistory[len(as.Status.ReviewHistory)-1].DecidedBy).To(Equal([]string{rita.name, sam.name}))
		Expect(as.Spec.PlanMode.Active).To(Equal(bp(false)))
		Expect(as.Spec.PlanMode.SelectedBy.Username).To(Equal(sam.name), "the approval that completed the review deselected plan mode")
		Expect(s.NextStep().Active).To(BeFalse(), "the exit is applied at the next step boundary")
	})

	It("counts two approvals written at the same moment from the same read", func() {
		s := newRSession(nsPolicy, nil)
		Expect(s.postRaw(fmt.Sprintf(`{"id":"r1","plan":%q,"turn":0}`, planA))).To(Succeed())
		s.opened()
		base := s.get() // both reviewers decide on this read
		vote := func(c client.Client) error {
			body, _ := json.Marshal([]map[string]any{{"op": "test", "path": "/spec/reviewVotes", "value": nil},
				{"op": "add", "path": "/spec/reviewVotes", "value": []any{map[string]any{"reviewID": "r1", "decision": "Approve", "planSHA256": planmode.PlanSHA256(planA)}}}})
			err := c.Patch(ctx, base.DeepCopy(), client.RawPatch(k8stypes.JSONPatchType, body))
			if err == nil {
				return nil
			}
			// The other vote created the list first: append to it (what kubectl plan approve does on a fresh read).
			body, _ = json.Marshal([]map[string]any{{"op": "add", "path": "/spec/reviewVotes/-",
				"value": map[string]any{"reviewID": "r1", "decision": "Approve", "planSHA256": planmode.PlanSHA256(planA)}}})
			return c.Patch(ctx, base.DeepCopy(), client.RawPatch(k8stypes.JSONPatchType, body))
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, p := range []*person{rita, sam} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = vote(p.c)
			}()
		}
		close(start)
		wg.Wait()
		Expect(errs).To(HaveEach(BeNil()))
		Eventually(func(g Gomega) {
			as := s.get()
			g.Expect(as.Status.Review.Phase).To(Equal(agentsv1alpha1.ReviewApproved))
			g.Expect(as.Status.ReviewHistory[0].DecidedBy).To(ConsistOf(rita.name, sam.name))
		}).WithTimeout(10 * time.Second).Should(Succeed())

		By("the single-decision form refuses a second reviewer's write instead of losing the first decision")
		t := newRSession(nsPolicy, nil)
		Expect(t.postRaw(fmt.Sprintf(`{"id":"r1","plan":%q,"turn":0}`, planA))).To(Succeed())
		t.opened()
		decision := fmt.Sprintf(`{"spec":{"review":{"reviewID":"r1","decision":"Approve","planSHA256":%q,"decidedBy":null,"decidedAt":null}}}`, planmode.PlanSHA256(planA))
		Expect(rita.c.Patch(ctx, t.get(), client.RawPatch(k8stypes.MergePatchType, []byte(decision)))).To(Succeed())
		Expect(sam.c.Patch(ctx, t.get(), client.RawPatch(k8stypes.MergePatchType, []byte(decision)))).
			To(MatchError(ContainSubstring(`spec.review: Forbidden: holds the Approve of "rita@example.com" on the open review "r1", which cannot change while it is open: ` +
				`add a decision to spec.reviewVotes instead`)))
		Expect(t.get().Spec.Review.DecidedBy.Username).To(Equal(rita.name), "the first decision is kept")
	})

	It("expires a review by the manager's clock: a skewed requestedAt does not move the deadline", func() {
		s := newRSession(nsNoPolicy, func(spec *agentsv1alpha1.AgentSessionSpec) {
			spec.ReviewTimeout = &metav1.Duration{Duration: 3 * time.Second}
		})
		Expect(s.postRaw(fmt.Sprintf(`{"id":"r1","plan":%q,"turn":0,"requestedAt":"2099-01-01T00:00:00Z"}`, planA))).To(Succeed())
		rs := s.opened()
		Expect(rs.ExpiresAt.Time).To(Equal(rs.OpenedAt.Add(3 * time.Second)))
		Eventually(func() agentsv1alpha1.ReviewPhase { return s.get().Status.Review.Phase }).WithTimeout(15 * time.Second).Should(Equal(agentsv1alpha1.ReviewExpired))
	})

	It("kubectl plan review --diff shows what changed since the previous revision", func() {
		s := newRSession(nsNoPolicy, nil)
		s.startAgent()
		ch := s.CallExit(planA)
		s.opened()
		rita.kplan(s.ns, "review", s.name, "--diff", "--store", storeURL).Fails("revision 1 is the session's first plan: there is no previous revision to compare it with")
		rita.kplan(s.ns, "revise", s.name, "--feedback", "add a timeout").OK()
		Expect(exitErr(receive(ch).Err).Code).To(Equal(agentsdk.ExitKeepPlanning))
		ch = s.CallExit(planB)
		Eventually(func() int64 { return s.opened().Revision }).WithTimeout(10 * time.Second).Should(BeEquivalentTo(2))
		out := rita.kplan(s.ns, "review", s.name, "--diff", "--store", storeURL).OK()
		Expect(out).To(MatchRegexp(`^--- revision 1 \(review \S+, KeepPlanning\)\n\+\+\+ revision 2 \(review \S+, under review\)\n`))
		Expect(out).To(ContainSubstring("-2. Add the lock.\n+2. Add the lock with a timeout.\n+3. Run the unit tests.\n"))
		Expect(rita.kplan(s.ns, "review", s.name).OK()).To(ContainSubstring(
			"Revision:   2 (after revision 1, KeepPlanning by rita@example.com: kubectl plan review " + s.name + " --diff shows what changed)"))
		rita.kplan(s.ns, "dismiss", s.name).OK()
		receive(ch)
	})

	It("marks a review whose agent is gone, and kubectl plan says so; an agent writes only its own kind of Lease", func() {
		s := newRSession(nsNoPolicy, nil)
		lease := func(name string, seconds int32) *coordinationv1.Lease {
			now := metav1.NewMicroTime(time.Now())
			return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pod-1"), LeaseDurationSeconds: &seconds, RenewTime: &now, AcquireTime: &now}}
		}
		By("the agent's service account may write its session's liveness Lease, and no other Lease")
		Eventually(func() error { return s.ident.c.Create(ctx, lease("some-controller-leader", 15)) }).WithTimeout(10 * time.Second).
			Should(MatchError(ContainSubstring("an agent identity may write only agent liveness Leases, named agentsession-<session>")))
		Expect(s.ident.c.Create(ctx, lease(agentsv1alpha1.AgentLeaseName(s.name), 3))).To(Succeed(), "a short Lease: the agent stops renewing it")

		Expect(s.postRaw(fmt.Sprintf(`{"id":"r1","plan":%q,"turn":0}`, planA))).To(Succeed())
		Eventually(func() *bool { return s.opened().AgentConnected }).WithTimeout(10 * time.Second).Should(HaveValue(BeTrue()))
		Eventually(func() *bool { return s.get().Status.Review.AgentConnected }).WithTimeout(20*time.Second).Should(HaveValue(BeFalse()),
			"the Lease expired: the manager looks again when it would")
		Expect(s.get().Status.Conditions).To(ContainElement(And(HaveField("Type", agentsv1alpha1.ConditionAwaitingReview),
			HaveField("Message", ContainSubstring("its agent is gone (no liveness Lease renewal), so no agent waits for the decision")))))
		Expect(rita.kplan(s.ns, "review", s.name).OK()).To(MatchRegexp(`State:\s+Pending, awaiting a decision \(kubectl plan approve\|revise\|dismiss ` + s.name +
			`\); the agent is gone \(no liveness Lease renewal since \S+\): no agent waits for the decision\n`))
		Expect(rita.kplan(s.ns, "status", s.name).OK()).To(MatchRegexp(`Agent:\s+gone \(no liveness Lease renewal since \S+\): no agent waits for the review\n`))
		Expect(rita.kplan(s.ns, "list", "--awaiting-review").OK()).To(MatchRegexp(s.name + `\s+1\s+\S+\s+Fix the flake\s+a decision \(agent gone\)\n`))
		r := rita.kplan(s.ns, "dismiss", s.name, "--wait=0")
		r.OK()
		Expect(r.Err).To(ContainSubstring("warning: the plan's agent is gone (no liveness Lease renewal since "))
	})

	It("lists the plans awaiting review across namespaces, oldest first, and the metric counts them", func() {
		older := newRSession(nsPolicy, nil)
		Expect(older.postRaw(fmt.Sprintf(`{"id":"r1","plan":%q,"turn":0}`, planA))).To(Succeed())
		first := older.opened()
		newer := newRSession(nsNoPolicy, nil)
		Eventually(func() bool { return time.Since(first.OpenedAt.Time) > time.Second }).WithTimeout(5*time.Second).Should(BeTrue(), "a later opening time, to the second")
		Expect(newer.postRaw(fmt.Sprintf(`{"id":"r1","plan":%q,"turn":0}`, planB))).To(Succeed())
		newer.opened()

		out := runKubectl("plan", "list", "--awaiting-review", "-A").OK()
		Expect(out).To(HavePrefix("NAMESPACE"))
		Expect(out).To(MatchRegexp(`(?m)^NAMESPACE\s+NAME\s+REVISION\s+AGE\s+PLAN\s+WAITING FOR$`))
		Expect(out).To(MatchRegexp(`(?m)^team-r\s+` + older.name + `\s+1\s+\S+\s+Fix the flake\s+2 more approvals needed \(0 of 2\) from anyone but tom@example.com \(the requester\)$`))
		Expect(out).To(MatchRegexp(`(?m)^team-b\s+` + newer.name + `\s+1\s+\S+\s+Fix the flake\s+a decision$`))
		Expect(strings.Index(out, older.name)).To(BeNumerically("<", strings.Index(out, newer.name)), "oldest first")
		Expect(rita.kplan(nsNoPolicy, "list", "--awaiting-review").OK()).NotTo(ContainSubstring(older.name), "without -A: the namespace's alone")

		By("the metrics endpoint reports them")
		reg := prometheus.NewRegistry()
		Expect(reg.Register(sessionGauges)).To(Succeed())
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		DeferCleanup(srv.Close)
		var scraped string
		// The gauges follow the manager's cache, which may be a moment behind the reads above.
		Eventually(func(g Gomega) {
			resp, err := http.Get(srv.URL)
			g.Expect(err).NotTo(HaveOccurred())
			body, err := io.ReadAll(resp.Body)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resp.Body.Close()).To(Succeed())
			scraped = string(body)
			g.Expect(scraped).To(MatchRegexp(`(?m)^planmode_reviews_pending [2-9]\d*$`))
			g.Expect(scraped).To(MatchRegexp(`(?m)^planmode_review_pending_oldest_seconds\{namespace="team-b"\} \S+$`))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		m := regexp.MustCompile(`(?m)^planmode_review_pending_oldest_seconds\{namespace="team-r"\} (\S+)$`).FindStringSubmatch(scraped)
		Expect(m).NotTo(BeNil(), scraped)
		var age float64
		_, err := fmt.Sscan(m[1], &age)
		Expect(err).NotTo(HaveOccurred())
		Expect(age).To(BeNumerically(">=", time.Since(first.OpenedAt.Time).Seconds()-1))
	})
})
