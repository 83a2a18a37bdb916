package reliability

import (
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
)

// storeTimeout is the managers' --log-store-timeout in these specs, and the agents' too
// (newWorkload): the bound within which a hung store must show.
const storeTimeout = 2 * time.Second

// lostSelections is the check run after every kill and fault, before the test repairs
// anything: for each session, the state the status claims committed must be what the log holds
// at the position the status recorded (log prefixes never change, so the check is free of
// races with the writers still running), and a selection the manager took on and no longer
// holds pending must be that committed state. A failure is a lost selection.
func (w *workload) lostSelections() []string {
	GinkgoHelper()
	return w.lostSelectionsAt(w.statuses())
}

// statuses snapshots every session's status.planMode.
func (w *workload) statuses() map[string]v1alpha1.PlanModeStatus {
	GinkgoHelper()
	out := map[string]v1alpha1.PlanModeStatus{}
	for _, name := range w.names {
		out[name] = w.get(name).Status.PlanMode
	}
	return out
}

// lostSelectionsAt checks statuses taken earlier (during a fault the log cannot be read in).
func (w *workload) lostSelectionsAt(statuses map[string]v1alpha1.PlanModeStatus) []string {
	GinkgoHelper()
	var lost []string
	for _, name := range w.names {
		pm := statuses[name]
		if pm.NextSeq == 0 {
			continue
		}
		evs, err := w.store.ReadFrom(suiteCtx, w.sessionID(name), 0, int(pm.NextSeq))
		if err != nil {
			lost = append(lost, fmt.Sprintf("%s: cannot read the log up to the recorded seq %d: %v", name, pm.NextSeq, err))
			continue
		}
		active := false
		for _, e := range evs {
			if e.Type == harness.TypePlanMode {
				active = strings.Contains(string(e.Data), "true")
			}
		}
		if active != pm.Active {
			lost = append(lost, fmt.Sprintf("%s: status says plan mode %v at seq %d, the log holds %v there", name, pm.Active, pm.NextSeq, active))
		}
		if pm.Selection != nil && !pm.Pending && *pm.Selection != pm.Active {
			lost = append(lost, fmt.Sprintf("%s: selection %v taken on, not pending, but committed %v", name, *pm.Selection, pm.Active))
		}
	}
	return lost
}

// readyReason is a session's Ready reason ("" before the first status).
func (w *workload) readyReason(name string) string {
	c := meta.FindStatusCondition(w.get(name).Status.Conditions, v1alpha1.ConditionReady)
	if c == nil {
		return ""
	}
	return c.Reason
}

