package metricsauth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/harness-dev/planmode-operator/internal/metricsauth"
	"github.com/harness-dev/planmode-operator/test/framework"
)

func TestMetricsAuth(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "metricsauth")
}

const ns = "monitoring"

var (
	env     *envtest.Environment
	cfg     *rest.Config
	cs      *kubernetes.Clientset
	handler http.Handler
	ctx     = context.Background()
)

var _ = BeforeSuite(func() {
	var err error
	env, cfg, err = framework.Start(framework.Options{NoCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(env.Stop)
	cs, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	httpClient, err := rest.HTTPClientFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	filter, err := metricsauth.New(cfg, httpClient)
	Expect(err).NotTo(HaveOccurred())
	handler, err = filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("# TYPE planmode_sessions gauge\n"))
	}))
	Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
})

func tokenFor(sa string) string {
	GinkgoHelper()
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

func bindReader(sa string) {
	GinkgoHelper()
	_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader-" + sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	// The API server's RBAC authorizer learns of bindings through an informer, so a review
	// straight after Create may still deny, and the guard would cache that deny for 30 s. Wait
	// until the API server itself answers allow, asking it directly so the guard caches nothing.
	Eventually(apiServerAllows).WithArguments(sa).WithTimeout(10*time.Second).Should(BeTrue(),
		"the API server never allowed %s after its binding was created", sa)
}

// apiServerAllows asks the API server, bypassing the guard and its caches, whether sa may get /metrics.
func apiServerAllows(sa string) (bool, error) {
	res, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  "system:serviceaccount:" + ns + ":" + sa,
		Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return res.Status.Allowed, nil
}

func scrape(method, authorization string) (int, string) {
	GinkgoHelper()
	req := httptest.NewRequest(method, "/metrics", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

var _ = Describe("the /metrics guard", func() {
	It("answers 401 without a bearer token, with another scheme, and with a token the API server does not authenticate", func() {
		for _, h := range []string{"", "Bearer", "Bearer   ", "Basic dXNlcjpwYXNz", "bearer-ish abc", "Bearer not-a-real-token"} {
			code, body := scrape(http.MethodGet, h)
			Expect(code).To(Equal(http.StatusUnauthorized), "Authorization: %q", h)
			Expect(body).To(Equal("Unauthorized\n"))
		}
	})

	It("answers 403 naming the user when its identity may not get /metrics, and never serves the body", func() {
		code, body := scrape(http.MethodGet, "Bearer "+tokenFor("stranger"))
		Expect(code).To(Equal(http.StatusForbidden))
		Expect(body).To(Equal("Authorization denied for user system:serviceaccount:monitoring:stranger\n"))
	})

	It("serves a user bound to the metrics-reader role, takes the scheme case-insensitively, and checks the verb", func() {
		token := tokenFor("prometheus")
		bindReader("prometheus")
		code, body := scrape(http.MethodGet, "bearer "+token)
		Expect(code).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring("planmode_sessions"))
		code, _ = scrape(http.MethodPost, "Bearer "+token)
		Expect(code).To(Equal(http.StatusForbidden), "the role grants get, not post")
	})

	It("caches an allow for AllowCacheTTL: a revoked binding still scrapes until it expires, a fresh identity does not", func() {
		token := tokenFor("cached")
		bindReader("cached")
		code, _ := scrape(http.MethodGet, "Bearer "+token)
		Expect(code).To(Equal(http.StatusOK))
		Expect(cs.RbacV1().ClusterRoleBindings().Delete(ctx, "metrics-reader-cached", metav1.DeleteOptions{})).To(Succeed())
		Eventually(apiServerAllows).WithArguments("cached").WithTimeout(10*time.Second).Should(BeFalse(),
			"the API server still allows after the binding was deleted")
		code, _ = scrape(http.MethodGet, "Bearer "+token)
		Expect(code).To(Equal(http.StatusOK), "served from the %s allow cache", metricsauth.AllowCacheTTL)
		code, _ = scrape(http.MethodGet, "Bearer "+tokenFor("uncached"))
		Expect(code).To(Equal(http.StatusForbidden))
	})
})

var _ = Describe("a scrape whose deadline has passed", func() {
	It("is answered at once, without retrying the review for a request nobody waits for", func() {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+tokenFor("late"))
		c, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
		defer cancel()
		rec := httptest.NewRecorder()
		start := time.Now()
		handler.ServeHTTP(rec, req.WithContext(c))
		Expect(rec.Code).To(Equal(http.StatusInternalServerError))
		// Retrying would sleep through the backoff (0.5 s, then x1.5 for 5 steps: about 4 s).
		Expect(time.Since(start)).To(BeNumerically("<", 400*time.Millisecond))
	})
})
