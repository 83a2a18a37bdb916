package reliability

import (
	"errors"
	"os/exec"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// plancheck runs the command against the store and the AgentSession; it returns the output and
// the exit code.
func plancheck(args ...string) (string, int) {
	GinkgoHelper()
	cmd := exec.Command(plancheckBin, args...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	Expect(err).NotTo(HaveOccurred())
	return string(out), 0
}

var _ = Describe("cmd/plancheck", func() {
	It("finds nothing in a session the real manager ran, and names the seq of a plan/mode a rogue writer appended", func() {
		url, err := pg.NewDatabase(suiteCtx, "plancheck")
		Expect(err).NotTo(HaveOccurred())
		w := newWorkload("plancheck", 1, url, nil)
		startManager(managerOpts{store: url})
		w.startAgents()
		w.startDriver(1, 10, 200*time.Millisecond)
		w.waitDriver()
		w.settle(time.Minute)

		out, code := plancheck("--store", url, "--namespace", w.ns, "--name", "s0", "--kubeconfig", kubeconfig)
		Expect(code).To(Equal(0), out)
		Expect(out).To(MatchRegexp(`session "%s": \d+ events, \d+ acks checked, 0 violations`, w.sessionID("s0")))

		// A second writer repeats the committed state between turns.
		t, err := w.store.Tail(suiteCtx, w.sessionID("s0"))
		Expect(err).NotTo(HaveOccurred())
		dup := harness.MustEvent(harness.TypePlanMode, harness.PlanMode{Active: t.Active})
		dup.Seq = t.NextSeq
		_, err = w.store.Append(suiteCtx, w.sessionID("s0"), []harness.Event{dup})
		Expect(err).NotTo(HaveOccurred())
		out, code = plancheck("--store", url, "--session", w.sessionID("s0"))
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring("seq %d: DuplicatePlanMode:", t.NextSeq))
	})
})
