package webreview_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// person is a user with their own client certificate and kubeconfig (an envtest user).
type person struct {
	name, kubeconfig string
}

func newPerson(name string) *person {
	GinkgoHelper()
	u, err := testEnv.AddUser(envtest.User{Name: name}, nil)
	Expect(err).NotTo(HaveOccurred())
	kc, err := u.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	p := &person{name: name, kubeconfig: filepath.Join(GinkgoT().TempDir(), "kubeconfig")}
	Expect(os.WriteFile(p.kubeconfig, kc, 0o600)).To(Succeed())
	return p
}

func (p *person) env() []string {
	return append(os.Environ(),
		"PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+p.kubeconfig,
		"HOME="+GinkgoT().TempDir(),
		"BROWSER=",
	)
}

// kplan runs `kubectl plan ARGS... -n team-w` as p and returns its output, failing on exit
// status other than 0.
func (p *person) kplan(args ...string) string {
	GinkgoHelper()
	k := framework.KubectlCmd{Path: kubectl, Env: p.env()}
	return k.Run(ctx, GinkgoT(), nil, append(append([]string{"plan"}, args...), "-n", ns)...).OK()
}

// webServer is a running `kubectl plan ... --web`.
type webServer struct {
	url  string
	cmd  *exec.Cmd
	done chan error
	out  *framework.SyncBuffer
}

var servingLine = regexp.MustCompile(`(?m)^Serving .* at (http://127\.0\.0\.1:\d+/\S+)$`)

// serve starts `kubectl plan ARGS... --web --no-open -n NAMESPACE` as p and waits for the URL
// line it prints.
func (p *person) serve(namespace string, args ...string) *webServer {
	GinkgoHelper()
	cmd := exec.CommandContext(ctx, kubectl, append(append([]string{"plan"}, args...), "--web", "--no-open", "-n", namespace)...)
	cmd.Env = p.env()
	s := &webServer{cmd: cmd, done: make(chan error, 1), out: &framework.SyncBuffer{}}
	cmd.Stderr = s.out
	stdout, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed())
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			_, _ = s.out.Write([]byte(line + "\n"))
			if m := servingLine.FindStringSubmatch(line); m != nil {
				urls <- m[1]
			}
		}
		s.done <- cmd.Wait()
	}()
	DeferCleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
		GinkgoWriter.Printf("kubectl plan %v --web (as %s):\n%s", args, p.name, s.out.String())
	})
	Eventually(urls).WithTimeout(30*time.Second).Should(Receive(&s.url), "the URL line of kubectl plan %v --web; output: %s", args, s.out)
	return s
}

// exited waits for the server to stop by itself and returns its exit error.
func (s *webServer) exited() error {
	GinkgoHelper()
	var err error
	Eventually(s.done).WithTimeout(20*time.Second).Should(Receive(&err), "the server stops; output: %s", s.out)
	return err
}