var _ = Describe("hung PostgreSQL (SIGSTOP) with the webhooks installed", func() {
	It("keeps admission up, reports the hung store on the session and fails proposals within a bound, and no worker stays stuck", func() {
		url, err := pg.NewDatabase(suiteCtx, "hung")
		Expect(err).NotTo(HaveOccurred())
		w := newWorkload("hung", 3, url, nil)
		w.driverSkip = map[string]bool{"s0": true}
		m := startManager(managerOpts{store: url, extra: []string{"--log-store-timeout=" + storeTimeout.String()}})
		w.startAgents()
		w.startDriver(1, 0, 150*time.Millisecond)
		eventually(time.Minute, func(g Gomega) {
			g.Expect(w.steps.Load()).To(BeNumerically(">", 20))
			g.Expect(w.planModes(g)).To(BeNumerically(">=", 1))
			g.Expect(gateway.readyManagers()).To(Equal(2))
		})
		// Admission is now served by the manager on the hung store alone.
		gateway.exclude(admissionManager, true)
		DeferCleanup(gateway.exclude, admissionManager, false)

		pid := pg.postmasterPID()
		Expect(pgtest.PauseServer(pid)).To(Succeed())
		resumed := false
		DeferCleanup(func() {
			if !resumed {
				_ = pgtest.ResumeServer(pid)
			}
		})
		hung := time.Now()
		refusedBefore, failedBefore, restartsBefore := gateway.refused.Load(), w.failedProposals.Load(), w.agentRestarts.Load()

		By("admission stays available: user writes are admitted")
		x := !w.get("s0").Status.PlanMode.Active
		Expect(k8s.Patch(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "s0"}},
			mergePatch(fmt.Sprintf(`{"spec":{"planMode":{"active":%t}}}`, x)))).To(Succeed(), "a selection refused while the store hangs")

		By("the manager says why on the session (its own status write admitted), within a bound")
		eventually(5*storeTimeout+10*time.Second, func(g Gomega) {
			s := w.get("s0")
			ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonLogStoreError))
			g.Expect(ready.Message).To(ContainSubstring("did not answer"))
			g.Expect(s.Status.PlanMode.Active).NotTo(Equal(x), "committed while the store hangs?")
		})
		reported := time.Since(hung)
		By("the agents' proposals fail within a bound instead of hanging")
		eventually(5*storeTimeout+10*time.Second, func(g Gomega) {
			g.Expect(w.failedProposals.Load() + w.agentRestarts.Load()).To(BeNumerically(">", failedBefore+restartsBefore))
		})
		failed := time.Since(hung)

		By("the manager stays in the webhook Service for as long as the store hangs")
		Consistently(func(g Gomega) {
			g.Expect(m.exited()).To(BeFalse())
			g.Expect(gateway.readyManagers()).To(Equal(1), "the manager left the webhook Service while the store hangs")
		}).WithTimeout(3 * storeTimeout).WithPolling(readinessPoll).Should(Succeed())
		Expect(k8s.Patch(suiteCtx, &v1alpha1.PlanModeConfig{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: v1alpha1.DefaultPlanModeConfigName}},
			mergePatch(`{"metadata":{"labels":{"reliability.harness.dev/edited":"during-hang"}}}`))).To(Succeed(), "a PlanModeConfig write refused while the store hangs")
		Expect(gateway.refused.Load()).To(Equal(refusedBefore), "admission connections refused while the store hung")
		during := w.statuses() // checked against the log once it can be read again

		By("once the store continues, every worker is free: s0's selection lands")
		w.stopDriver()
		Expect(pgtest.ResumeServer(pid)).To(Succeed())
		resumed = true
		up := time.Now()
		Expect(w.lostSelectionsAt(during)).To(BeEmpty())
		eventually(time.Minute, func(g Gomega) {
			s := w.get("s0")
			g.Expect(s.Status.PlanMode.Selection).To(Equal(&x))
			g.Expect(s.Status.PlanMode.Active).To(Equal(x))
		})
		recovery := time.Since(up)
		w.settle(2 * time.Minute)
		w.report("PostgreSQL hung (SIGSTOP), webhooks installed", 1, recovery,
			fmt.Sprintf("hung %.1fs; admission refused 0 times; LogStoreUnavailable after %.1fs, a failed proposal after %.1fs (store deadline %s); s0's selection committed %.1fs after SIGCONT",
				up.Sub(hung).Seconds(), reported.Seconds(), failed.Seconds(), storeTimeout, recovery.Seconds()))
	})
})

// agentProc is one reference agent process (cmd/refagent).
type agentProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (w *workload) startAgentProc(name, scriptPath string) *agentProc {
	GinkgoHelper()
	cmd := exec.Command(refagentBin, "--namespace", w.ns, "--name", name, "--store", w.storeURL, "--script", scriptPath,
		"--loop", "--quiet", "--step-delay=10ms", "--boundary-timeout=2s")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+w.agentKubeconfigFor(name))
	logf, err := os.Create(filepath.Join(workDir, fmt.Sprintf("agent-%s-%s-%d.log", w.ns, name, time.Now().UnixNano())))
	Expect(err).NotTo(HaveOccurred())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	Expect(cmd.Start()).To(Succeed())
	p := &agentProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(p.done) }()
	return p
}

