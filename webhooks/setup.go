// Package webhooks holds the admission webhooks: PlanModeConfig validation with the harness's
// rules and wording, AgentSession checks the CRD's CEL rules cannot express, and status
// ownership (the manager writes status.planMode, the agent only status.agent). See
// docs/admission.md.
package webhooks

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// Webhook configuration (config/webhook/manifests.yaml is generated from these markers).
// failurePolicy=fail everywhere, on purpose: see docs/admission.md.
//
// +kubebuilder:webhookconfiguration:mutating=false,name=validating-webhook-configuration
// +kubebuilder:webhook:path=/validate-agents-harness-dev-v1alpha1-planmodeconfig,mutating=false,failurePolicy=fail,sideEffects=None,groups=agents.harness.dev,resources=planmodeconfigs,verbs=create;update,versions=v1alpha1,name=vplanmodeconfig-v1alpha1.agents.harness.dev,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-agents-harness-dev-v1alpha1-agentsession,mutating=false,failurePolicy=fail,sideEffects=None,groups=agents.harness.dev,resources=agentsessions,verbs=create;update,versions=v1alpha1,name=vagentsession-v1alpha1.agents.harness.dev,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-agents-harness-dev-v1alpha1-agentsession,mutating=false,failurePolicy=fail,sideEffects=None,groups=agents.harness.dev,resources=agentsessions/status,verbs=update,versions=v1alpha1,name=vagentsession-status-v1alpha1.agents.harness.dev,admissionReviewVersions=v1,timeoutSeconds=5
//
// The review-approval check asks the authorizer; a local run learns its own identity.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=selfsubjectreviews,verbs=create

// Options configure the webhook server and the identities the admission rules know.
type Options struct {
	// Host and Port the webhook server listens on.
	Host string
	Port int
	// CertDir holds the serving certificate (CertName, KeyName). When both files are missing a
	// self-signed CA and certificate for CertHosts are generated there (local runs, tests);
	// when present they are loaded, and reloaded on change (controller-runtime's certwatcher).
	CertDir             string
	CertName, KeyName   string
	CertHosts           []string
	DisableCertGenerate bool
	// EnableHTTP2 is off by default (HTTP/2 rapid-reset and stream-cancellation CVEs).
	EnableHTTP2 bool

	// Identities. Empty ManagerUsernames: the manager's service account in its namespace
	// (DefaultManagerUsername), or, outside a cluster, the identity of the manager's own
	// credentials (a SelfSubjectReview).
	ManagerUsernames          []string
	AgentGroups               []string
	AgentServiceAccountPrefix string
	// RequireAgentBinding: see AgentSessionValidator.RequireAgentBinding. On by default.
	RequireAgentBinding bool
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		Port:                      webhook.DefaultPort,
		CertDir:                   filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"),
		CertName:                  CertFileName,
		KeyName:                   KeyFileName,
		CertHosts:                 []string{"localhost", "127.0.0.1"},
		AgentGroups:               []string{DefaultAgentGroup},
		AgentServiceAccountPrefix: DefaultAgentServiceAccountPrefix,
		RequireAgentBinding:       true,
	}
}

// BindFlags registers the webhook flags on fs, with o's current values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Host, "webhook-host", o.Host, "Address the webhook server listens on (empty: all).")
	fs.IntVar(&o.Port, "webhook-port", o.Port, "Port of the webhook server (-1 disables it).")
	fs.StringVar(&o.CertDir, "webhook-cert-dir", o.CertDir,
		"Directory with the webhook serving certificate (tls.crt, tls.key). Loaded and reloaded on change; "+
			"when both files are missing a self-signed CA (ca.crt) and certificate are generated there.")
	fs.StringVar(&o.CertName, "webhook-cert-name", o.CertName, "Serving certificate file name in --webhook-cert-dir.")
	fs.StringVar(&o.KeyName, "webhook-key-name", o.KeyName, "Serving key file name in --webhook-cert-dir.")
	fs.Var(newStringList(&o.CertHosts), "webhook-cert-host",
		"DNS name or IP address for a generated serving certificate (repeatable or comma-separated).")
	fs.BoolVar(&o.DisableCertGenerate, "webhook-disable-cert-generate", o.DisableCertGenerate,
		"Fail at start instead of generating a certificate when --webhook-cert-dir has none (clusters with cert-manager).")
	fs.BoolVar(&o.EnableHTTP2, "webhook-enable-http2", o.EnableHTTP2, "Serve webhooks over HTTP/2 too.")
	fs.Var(newStringList(&o.ManagerUsernames), "webhook-manager-username",
		"Username allowed to write status.planMode, status.review, status.conditions and status.observedGeneration "+
			"(repeatable). Default: system:serviceaccount:<namespace>:"+DefaultManagerServiceAccount+".")
	fs.Var(newStringList(&o.AgentGroups), "webhook-agent-group",
		"Agent group (repeatable): a member of <group>:<namespace> is an agent identity of that namespace, limited to status.agent; "+
			"a member of <group> itself is an agent of no namespace.")
	fs.StringVar(&o.AgentServiceAccountPrefix, "webhook-agent-serviceaccount-prefix", o.AgentServiceAccountPrefix,
		"Service accounts named this, or this followed by '-', are agent identities (empty disables).")
	fs.BoolVar(&o.RequireAgentBinding, "webhook-require-agent-binding", o.RequireAgentBinding,
		"Every AgentSession must name its agent's service account (spec.agent), no two sessions of a namespace the same one, "+
			"and only that service account may write the session's status.agent. =false (an explicit choice, warned about on every unbound session): "+
			"an unbound session takes status.agent from any agent identity of its namespace (docs/admission.md).")
}