// interrupt sends Ctrl-C's SIGINT and waits for the server to stop.
func (s *webServer) interrupt() error {
	GinkgoHelper()
	Expect(s.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	return s.exited()
}

// origin is the server's "http://127.0.0.1:PORT"; prefix its URL up to the token.
func (s *webServer) origin() string {
	return s.url[:strings.Index(s.url[len("http://"):], "/")+len("http://")]
}

// tab opens a new tab of the suite's browser, closed after the spec.
func tab() context.Context {
	GinkgoHelper()
	t, cancel := chromedp.NewContext(browser)
	DeferCleanup(cancel)
	Expect(chromedp.Do(t)).To(Succeed())
	return t
}

// do runs chromedp actions in tab t, with a timeout.
func do(t context.Context, actions ...chromedp.Action[chromedp.Void]) {
	GinkgoHelper()
	c, cancel := context.WithTimeout(t, 30*time.Second)
	defer cancel()
	Expect(chromedp.Do(c, actions...)).To(Succeed())
}

// get runs one chromedp action that returns a value in tab t, with a timeout.
func get[T any](t context.Context, a chromedp.Action[T]) T {
	GinkgoHelper()
	c, cancel := context.WithTimeout(t, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, a)
	Expect(err).NotTo(HaveOccurred())
	return v
}

// open navigates tab t to url and waits for the element sel.
func open(t context.Context, url, sel string) {
	GinkgoHelper()
	do(t, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// text is the visible text of the element sel, once visible.
func text(t context.Context, sel string) string {
	GinkgoHelper()
	do(t, chromedp.WaitVisible(chromedp.CSS(sel)))
	return get(t, chromedp.Text(chromedp.CSS(sel)))
}

// reply is the reply on the page a decision leads to, failing with the refusal if it shows one.
func reply(t context.Context) string {
	GinkgoHelper()
	do(t, chromedp.WaitVisible(chromedp.CSS("#reply, #refusal, #error")))
	Expect(refusal(t)).To(BeEmpty(), "the decision was refused")
	return text(t, "#reply")
}

// refusal is the refusal on the page a decision leads to, or "".
func refusal(t context.Context) string {
	GinkgoHelper()
	do(t, chromedp.WaitVisible(chromedp.CSS("#reply, #refusal, #error")))
	return eval[string](t, `(document.querySelector("#refusal, #error") || {}).textContent || ""`)
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t context.Context, expr string) T {
	GinkgoHelper()
	return get(t, chromedp.Evaluate[T](expr))
}

// screenshot writes the page as DIR/NAME.png when WEBREVIEW_SCREENSHOTS=DIR is set.
func screenshot(t context.Context, name string) {
	GinkgoHelper()
	dir := os.Getenv("WEBREVIEW_SCREENSHOTS")
	if dir == "" {
		return
	}
	png := get(t, chromedp.FullScreenshot(100)) // quality 100: PNG
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)).To(Succeed())
}

// agent drives one session through the real SDK, as the namespace's agent service account.
type agent struct {
	*framework.StepAgent
	ns, name string
}

// newSession creates a session in plan mode (committed by the manager between turns) and
// opens a turn with one step.
func newSession(namespace string) *agent {
	GinkgoHelper()
	name := "s-" + rand.String(6)
	active := true
	as := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: agentsv1alpha1.AgentSessionSpec{SessionID: namespace + "-" + name, PlanMode: agentsv1alpha1.PlanModeSpec{Active: &active},
			Agent: &agentsv1alpha1.AgentBinding{ServiceAccountName: agentSA}}}
	Expect(k8s.Create(ctx, as)).To(Succeed())
	c, err := agentsdk.New(ctx, agentsdk.Options{Config: impersonate("system:serviceaccount:" + namespace + ":" + agentSA), Namespace: namespace, Name: name, Store: store})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(c.Close)
	a := &agent{StepAgent: framework.NewStepAgent(ctx, GinkgoT(), c), ns: namespace, name: name}
	Eventually(func() bool { return a.get().Status.PlanMode.Active }).WithTimeout(20 * time.Second).Should(BeTrue())
	a.StartTurn()
	Expect(a.NextStep("plan the fix").Active).To(BeTrue())
	return a
}

func (a *agent) get() *agentsv1alpha1.AgentSession {
	GinkgoHelper()
	as := &agentsv1alpha1.AgentSession{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: a.ns, Name: a.name}, as)).To(Succeed())
	return as
}

// present calls exit_plan_mode with plan in the background and waits for the manager to open
// the review.
func (a *agent) present(plan string) <-chan framework.ExitCall {
	GinkgoHelper()
	ch := a.CallExit(plan)
	Eventually(func(g Gomega) {
		as := a.get()
		g.Expect(as.Status.Agent).NotTo(BeNil())
		g.Expect(as.Status.Agent.Review).NotTo(BeNil())
		g.Expect(as.Status.Agent.Review.Plan).To(Equal(plan))
		g.Expect(as.Status.Review).NotTo(BeNil())
		g.Expect(as.Status.Review.ID).To(Equal(as.Status.Agent.Review.ID))
		g.Expect(as.Status.Review.Phase).To(Equal(agentsv1alpha1.ReviewPending))
	}).WithTimeout(20 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	return ch
}

// receive waits for an exit_plan_mode call's outcome, recorded in the log.
func receive(ch <-chan framework.ExitCall) framework.ExitCall {
	GinkgoHelper()
	var e framework.ExitCall
	Eventually(ch).WithTimeout(30 * time.Second).Should(Receive(&e))
	Expect(e.Logged).NotTo(HaveOccurred(), "record the exit_plan_mode call in the log")
	return e
}

func exitErr(err error) *agentsdk.ExitError {
	GinkgoHelper()
	var ee *agentsdk.ExitError
	Expect(errors.As(err, &ee)).To(BeTrue(), "want an *agentsdk.ExitError, got %v", err)
	return ee
}
