package reliability

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/webhooks"
)

// Tenancy under the manager's default flags (binding required), with real stores and two
// manager shards: no namespace reads another's log through a fork, whether its parent session
// still exists (admission refuses it, served by a shard that does not watch the parent) or was
// deleted (the log store refuses it in the fork's own transaction, whichever shard or agent
// asks); no agent drops another session's messages; a message id is used once; a session stays
// inside its size budget.

const shardLabel = "reliability.harness.dev/shard"

// shardSelector is the --shard-selector of a manager that reconciles the sessions labelled s.
func shardSelector(s string) string { return "--shard-selector=" + shardLabel + "=" + s }

// labelSessions puts w's sessions into shard s.
func labelSessions(w *workload, s string) {
	GinkgoHelper()
	for _, name := range w.names {
		Expect(k8s.Patch(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}},
			mergePatch(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, shardLabel, s)))).To(Succeed())
	}
}

var _ = Describe("tenancy: forks across namespaces", func() {
	for _, backend := range []string{"postgres", "sqlite"} {
		It("refuses a fork of another namespace's log on "+backend+": a live parent at admission (served by the other shard), a deleted one in the log store", func() {
			var url string
			if backend == "postgres" {
				var err error
				url, err = pg.NewDatabase(suiteCtx, "forks")
				Expect(err).NotTo(HaveOccurred())
			} else {
				url = "sqlite://" + filepath.Join(workDir, fmt.Sprintf("forks-%d.db", time.Now().UnixNano()))
			}
			victim := newWorkload("team-a", 1, url, nil)
			labelSessions(victim, "a")
			startManager(managerOpts{store: url, extra: []string{shardSelector("a")}})
			startManager(managerOpts{store: url, extra: []string{shardSelector("b")}})
			victim.startAgents()
			eventually(time.Minute, func(g Gomega) { g.Expect(victim.steps.Load()).To(BeNumerically(">", 3)) })
			victim.stopAgents()
			parentID := victim.sessionID("s0")
			owner, ok, err := victim.store.OwnerOf(suiteCtx, parentID)
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeTrue(), "the parent's log is owned once its session ran")
			Expect(owner.Namespace).To(Equal(victim.ns))
			thief := newWorkload("team-b", 0, url, nil)
			fork := func(name string) *v1alpha1.AgentSession {
				return &v1alpha1.AgentSession{
					ObjectMeta: metav1.ObjectMeta{Namespace: thief.ns, Name: name, Labels: map[string]string{shardLabel: "b"}},
					Spec: v1alpha1.AgentSessionSpec{SessionID: thief.ns + "." + name, Agent: &v1alpha1.AgentBinding{ServiceAccountName: agentServiceAccount(name)},
						Fork: &v1alpha1.ForkSource{SessionID: parentID}},
				}
			}

			By("live parent: admission by the manager that watches no shard (nor the parent) refuses it")
			only(admissionManager)
			err = createAdmitted(thief.user, fork("live"))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring(`spec.fork.sessionID: Forbidden: "` + parentID + `" is the session log of an AgentSession in another namespace`))

			By("deleted parent: admission has nothing to check against, the log store refuses the fork, whichever shard or agent asks")
			Expect(k8s.Delete(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: victim.ns, Name: "s0"}})).To(Succeed())
			eventually(30*time.Second, func(g Gomega) {
				err := k8s.Get(suiteCtx, client.ObjectKey{Namespace: victim.ns, Name: "s0"}, &v1alpha1.AgentSession{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
			})
			child := fork("copy")
			Expect(createAdmitted(thief.user, child)).To(Succeed())
			thief.names = []string{"copy"}
			eventually(time.Minute, func(g Gomega) {
				s := thief.get("copy")
				c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(v1alpha1.ReasonForkRefused))
				g.Expect(c.Message).To(ContainSubstring("belongs to an AgentSession of another namespace"))
				g.Expect(c.Message).NotTo(ContainSubstring(victim.ns+"/s0"), "the refusal does not name the other tenant's session")
			})
			_, err = agentsdk.New(suiteCtx, agentsdk.Options{Config: thief.agentConfigFor("copy"), Namespace: thief.ns, Name: "copy", Store: thief.store, SyncTimeout: 10 * time.Second})
			var refused *sessionlog.OwnershipError
			Expect(errors.As(err, &refused)).To(BeTrue(), "the child's agent seeds the fork itself and is refused too: %v", err)
			Expect(refused.Refusal).To(Equal(sessionlog.RefusedParentOfAnotherNamespace))
			_, err = thief.store.Info(suiteCtx, child.Spec.SessionID)
			Expect(errors.Is(err, sessionlog.ErrNotFound)).To(BeTrue(), "not one event of team-a's log was copied: %v", err)

			By("the log stays owned until an explicit release, then the next AgentSession that names it owns it")
			Expect(victim.store.ReleaseOwner(suiteCtx, parentID, sessionlog.Owner{Namespace: victim.ns, Name: "s0"})).To(Succeed())
			_, err = thief.store.Fork(suiteCtx, parentID, "released-copy", -1, sessionlog.Owner{Namespace: thief.ns, Name: "released-copy", UID: "u"})
			Expect(sessionlog.IsOwnershipRefusal(err)).To(BeTrue(), "a released log belongs to nobody: nobody forks it: %v", err)
			writeRow(row{Fault: "tenancy: cross-namespace fork, " + backend, Runs: 2,
				Note: "live parent refused at admission by the manager that watches no shard; deleted parent refused by the log store " +
					"(shard b's manager and the child's agent); 0 events copied; released log forkable by nobody"})
		})
	}
})