// NewServer prepares the serving certificate (loading or generating it) and returns the webhook
// server for ctrl.Options.WebhookServer: TLS 1.2 or newer, HTTP/1.1 unless enabled.
func NewServer(o Options) (webhook.Server, error) {
	if o.Port >= 0 {
		if err := o.ensureCert(); err != nil {
			return nil, err
		}
	}
	tlsOpts := []func(*tls.Config){func(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }}
	if !o.EnableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	return webhook.NewServer(webhook.Options{
		Host: o.Host, Port: o.Port, CertDir: o.CertDir, CertName: o.CertName, KeyName: o.KeyName, TLSOpts: tlsOpts,
	}), nil
}

func (o Options) ensureCert() error {
	log := ctrl.Log.WithName("webhooks")
	if o.DisableCertGenerate {
		if err := checkServingCert(filepath.Join(o.CertDir, o.CertName), filepath.Join(o.CertDir, o.KeyName)); err != nil {
			return fmt.Errorf("webhook serving certificate (generation disabled): %w", err)
		}
		return nil
	}
	generated, err := EnsureServingCert(o.CertDir, o.CertName, o.KeyName, o.CertHosts)
	if err != nil {
		return fmt.Errorf("webhook serving certificate: %w", err)
	}
	if generated {
		log.Info("generated a self-signed webhook serving certificate; give the API server its CA as caBundle",
			"certDir", o.CertDir, "hosts", o.CertHosts, "caFile", filepath.Join(o.CertDir, CAFileName))
	} else {
		log.Info("loaded the webhook serving certificate; it is reloaded when the files change", "certDir", o.CertDir)
	}
	return nil
}

// SetupWithManager registers the PlanModeConfig and AgentSession validators on the manager's
// webhook server.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	ids, err := o.identities(mgr.GetConfig())
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("webhooks")
	log.Info("admission identities", "managerUsernames", ids.ManagerUsernames,
		"agentGroups", ids.AgentGroups, "agentServiceAccountPrefix", ids.AgentServiceAccountPrefix, "requireAgentBinding", o.RequireAgentBinding)
	if !o.RequireAgentBinding {
		log.Info("agent binding is off (--webhook-require-agent-binding=false): an unbound AgentSession takes status.agent from any agent identity of its namespace")
	}
	// The API reader, not the manager's cache: a manager that watches one shard answers
	// admission for every session (tenancy.go).
	v := &AgentSessionValidator{Identities: ids, Sessions: mgr.GetAPIReader(), Access: SubjectAccessReviewer{Client: mgr.GetClient()},
		RequireAgentBinding: o.RequireAgentBinding}
	srv := mgr.GetWebhookServer()
	srv.Register(PlanModeConfigPath, (&admission.Webhook{
		Handler: logRefusals(NewPlanModeConfigHandler(mgr.GetScheme()), log.WithValues("webhook", "PlanModeConfig")),
	}).WithRecoverPanic(true))
	srv.Register(AgentSessionPath, (&admission.Webhook{
		Handler: logRefusals(admission.WithValidator[*agentsv1alpha1.AgentSession](mgr.GetScheme(), v).Handler, log.WithValues("webhook", "AgentSession")),
	}).WithRecoverPanic(true))
	return nil
}

func (o Options) identities(cfg *rest.Config) (Identities, error) {
	ids := Identities{
		ManagerUsernames:          o.ManagerUsernames,
		AgentGroups:               o.AgentGroups,
		AgentServiceAccountPrefix: o.AgentServiceAccountPrefix,
	}
	if len(ids.ManagerUsernames) == 0 {
		if ns := ManagerNamespace(); ns != "" {
			ids.ManagerUsernames = []string{DefaultManagerUsername(ns)}
		} else {
			self, err := selfUsername(cfg)
			if err != nil {
				return ids, fmt.Errorf("learning the manager's own identity (set --webhook-manager-username): %w", err)
			}
			ids.ManagerUsernames = []string{self}
		}
	}
	return ids, ids.validate()
}

// selfUsername asks the API server who the manager's credentials are (a local run).
func selfUsername(cfg *rest.Config) (string, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return "", err
	}
	ssr := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(context.Background(), ssr); err != nil {
		return "", err
	}
	return ssr.Status.UserInfo.Username, nil
}

// stringList is a repeatable, comma-separated string flag. The first use replaces the default.
type stringList struct {
	p    *[]string
	seen bool
}

func newStringList(p *[]string) *stringList { return &stringList{p: p} }

func (s *stringList) String() string {
	if s == nil || s.p == nil {
		return ""
	}
	return strings.Join(*s.p, ",")
}

func (s *stringList) Set(v string) error {
	if !s.seen {
		*s.p = nil
		s.seen = true
	}
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*s.p = append(*s.p, part)
		}
	}
	return nil
}
