package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// The deployed manager runs with --metrics-secure (config/manager): HTTPS, every scrape
// authenticated by a TokenReview and authorized by a SubjectAccessReview for GET /metrics, which
// the metrics-reader ClusterRole of config/rbac grants.
var _ = Describe("secure metrics (--metrics-secure)", Ordered, func() {
	const ns = "e2e-metrics"
	var (
		mgr       *manager
		scrapeErr func(token string) (int, string, error)
	)

	BeforeAll(func() {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		mgr = startManager("manager-secure-metrics", "sqlite://"+filepath.Join(workDir, "metrics.db"), false, "--metrics-secure")
		mgr.metricsURL = strings.Replace(mgr.metricsURL, "http://", "https://", 1)
	})

	scrape := func(token string) (int, string) {
		GinkgoHelper()
		code, body, err := scrapeErr(token)
		Expect(err).NotTo(HaveOccurred())
		return code, body
	}
	// The manager serves a self-signed certificate when none is mounted (as the
	// ServiceMonitor sample's insecureSkipVerify assumes).
	scrapeErr = func(token string) (int, string, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		req, err := http.NewRequest(http.MethodGet, mgr.metricsURL, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	tokenFor := func(sa string) string {
		GinkgoHelper()
		Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})).To(Succeed())
		cs, err := kubernetes.NewForConfig(testEnv.Config)
		Expect(err).NotTo(HaveOccurred())
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		return tr.Status.Token
	}

	It("refuses a scrape without a token, and one whose identity may not read /metrics", func() {
		// The HTTPS listener comes up after /readyz (it generates its certificate first).
		Eventually(func() (int, error) { code, _, err := scrapeErr(""); return code, err }).
			WithTimeout(settle).WithPolling(100 * time.Millisecond).Should(Equal(http.StatusUnauthorized))
		code, _ := scrape(tokenFor("stranger"))
		Expect(code).To(Equal(http.StatusForbidden))
	})

	It("serves the plan-mode metrics to an identity bound to the metrics-reader ClusterRole of config/rbac", func() {
		data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "metrics_auth_role.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var reader *rbacv1.ClusterRole
		for _, doc := range strings.Split(string(data), "\n---") {
			var cr rbacv1.ClusterRole
			Expect(yaml.Unmarshal([]byte(doc), &cr)).To(Succeed())
			if cr.Kind == "ClusterRole" && cr.Name == "metrics-reader" {
				reader = &cr
			}
		}
		Expect(reader).NotTo(BeNil(), "config/rbac/metrics_auth_role.yaml defines the metrics-reader ClusterRole")
		reader.Name = "e2e-metrics-reader"
		Expect(k8s.Create(ctx, reader)).To(Succeed())
		token := tokenFor("prometheus")
		Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"}},
		})).To(Succeed())
		// Ask the API server, not the manager, until the binding is in force: its RBAC authorizer
		// sees bindings through an informer, and a deny the manager saw first it would cache for 30 s.
		cs, err := kubernetes.NewForConfig(testEnv.Config)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (bool, error) {
			res, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:                  "system:serviceaccount:" + ns + ":prometheus",
				Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
			}}, metav1.CreateOptions{})
			return err == nil && res.Status.Allowed, err
		}).WithTimeout(settle).WithPolling(100*time.Millisecond).Should(BeTrue(), "the API server allows the bound identity")
		// Eventually only for the HTTPS listener, which comes up after /readyz when this spec runs alone.
		Eventually(func() (int, error) { code, _, err := scrapeErr(token); return code, err }).
			WithTimeout(settle).WithPolling(100 * time.Millisecond).Should(Equal(http.StatusOK))
		_, body := scrape(token)
		Expect(body).To(ContainSubstring("# TYPE planmode_sessions gauge"))
		Expect(body).To(MatchRegexp(`(?m)^planmode_sessions\{active="false"\} \d+$`), "the session gauges")
	})
})
