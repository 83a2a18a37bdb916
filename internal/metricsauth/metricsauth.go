// Package metricsauth guards the manager's /metrics endpoint (--metrics-secure) as
// controller-runtime's filters.WithAuthenticationAndAuthorization does: the bearer token must
// pass a TokenReview, and its user must be allowed the request's verb on the request's
// non-resource path by a SubjectAccessReview (the metrics-reader ClusterRole of config/rbac).
// Results are cached for the same lifetimes.
//
// It is written against client-go's typed clients only. controller-runtime's filter builds on
// k8s.io/apiserver's delegating authenticator and authorizer, which link gRPC, OpenTelemetry and
// CEL into the manager, for two API calls: docs/metrics.md has what that costs in binary size
// and resident memory.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/harness-dev/planmode-operator/pkg/apiretry"
)

// Cache lifetimes and retries, as controller-runtime's filter configures k8s.io/apiserver's.
const (
	TokenCacheTTL    = time.Minute
	AllowCacheTTL    = 5 * time.Minute
	DenyCacheTTL     = 30 * time.Second
	reviewTimeout    = 10 * time.Second
	cacheEntries     = 1024
	authFailedText   = "Authentication failed"
	unauthorizedText = "Unauthorized"
)

// reviewBackoff retries a review the API server could not answer (connection errors, 5xx, 429).
var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// New is a metricsserver.Options.FilterProvider.
func New(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authnclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metrics authentication client: %w", err)
	}
	authz, err := authzclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization client: %w", err)
	}
	g := &guard{
		tokens:    authn.TokenReviews(),
		access:    authz.SubjectAccessReviews(),
		users:     cache.NewLRUExpireCache(cacheEntries),
		decisions: cache.NewLRUExpireCache(cacheEntries),
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { g.serve(log, next, w, req) }), nil
	}, nil
}

type guard struct {
	tokens    authnclient.TokenReviewInterface
	access    authzclient.SubjectAccessReviewInterface
	users     *cache.LRUExpireCache // sha256(token) -> *authenticationv1.UserInfo (nil: not authenticated)
	decisions *cache.LRUExpireCache // user, groups, verb, path -> decision
}

type decision struct {
	allowed bool
	reason  string
}

func (g *guard) serve(log logr.Logger, next http.Handler, w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	token, ok := bearerToken(req)
	if !ok {
		http.Error(w, unauthorizedText, http.StatusUnauthorized)
		return
	}
	user, err := g.authenticate(ctx, token)
	if err != nil {
		log.Error(err, "metrics: TokenReview failed")
		http.Error(w, authFailedText, http.StatusInternalServerError)
		return
	}
	if user == nil {
		log.V(4).Info("metrics: token not authenticated")
		http.Error(w, unauthorizedText, http.StatusUnauthorized)
		return
	}
	verb := strings.ToLower(req.Method)
	d, err := g.authorize(ctx, user, verb, req.URL.Path)
	if err != nil {
		msg := fmt.Sprintf("Authorization for user %s failed", user.Username)
		log.Error(err, "metrics: SubjectAccessReview failed", "user", user.Username)
		http.Error(w, msg, http.StatusInternalServerError)
		return
	}
	if !d.allowed {
		log.V(4).Info("metrics: authorization denied", "user", user.Username, "verb", verb, "path", req.URL.Path, "reason", d.reason)
		http.Error(w, fmt.Sprintf("Authorization denied for user %s", user.Username), http.StatusForbidden)
		return
	}
	next.ServeHTTP(w, req)
}

// bearerToken reads "Authorization: Bearer <token>" as the API server does (scheme case-insensitive).
func bearerToken(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// authenticate returns the token's user, or nil when the API server does not authenticate it.
func (g *guard) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	key := sha256.Sum256([]byte(token)) // the cache never holds the token itself
	if v, ok := g.users.Get(key); ok {
		return v.(*authenticationv1.UserInfo), nil
	}
	var res *authenticationv1.TokenReview
	err := review(ctx, func(ctx context.Context) (err error) {
		res, err = g.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("review the bearer token: %w", err)
	}
	var user *authenticationv1.UserInfo
	if res.Status.Authenticated {
		user = res.Status.User.DeepCopy()
	}
	g.users.Add(key, user, TokenCacheTTL)
	return user, nil
}

func (g *guard) authorize(ctx context.Context, user *authenticationv1.UserInfo, verb, path string) (decision, error) {
	groups := append([]string(nil), user.Groups...)
	sort.Strings(groups)
	key := strings.Join([]string{user.Username, user.UID, strings.Join(groups, ","), verb, path}, "\x00")
	if v, ok := g.decisions.Get(key); ok {
		return v.(decision), nil
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}
	var res *authorizationv1.SubjectAccessReview
	err := review(ctx, func(ctx context.Context) (err error) {
		res, err = g.access.Create(ctx, sar, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return decision{}, fmt.Errorf("review access of %s to %s %s: %w", user.Username, verb, path, err)
	}
	d := decision{allowed: res.Status.Allowed && !res.Status.Denied, reason: res.Status.Reason}
	ttl := DenyCacheTTL
	if d.allowed {
		ttl = AllowCacheTTL
	}
	g.decisions.Add(key, d, ttl)
	return d, nil
}

// review calls the API server, retrying what a retry can fix while the scrape still waits: once
// the request's own context is done (the scraper hung up, or its deadline passed, which makes
// the call fail with a DeadlineExceeded that looks transient), retrying only holds the handler.
func review(ctx context.Context, call func(context.Context) error) error {
	retriable := func(err error) bool { return ctx.Err() == nil && apiretry.Transient(err) }
	return retry.OnError(reviewBackoff, retriable, func() error {
		ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
		defer cancel()
		return call(ctx)
	})
}
