package webreview_test

import (
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

const (
	// richPlan has what plans have (headings, a list, a code block, a table) and what an
	// agent must not get onto the reviewer's page: a script, a javascript: link, an event
	// handler, a remote image.
	richPlan = "# Migrate the sessions table\n\n" +
		"The `owner` column lets the inbox group plans by team.\n\n" +
		"## Steps\n\n1. Add the column.\n2. Backfill it in batches of 1,000.\n3. Make it `NOT NULL`.\n\n" +
		"```sql\nALTER TABLE sessions ADD COLUMN owner text;\nUPDATE sessions SET owner = team WHERE id BETWEEN $1 AND $2;\n```\n\n" +
		"## Risks\n\n| step | risk | rollback |\n|---|---|---|\n| add column | low | drop it |\n| backfill | medium: locks | stop the job |\n\n" +
		"<script>window.pwned = 1</script>\n\n" +
		"[run the checks](javascript:window.pwned=2) <img src=x onerror=\"window.pwned=3\"> ![pixel](https://tracker.example/p.png)\n"
	planA = "# Fix the flake\n\n1. Read parser.go.\n2. Add the lock.\n"
	planB = "# Fix the flake\n\n1. Read parser.go.\n2. Add the lock with a timeout.\n3. Run the unit tests.\n"
)

var _ = Describe("kubectl plan review --web", func() {
	It("renders the plan (headings, code, table) with the script and javascript: link inert; Approve commits and the agent leaves plan mode at its next step", func() {
		a := newSession(ns)
		ch := a.present(richPlan)
		id := a.get().Status.Review.ID
		srv := rita.serve(ns, "review", a.name)
		Expect(srv.url).To(MatchRegexp(`^http://127\.0\.0\.1:\d+/[0-9a-f]{64}/review/` + ns + `/` + a.name + `$`))

		t := tab()
		open(t, srv.url, "#plan h1")
		Expect(text(t, "#plan h1")).To(Equal("Migrate the sessions table"))
		Expect(eval[[]string](t, `[...document.querySelectorAll("#plan h2")].map(e => e.textContent)`)).To(Equal([]string{"Steps", "Risks"}))
		Expect(text(t, "#plan pre code.language-sql")).To(ContainSubstring("ALTER TABLE sessions ADD COLUMN owner text;"))
		Expect(eval[[]string](t, `[...document.querySelectorAll("#plan table td")].map(e => e.textContent)`)).
			To(Equal([]string{"add column", "low", "drop it", "backfill", "medium: locks", "stop the job"}))

		By("the agent's script, javascript: link, event handler and remote image are inert")
		Expect(eval[bool](t, `window.pwned === undefined`)).To(BeTrue(), "no script of the plan ran")
		Expect(eval[int](t, `document.querySelectorAll("#plan script, #plan img, #plan [onerror], #plan iframe").length`)).To(BeZero())
		Expect(eval[[]string](t, `[...document.querySelectorAll("#plan a")].map(a => a.href)`)).To(Equal([]string{"https://tracker.example/p.png"}),
			"the javascript: link is left as its text; the only link is the image's, to https")
		Expect(text(t, "#plan")).To(ContainSubstring("run the checks"))
		Expect(eval[int](t, `document.scripts.length`)).To(Equal(1), "only the page's own live.js")
		Expect(text(t, "#plan")).To(ContainSubstring("image: pixel"), "a remote image is a link, never loaded")

		By("the facts: session, revision, digest, who posted it and when, the policy's state")
		Expect(text(t, "#session")).To(Equal(ns + "/" + a.name))
		Expect(text(t, "#revision")).To(Equal("1 (the session's first plan)"))
		Expect(text(t, "#digest")).To(Equal(planmode.PlanSHA256(richPlan)))
		Expect(text(t, "#posted")).To(MatchRegexp(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ by system:serviceaccount:` + ns + `:` + agentSA + `$`))
		Expect(text(t, "#approvals")).To(Equal("0 of 1 approvals (no ReviewPolicy: one approval)"))
		Expect(text(t, "#state")).To(HavePrefix("Pending, awaiting a decision"))
		Expect(text(t, "#diff-note")).To(ContainSubstring("revision 1 is the session's first plan: there is no previous revision"))
		screenshot(t, "webreview-plan")

		By("at a phone's width nothing but the code and table scrolls sideways")
		do(t, chromedp.EmulateViewport(390, 844))
		Expect(eval[bool](t, `document.documentElement.scrollWidth <= 390`)).To(BeTrue())
		do(t, chromedp.EmulateViewport(1100, 900))

		By("Approve, from the keyboard")
		do(t, chromedp.Focus(chromedp.CSS("#approve")), chromedp.KeyEvent("\r"))
		Expect(reply(t)).To(ContainSubstring(`Approved "Migrate the sessions table" (review ` + id + `): the agent leaves plan mode at its next step.`))
		Expect(text(t, "#stopped")).To(ContainSubstring("this server has stopped"))
		Expect(srv.exited()).To(Succeed(), "the server stops once the review is decided")

		e := receive(ch)
		Expect(e.Err).NotTo(HaveOccurred())
		Expect(e.Result).To(Equal(agentsdk.ExitResult{Approved: true, ReviewID: id, Text: harness.ExitApprovedText}))
		as := a.get()
		Expect(as.Status.Review.Phase).To(Equal(agentsv1alpha1.ReviewApproved))
		Expect(as.Status.ReviewHistory).To(ContainElement(HaveField("DecidedBy", ConsistOf(rita.name))))
		Expect(a.NextStep().Active).To(BeFalse(), "the agent's next step boundary leaves plan mode")
	})

	It("Keep planning delivers the feedback; with --keep the page says live that the agent posted revision 2; the diff, rendered and raw", func() {
		a := newSession(ns)
		ch := a.present(planA)
		srv := rita.serve(ns, "review", a.name, "--store", storeURL, "--keep")
		t := tab()
		open(t, srv.url, "#plan h1")
		do(t, chromedp.SendKeys(chromedp.CSS("#feedback"), "add a timeout to the lock"), chromedp.Click(chromedp.CSS("#keep-planning")))
		Expect(reply(t)).To(MatchRegexp(`Sent "Fix the flake" \(review \S+\) back with your feedback: the agent keeps planning; the session stays in plan mode\.`))
		ee := exitErr(receive(ch).Err)
		Expect(ee.Code).To(Equal(agentsdk.ExitKeepPlanning))
		Expect(ee.Message).To(Equal("The user chose to keep planning; their feedback: add a timeout to the lock"), "the model gets the feedback")
		as := a.get()
		Expect(as.Status.Review.Phase).To(Equal(agentsv1alpha1.ReviewKeptPlanning))
		Expect(as.Spec.ReviewVotes).To(ConsistOf(And(HaveField("Decision", agentsv1alpha1.ReviewKeepPlanning), HaveField("Feedback", "add a timeout to the lock"),
			HaveField("DecidedBy.Username", rita.name), HaveField("PlanSHA256", planmode.PlanSHA256(planA)))))

		By("--keep: the server stays; back on the page, the agent's revision 2 is announced live")
		do(t, chromedp.Click(chromedp.CSS("#back")), chromedp.WaitVisible(chromedp.CSS("#plan h1")))
		Expect(text(t, "#state")).To(HavePrefix("KeepPlanning by rita@example.com"))
		Expect(eval[int](t, `document.querySelectorAll("form.decision").length`)).To(BeZero(), "no decision forms on a decided review")
		ch = a.present(planB)
		Eventually(func() string { return eval[string](t, `document.getElementById("live").textContent`) }).WithTimeout(15 * time.Second).
			Should(HavePrefix("The agent posted a new plan (revision 2) since this page was loaded"))

		By("reloaded, the page shows revision 2 and what changed")
		do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#diff")))
		Expect(text(t, "#revision")).To(HavePrefix("2 (after revision 1, KeepPlanning by rita@example.com"))
		Expect(eval[[]string](t, `[...document.querySelectorAll("#diff .del")].map(e => e.textContent)`)).To(Equal([]string{"-2. Add the lock."}))
		Expect(eval[[]string](t, `[...document.querySelectorAll("#diff .add")].map(e => e.textContent)`)).
			To(Equal([]string{"+2. Add the lock with a timeout.", "+3. Run the unit tests."}))
		raw := eval[string](t, `document.getElementById("raw-diff").textContent`)
		Expect(raw).To(MatchRegexp(`^--- revision 1 \(review \S+, KeepPlanning\)\n\+\+\+ revision 2 \(review \S+, under review\)\n`))
		Expect(raw).To(ContainSubstring("-2. Add the lock.\n+2. Add the lock with a timeout.\n+3. Run the unit tests.\n"))
		Expect(raw).To(Equal(rita.kplan("review", a.name, "--diff", "--store", storeURL)), "the same diff as kubectl plan review --diff")
		do(t, chromedp.Evaluate[chromedp.Void](`document.querySelector("details").open = true`), chromedp.ScrollIntoView(chromedp.CSS("#diff-h")))
		screenshot(t, "webreview-diff")

		do(t, chromedp.Click(chromedp.CSS("#dismiss")))
		Expect(reply(t)).To(ContainSubstring(`Dismissed the review of "Fix the flake"`))
		e := receive(ch)
		Expect(e.Err).NotTo(HaveOccurred())
		Expect(e.Result.Approved).To(BeFalse())
		Expect(srv.interrupt()).To(Succeed(), "with --keep only Ctrl-C stops it")
	})

	It("opened before the agent presents a plan, the page says when it does; a dismissal stops the server", func() {
		a := newSession(ns)
		srv := rita.serve(ns, "review", a.name)
		t := tab()
		open(t, srv.url, "#nothing")
		Expect(text(t, "#nothing")).To(HavePrefix(`nothing under review: session "` + a.name + `" has not presented a plan`))
		ch := a.present(planA)
		Eventually(func() string { return eval[string](t, `document.getElementById("live").textContent`) }).WithTimeout(15 * time.Second).
			Should(Equal("The agent presented a plan (revision 1). Reload the page to read it."))
		do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#plan h1")))
		do(t, chromedp.Click(chromedp.CSS("#dismiss")))
		Expect(reply(t)).To(ContainSubstring(`Dismissed the review of "Fix the flake"`))
		Expect(srv.exited()).To(Succeed())
		Expect(receive(ch).Result.Approved).To(BeFalse())
	})

	It("a second reviewer's decision appears live on the first reviewer's page (a policy of two approvals)", func() {
		a := newSession(nsPolicy)
		ch := a.present(planA)
		ritaSrv := rita.serve(nsPolicy, "review", a.name)
		samSrv := sam.serve(nsPolicy, "review", a.name)
		ritaTab, samTab := tab(), tab()
		open(ritaTab, ritaSrv.url, "#plan h1")
		Expect(text(ritaTab, "#approvals")).To(Equal("0 of 2 approvals (ReviewPolicy " + nsPolicy + "/default needs 2 distinct approvers)"))

		By("sam approves on his page: one of two")
		open(samTab, samSrv.url, "#plan h1")
		do(samTab, chromedp.Click(chromedp.CSS("#approve")))
		Expect(reply(samTab)).To(ContainSubstring("1 more approval needed (ReviewPolicy " + nsPolicy + "/default needs 2 distinct approvers); the plan stays under review until then."))

		By("rita's page shows it without a reload")
		live := func(id string) func() string {
			return func() string { return eval[string](ritaTab, `document.getElementById("`+id+`").textContent`) }
		}
		Eventually(live("approvals")).WithTimeout(15 * time.Second).Should(HavePrefix("1 of 2 approvals"))
		Eventually(live("decisions")).Should(ContainSubstring("sam@example.com Approve"))
		Eventually(live("live")).Should(HavePrefix("Updated: 1 of 2 approvals"), "and says so")
		screenshot(ritaTab, "webreview-live")

		By("sam goes back to the review; rita's approval completes it, and sam's page says so live")
		do(samTab, chromedp.Click(chromedp.CSS("#back")), chromedp.WaitVisible(chromedp.CSS("#plan h1")))
		do(ritaTab, chromedp.Click(chromedp.CSS("#approve")))
		Expect(reply(ritaTab)).To(ContainSubstring("the agent leaves plan mode at its next step."))
		Eventually(func() string { return eval[string](samTab, `document.getElementById("live").textContent`) }).WithTimeout(15 * time.Second).
			Should(ContainSubstring("This review was decided: Approved by "))
		Expect(eval[bool](samTab, `document.getElementById("approve").disabled`)).To(BeTrue(), "no decision on a decided review")
		Expect(ritaSrv.exited()).To(Succeed())
		Expect(samSrv.exited()).To(Succeed(), "sam's server stops too: the review is decided")
		Expect(receive(ch).Result.Approved).To(BeTrue())
	})

	It("refuses a forged POST without the token or from another Origin (403, nothing decided); Ctrl-C stops the server", func() {
		a := newSession(ns)
		ch := a.present(planA)
		srv := rita.serve(ns, "review", a.name)
		u, err := url.Parse(srv.url)
		Expect(err).NotTo(HaveOccurred())
		token := strings.Split(u.Path, "/")[1]
		form := url.Values{"decision": {"approve"}, "planSHA256": {planmode.PlanSHA256(planA)}}.Encode()
		post := func(target, origin string) int {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(form))
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		decide := srv.url + "/decide"
		Expect(post(strings.Replace(decide, "/"+token, "", 1), srv.origin())).To(Equal(http.StatusForbidden), "no token")
		Expect(post(strings.Replace(decide, token, strings.Repeat("0", len(token)), 1), srv.origin())).To(Equal(http.StatusForbidden), "another token")
		Expect(post(decide, "http://evil.example")).To(Equal(http.StatusForbidden), "another Origin")
		Expect(post(decide, "")).To(Equal(http.StatusForbidden), "no Origin")
		resp, err := http.Get(strings.Replace(srv.url, "/"+token, "", 1))
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusForbidden), "the page itself needs the token")
		Expect(a.get().Spec.ReviewVotes).To(BeEmpty(), "nothing was decided")
		Consistently(ch).WithTimeout(300 * time.Millisecond).ShouldNot(Receive())

		Expect(srv.interrupt()).To(Succeed(), "Ctrl-C stops the server")
		rita.kplan("dismiss", a.name)
		receive(ch)
	})

	It("a user without the approve permission sees the refusal the API gave", func() {
		a := newSession(ns)
		ch := a.present(planA)
		srv := tom.serve(ns, "review", a.name)
		t := tab()
		open(t, srv.url, "#plan h1")
		do(t, chromedp.Click(chromedp.CSS("#approve")))
		refused := refusal(t)
		Expect(refused).To(ContainSubstring("not allowed to decide the plan review"))
		Expect(refused).To(ContainSubstring(`may not decide plan reviews: deciding needs verb "approve" on agentsessions/review`))
		Expect(a.get().Spec.ReviewVotes).To(BeEmpty())
		Expect(srv.interrupt()).To(Succeed())
		rita.kplan("dismiss", a.name)
		receive(ch)
	})
})

var _ = Describe("kubectl plan inbox --web", func() {
	It("lists the plans awaiting review, oldest first, with revision and what each waits for; a link opens the review", func() {
		first, second := newSession(ns), newSession(ns)
		ch1 := first.present(planA)
		ch2 := second.present(richPlan)
		srv := rita.serve(ns, "inbox")
		Expect(srv.url).To(HaveSuffix("/inbox"))
		t := tab()
		open(t, srv.url, "#inbox")
		rows := eval[[][]string](t, `[...document.querySelectorAll("#inbox tbody tr")].map(r => [...r.cells].map(c => c.textContent))`)
		names := make([]string, 0, len(rows))
		for _, r := range rows {
			names = append(names, r[1])
		}
		Expect(names).To(ContainElements(first.name, second.name))
		i1, i2 := indexOf(names, first.name), indexOf(names, second.name)
		since := eval[[]string](t, `[...document.querySelectorAll("#inbox tbody time")].map(e => e.getAttribute("datetime"))`)
		Expect(sort.StringsAreSorted(since)).To(BeTrue(), "oldest first: %v", since)
		Expect(rows[i1]).To(HaveExactElements(ns, first.name, "Fix the flake", "1", Not(BeEmpty()), "a decision"))
		Expect(rows[i2]).To(HaveExactElements(ns, second.name, "Migrate the sessions table", "1", Not(BeEmpty()), "a decision"))
		screenshot(t, "webreview-inbox")

		By("the link opens the review, from the keyboard")
		do(t, chromedp.Focus(chromedp.CSS(`#inbox a[href$="/`+second.name+`"]`)), chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS("#plan h1")))
		Expect(text(t, "#title")).To(Equal("Migrate the sessions table"))
		do(t, chromedp.Click(chromedp.CSS("#dismiss")))
		Expect(reply(t)).To(ContainSubstring(`Dismissed the review of "Migrate the sessions table"`))
		receive(ch2)
		Expect(srv.interrupt()).To(Succeed(), "the inbox serves until Ctrl-C")
		rita.kplan("dismiss", first.name)
		receive(ch1)
	})
})

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