func (p *agentProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stepsInLogs counts the steps the agents logged (their processes report to no counter).
func (w *workload) stepsInLogs() int64 {
	GinkgoHelper()
	var n int64
	for _, name := range w.names {
		evs, err := w.store.ReadFrom(suiteCtx, w.sessionID(name), 0, 0)
		Expect(err).NotTo(HaveOccurred())
		for _, e := range evs {
			if e.Type == harness.TypeStepStart {
				n++
			}
		}
	}
	return n
}

var _ = Describe("agent processes killed (SIGKILL)", func() {
	It("loses no selection at any kill, checked after each before anything is repaired, and converges", func() {
		url, err := pg.NewDatabase(suiteCtx, "agentkill")
		Expect(err).NotTo(HaveOccurred())
		w := newWorkload("agentkill", 3, url, nil)
		scriptPath := filepath.Join(workDir, "agentkill.script")
		Expect(os.WriteFile(scriptPath, []byte(agentScript), 0o600)).To(Succeed())
		startManager(managerOpts{store: url})
		procs := map[string]*agentProc{}
		for _, name := range w.names {
			procs[name] = w.startAgentProc(name, scriptPath)
		}
		DeferCleanup(func() {
			for _, p := range procs {
				p.kill()
			}
		})
		w.startDriver(1, 0, 150*time.Millisecond)
		eventually(time.Minute, func(g Gomega) { g.Expect(w.stepsInLogs()).To(BeNumerically(">", 20)) })

		var lost []string
		for i := 0; i < sizes.agentKills; i++ {
			name := w.names[rand.IntN(len(w.names))]
			// The fault's timing, not a synchronisation: anywhere in a turn or between turns.
			time.Sleep(time.Duration(100+rand.IntN(900)) * time.Millisecond)
			procs[name].kill()
			for _, l := range w.lostSelections() { // before the restarted agent repairs its turn
				lost = append(lost, fmt.Sprintf("after kill %d (%s): %s", i+1, name, l))
			}
			procs[name] = w.startAgentProc(name, scriptPath)
		}
		for _, p := range procs {
			p.kill()
		}
		procs = map[string]*agentProc{}
		// PostgreSQL finishes a request it received before the client died, so a killed agent's
		// last append can commit after the kill: repair, then make sure the logs stay still
		// (with the driver stopped, nothing else writes once the manager has committed).
		w.stopDriver()
		eventually(time.Minute, func(g Gomega) {
			next := map[string]int64{}
			for _, name := range w.names {
				g.Expect(w.closeOpenTurn(suiteCtx, name)).To(Succeed())
				t, err := w.store.Tail(suiteCtx, w.sessionID(name))
				g.Expect(err).NotTo(HaveOccurred())
				next[name] = t.NextSeq
			}
			g.Consistently(func(g Gomega) {
				for _, name := range w.names {
					t, err := w.store.Tail(suiteCtx, w.sessionID(name))
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(t.NextSeq).To(Equal(next[name]), "%s: the log moved after every agent was killed", name)
				}
			}).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		})
		w.steps.Store(w.stepsInLogs())
		recovery := w.settle(2 * time.Minute)
		Expect(lost).To(BeEmpty(), "selections lost at agent kills")
		w.report("agents: SIGKILL of agent processes", sizes.agentKills, recovery,
			fmt.Sprintf("%d kills; lost selections checked after each kill, before the restarted agent repaired its turn: 0", sizes.agentKills))
	})
})

var _ = Describe("SQLite store faults", func() {
	It("reports a locked and a read-only file and recovers from both; a deleted file stops every session instead of running outside plan mode", func() {
		dir := filepath.Join(workDir, fmt.Sprintf("sqlite-faults-%d", time.Now().UnixNano()))
		Expect(os.MkdirAll(dir, 0o750)).To(Succeed())
		path := filepath.Join(dir, "log.db")
		url := "sqlite://" + path
		w := newWorkload("sqlitefaults", 3, url, nil)
		w.driverSkip = map[string]bool{"s0": true}
		m := startManager(managerOpts{store: url, extra: []string{"--log-store-timeout=" + (3 * storeTimeout).String()}})
		w.startAgents()
		w.startDriver(1, 0, 150*time.Millisecond)
		eventually(time.Minute, func(g Gomega) {
			g.Expect(w.steps.Load()).To(BeNumerically(">", 20))
			g.Expect(w.planModes(g)).To(BeNumerically(">=", 1))
			for _, name := range w.names {
				g.Expect(w.get(name).Status.PlanMode.StoreID).NotTo(BeEmpty())
			}
		})
		steps := w.steps.Load()
		toggleS0 := func() bool {
			GinkgoHelper()
			x := !w.get("s0").Status.PlanMode.Active
			Expect(k8s.Patch(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "s0"}},
				mergePatch(fmt.Sprintf(`{"spec":{"planMode":{"active":%t}}}`, x)))).To(Succeed())
			return x
		}
		landed := func(x bool) {
			GinkgoHelper()
			eventually(time.Minute, func(g Gomega) {
				g.Expect(w.get("s0").Status.PlanMode.Active).To(Equal(x))
			})
		}
		notes := make([]string, 0, 3)

		By("locked: another process holds the write lock past the busy timeout")
		// Between turns, so the selection is appended at once (during a turn it would wait for
		// a boundary the agents, failing on the same lock, may never reach).
		w.settle(time.Minute)
		locker, err := sql.Open("sqlite", path+"?_txlock=immediate&_busy_timeout=10000")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(locker.Close)
		tx, err := locker.Begin()
		Expect(err).NotTo(HaveOccurred())
		locked := time.Now()
		x := toggleS0()
		eventually(time.Minute, func(g Gomega) {
			g.Expect(w.readyReason("s0")).To(Equal(v1alpha1.ReasonLogStoreError))
		})
		Expect(w.lostSelections()).To(BeEmpty())
		Expect(tx.Rollback()).To(Succeed())
		unlocked := time.Now()
		landed(x)
		notes = append(notes, fmt.Sprintf("lock held %.1fs, reported, s0's selection landed %.1fs after release",
			unlocked.Sub(locked).Seconds(), time.Since(unlocked).Seconds()))

		By("read-only: the file is restored from a copy that is read-only, then made writable")
		// The copy is taken with everything settled, so the restore rewinds nothing.
		w.startAgents()
		eventually(time.Minute, func(g Gomega) { g.Expect(w.steps.Load()).To(BeNumerically(">", steps+10)) })
		w.settle(time.Minute)
		copyPath := filepath.Join(dir, "restore.db")
		_, err = locker.ExecContext(suiteCtx, `VACUUM INTO ?`, copyPath)
		Expect(err).NotTo(HaveOccurred())
		// The manager is frozen while the copy goes in and becomes read-only: a reconcile in
		// between would open the new file read-write, and that connection keeps writing (into
		// the WAL beside it) after the file turns read-only, so there would be no read-only
		// store to report.
		m.signal(syscall.SIGSTOP)
		for _, p := range []string{"-wal", "-shm"} {
			_ = os.Remove(path + p)
		}
		Expect(os.Rename(copyPath, path)).To(Succeed())
		setImmutable(path, true)
		DeferCleanup(setImmutable, path, false)
		m.signal(syscall.SIGCONT)
		ro := time.Now()
		x = toggleS0()
		eventually(time.Minute, func(g Gomega) {
			g.Expect(w.readyReason("s0")).To(Equal(v1alpha1.ReasonLogStoreError))
		})
		during := w.statuses() // the store cannot even be opened now: checked once it can
		setImmutable(path, false)
		writable := time.Now()
		Expect(w.lostSelectionsAt(during)).To(BeEmpty())
		landed(x)
		notes = append(notes, fmt.Sprintf("read-only %.1fs, reported, s0's selection landed %.1fs after the file was writable again",
			writable.Sub(ro).Seconds(), time.Since(writable).Seconds()))

		By("deleted under the running manager and agents: no file is created again, no step is taken, every session shows LogStoreMismatch")
		w.startAgents()
		w.startDriver(1, 0, 150*time.Millisecond)
		eventually(time.Minute, func(g Gomega) {
			for _, name := range w.names {
				g.Expect(w.get(name).Status.PlanMode.NextSeq).To(BeNumerically(">", 0), name)
			}
		})
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			_ = os.Remove(p)
		}
		deleted := time.Now()
		eventually(time.Minute, func(g Gomega) {
			for _, name := range w.names {
				g.Expect(w.readyReason(name)).To(Equal(v1alpha1.ReasonLogStoreMismatch), name)
				c := meta.FindStatusCondition(w.get(name).Status.Conditions, v1alpha1.ConditionReady)
				g.Expect(c.Message).To(ContainSubstring("its file was deleted; nothing is written to it"), name)
				g.Expect(c.Message).To(ContainSubstring(`docs/operations.md, "The log store was replaced"`), name)
			}
		})
		stopped := time.Since(deleted)
		// Held with the manager, the agents and the driver running: the file is never created
		// again (by the manager's appends, an agent's turn or a reopen), and no agent admits a
		// step (they stop, and a restarted one fails on the same store).
		stepsAtStop := w.steps.Load()
		Consistently(func(g Gomega) {
			_, err := os.Stat(path)
			g.Expect(os.IsNotExist(err)).To(BeTrue(), "the deleted file was created again: %v", err)
			g.Expect(w.steps.Load()).To(Equal(stepsAtStop), "an agent took a step on the lost store")
		}).WithTimeout(5 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		w.stopDriver()
		w.abandonAgents() // their open turns are in the deleted file

		By("the way out: restart on a new store and adopt it, as docs/operations.md says; the agents refuse the new store until then")
		m.kill()
		startManager(managerOpts{store: url, extra: []string{"--log-store-timeout=" + (3 * storeTimeout).String()}})
		Expect(w.store.Close()).To(Succeed())
		w.store, err = sessionlog.Open(suiteCtx, url, sessionlog.CallTimeout(storeTimeout)) // a restarted agent opens the store anew
		Expect(err).NotTo(HaveOccurred())
		_, err = agentsdk.New(suiteCtx, agentsdk.Options{Config: w.agentConfigFor("s1"), Namespace: w.ns, Name: "s1", Store: w.store, SyncTimeout: 10 * time.Second})
		var mismatch *agentsdk.LogStoreMismatchError
		Expect(errors.As(err, &mismatch)).To(BeTrue(), "a restarted agent must refuse a store its session was not recorded against: %v", err)
		id, err := w.store.Identity(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		for _, name := range w.names {
			Expect(k8s.Patch(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}},
				mergePatch(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationAdoptLogStore, v1alpha1.AdoptLogStoreValue(id, 0))))).To(Succeed())
		}
		adopted := time.Now()
		// The old log is gone with its file: the boundary answers recorded against it are
		// not checked against the new one.
		w.acks.reset()
		Expect(k8s.Patch(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "s0"}},
			mergePatch(`{"spec":{"planMode":{"active":true}}}`))).To(Succeed())
		recovery := w.settle(2 * time.Minute)
		notes = append(notes, fmt.Sprintf("file deleted: all sessions LogStoreMismatch after %.1fs, the file not created again and 0 steps over 5s; converged %.1fs after a restart and adoption",
			stopped.Seconds(), time.Since(adopted).Seconds()))
		w.report("SQLite: lock, read-only, deletion", 3, recovery, strings.Join(notes, "; "))
	})
})

// setImmutable makes path unwritable even for root (chattr +i; chmod does not stop root).
func setImmutable(path string, on bool) {
	GinkgoHelper()
	if os.Geteuid() != 0 {
		mode := map[bool]os.FileMode{true: 0o444, false: 0o644}[on]
		Expect(os.Chmod(path, mode)).To(Succeed())
		return
	}
	flag := map[bool]string{true: "+i", false: "-i"}[on]
	out, err := exec.Command("chattr", flag, path).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "chattr %s %s: %s", flag, path, out)
}