var _ = Describe("tenancy: agents and their sessions' messages", func() {
	It("refuses under the default flags an agent's forged status.agent.steerID of another session, bound or stored unbound earlier", func() {
		url := "sqlite://" + filepath.Join(workDir, fmt.Sprintf("forgery-%d.db", time.Now().UnixNano()))
		w := newWorkload("forgery", 2, url, nil)
		startManager(managerOpts{store: url})

		By("a session stored unbound while binding was off (a manager with --webhook-require-agent-binding=false served admission)")
		loose := startManager(managerOpts{store: "sqlite://" + filepath.Join(workDir, "loose.db"),
			extra: []string{"--webhook-require-agent-binding=false", "--shard-selector=reliability.harness.dev/none=none"}})
		only(loose)
		legacy := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "legacy"},
			Spec: v1alpha1.AgentSessionSpec{SessionID: w.ns + ".legacy", SteerQueue: []v1alpha1.SteerMessage{{ID: "m1", Text: "the user's message"}}}}
		Expect(createAdmitted(w.user, legacy)).To(Succeed())
		loose.kill()
		only(admissionManager)

		By("the default: another session's bound agent, and any agent of the namespace, may not mark its message delivered")
		forger, err := client.New(w.agentConfigFor("s0"), client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		forge := func(name string) error {
			return throughWebhooks(func() error {
				return forger.Status().Patch(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}},
					mergePatch(`{"status":{"agent":{"steerID":"m1"}}}`))
			})
		}
		err = forge("legacy")
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`session "legacy" names no agent (spec.agent) and this operator lets only a session's bound agent write its status.agent`))
		Expect(k8s.Patch(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "s1"}},
			mergePatch(`{"spec":{"steerQueue":[{"id":"m1","text":"s1's user's message"}]}}`))).To(Succeed())
		err = forge("s1")
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`session "s1" is bound to its agent's service account "` + agentServiceAccount("s1") + `"`))
		for _, name := range []string{"legacy", "s1"} {
			Expect(w.get(name).Status.Agent).To(Or(BeNil(), HaveField("SteerID", BeEmpty())), "%s: the message is not marked delivered", name)
		}
		writeRow(row{Fault: "tenancy: forged status.agent.steerID, default flags", Runs: 2,
			Note: "refused for an unbound session stored earlier and for another bound one; no message marked delivered"})
	})

	It("uses each message id once for a session's life with the real agent delivering: an id reused after delivery is refused", func() {
		url := "sqlite://" + filepath.Join(workDir, fmt.Sprintf("queue-%d.db", time.Now().UnixNano()))
		w := newWorkload("queue", 1, url, nil)
		w.driverSkip = map[string]bool{"s0": true}
		startManager(managerOpts{store: url})
		w.startAgents()
		queue := func(msgs string) error {
			return w.user.Patch(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "s0"}},
				mergePatch(`{"spec":{"steerQueue":`+msgs+`}}`))
		}
		delivered := func(id, text string) {
			GinkgoHelper()
			eventually(time.Minute, func(g Gomega) {
				g.Expect(w.get("s0").Status.Agent).NotTo(BeNil())
				g.Expect(w.get("s0").Status.Agent.SteerID).To(Equal(id))
				evs, err := w.store.ReadFrom(suiteCtx, w.sessionID("s0"), 0, 0)
				g.Expect(err).NotTo(HaveOccurred())
				n := 0
				for _, e := range evs {
					if e.Type == harness.TypeUserMessage && strings.Contains(string(e.Data), text) {
						n++
					}
				}
				g.Expect(n).To(Equal(1), "%q delivered once", text)
			})
		}
		Expect(queue(`[{"id":"m1","text":"first message"}]`)).To(Succeed())
		delivered("m1", "first message")
		Expect(queue(`[]`)).To(Succeed(), "the writer drops the delivered message")
		for _, reuse := range []string{`[{"id":"m1","text":"lost if admitted"}]`, `[{"id":"m0","text":"lost if admitted"}]`} {
			err := queue(reuse)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", reuse, err)
			Expect(err.Error()).To(ContainSubstring(`spec.steerQueue[0].id: Invalid value`))
			Expect(err.Error()).To(ContainSubstring(`must sort after "m1", the last id this session has used`))
		}
		Expect(queue(`[{"id":"m2","text":"second message"}]`)).To(Succeed())
		delivered("m2", "second message")
		w.stopAgents()
		writeRow(row{Fault: "tenancy: message id reuse", Runs: 2,
			Note: "an id reused after delivery, and one before it, refused naming spec.steerQueue[0].id; each admitted message delivered once"})
	})

	It("refuses a write over the session's size budget naming the field, and the agent's largest plan still fits", func() {
		url := "sqlite://" + filepath.Join(workDir, fmt.Sprintf("budget-%d.db", time.Now().UnixNano()))
		w := newWorkload("budget", 1, url, nil)
		big := strings.Repeat("x", 64<<10)
		queue := func(n int) error {
			msgs := make([]v1alpha1.SteerMessage, n)
			for i := range msgs {
				msgs[i] = v1alpha1.SteerMessage{ID: fmt.Sprintf("m%02d", i+1), Text: big}
			}
			s := w.get("s0")
			patch := client.MergeFrom(s.DeepCopy())
			s.Spec.SteerQueue = msgs
			return w.user.Patch(suiteCtx, s, patch)
		}
		full := webhooks.MaxUserSessionBytes / len(big)
		err := queue(full + 1)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.steerQueue: Invalid value"))
		Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("over its budget of %d bytes", webhooks.MaxUserSessionBytes)))
		Expect(err.Error()).NotTo(ContainSubstring("request is too large"))
		Expect(queue(full - 1)).To(Succeed())
		agent, err := client.New(w.agentConfigFor("s0"), client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		plan := "# The plan\n\n" + strings.Repeat("p", webhooks.MaxPlanBytes-len("# The plan\n\n"))
		body := fmt.Sprintf(`{"status":{"agent":{"review":{"id":"r1","plan":%q}}}}`, plan)
		Expect(agent.Status().Patch(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "s0"}}, mergePatch(body))).To(Succeed(),
			"the largest plan beside the largest queue a user may write: no etcd refusal")
		Expect(w.get("s0").Status.Agent.Review.Plan).To(HaveLen(webhooks.MaxPlanBytes))
		writeRow(row{Fault: "tenancy: size budget", Runs: 2,
			Note: fmt.Sprintf("%d messages of 64 KiB refused naming spec.steerQueue; %d admitted, then a %d-byte plan post admitted", full+1, full-1, webhooks.MaxPlanBytes)})
	})
})

// only makes m the one manager serving admission (every other ready manager is excluded from
// the gateway until the spec ends).
func only(m *managerProc) {
	GinkgoHelper()
	for _, other := range gateway.managers() {
		gateway.exclude(other, other != m)
		if other != m {
			DeferCleanup(gateway.exclude, other, false)
		}
	}
	eventually(30*time.Second, func(g Gomega) { g.Expect(gateway.readyManagers()).To(Equal(1)) })
}
