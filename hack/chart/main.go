// Command chart writes the Helm chart dist/chart from dist/install.yaml (config/default as
// kustomize renders it), so the chart and the manifests install the same objects under the same
// names: `make chart` regenerates it, test/chart fails when the committed chart is stale.
//
// Each object of the install becomes one template. What a platform team sets per cluster is
// templated (values.yaml documents each value): the namespace (the release's), the image, the
// replicas, the log-store Secret, the webhook certificate (cert-manager, self-signed by Helm, or
// a Secret of your own), metrics, the agent-binding flag, resources, scheduling, extra flags.
// Everything else is copied as it is. An object kind or a manager flag this generator does not
// know fails it, naming what to add, instead of being shipped untemplated by accident.
//
// Usage: go run ./hack/chart [-install dist/install.yaml] [-out dist/chart] [-version 0.0.0-devel]
//
//	[-app-version latest] [-image-repository planmode-operator] [-image-digest sha256:...]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/harness-dev/planmode-operator/webhooks"
)

// namespace is the namespace config/default installs into; in the chart it is the release's.
const namespace = "planmode-system"

func main() {
	var o options
	flag.StringVar(&o.install, "install", "dist/install.yaml", "the rendered install (make build-installer)")
	flag.StringVar(&o.out, "out", "dist/chart", "the chart directory to write (replaced)")
	flag.StringVar(&o.version, "version", "0.0.0-devel", "the chart version (SemVer, no leading v)")
	flag.StringVar(&o.appVersion, "app-version", "", "the operator version the chart installs (default: the install's image tag)")
	flag.StringVar(&o.imageRepository, "image-repository", "", "the manager image repository (default: the install's)")
	flag.StringVar(&o.imageDigest, "image-digest", "", "pin the manager image to this digest (sha256:...)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

type options struct {
	install, out, version, appVersion, imageRepository, imageDigest string
}

type object = map[string]any

func run(o options) error {
	raw, err := os.ReadFile(o.install)
	if err != nil {
		return fmt.Errorf("%w (run `make build-installer`)", err)
	}
	objs, err := decode(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", o.install, err)
	}
	c := &chart{opts: o, files: map[string]string{}}
	for _, obj := range objs {
		if err := c.add(obj); err != nil {
			return fmt.Errorf("%s %s: %w", str(obj, "kind"), str(obj, "metadata", "name"), err)
		}
	}
	if c.deployment == nil {
		return errors.New("the install has no manager Deployment")
	}
	if err := c.writeWebhooks(); err != nil {
		return err
	}
	if err := c.meta(); err != nil {
		return err
	}
	return c.write()
}

// chart collects the chart's files by path.
type chart struct {
	opts       options
	files      map[string]string
	deployment object
	// webhookConfigs are the rendered webhook configurations: one template holds them all, so
	// each reads the $caBundle its head computes once.
	webhookConfigs []string
	image          struct{ repository, tag string }
	defaults       defaults
}

// defaults are the values whose defaults come from the install.
type defaults struct {
	Replicas     int64
	Resources    string
	Repository   string
	Digest       string
	PullPolicy   string
	SecretName   string
	SecretKey    string
	MetricsPort  int64
	AgentBinding bool
}

func (c *chart) add(obj object) error {
	kind := str(obj, "kind")
	name := strings.TrimPrefix(str(obj, "metadata", "name"), "planmode-")
	switch kind {
	case "Namespace":
		// Helm installs into the release's namespace (helm install -n NS --create-namespace);
		// a namespace created by the release would be deleted by `helm uninstall`, with the
		// log-store Secret in it. docs/operations.md labels it for Pod Security.
		return nil
	case "CustomResourceDefinition":
		name = strings.SplitN(str(obj, "metadata", "name"), ".", 2)[0]
		setAnnotation(obj, "helm.sh/resource-policy", "@@BLOCK:crdPolicy@@")
		return c.template("crd-"+name, obj, "{{- if .Values.crds.install }}", "{{- end }}")
	case "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
		return c.template(strings.ToLower(kind)+"-"+name, obj, "", "")
	case "Service":
		if strings.Contains(name, "metrics") {
			setPath(obj, "@@VAL:metricsPort@@", "spec", "ports", "0", "port")
			setPath(obj, "@@VAL:metricsPort@@", "spec", "ports", "0", "targetPort")
			return c.template("service-"+name, obj, "{{- if .Values.metrics.enabled }}", "{{- end }}")
		}
		return c.template("service-"+name, obj, "", "")
	case "Deployment":
		if c.deployment != nil {
			return errors.New("the install has two Deployments; the chart knows one manager")
		}
		c.deployment = obj
		if err := c.manager(obj); err != nil {
			return err
		}
		return c.template("deployment-"+name, obj, "", "")
	case "Certificate", "Issuer":
		return c.template("certmanager-"+strings.ToLower(kind)+"-"+name, obj,
			`{{- if eq .Values.certificates.source "cert-manager" }}`, "{{- end }}")
	case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
		return c.webhooks(obj)
	case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		// Cluster-scoped: kustomize does not know these kinds and gives them config/default's
		// namespace, which the API server drops; the chart leaves it out.
		delete(obj["metadata"].(object), "namespace")
		return c.template(strings.ToLower(kind)+"-"+name, obj, "", "")
	case "ServiceMonitor":
		return c.template("servicemonitor-"+name, obj, "{{- if .Values.metrics.serviceMonitor }}", "{{- end }}")
	}
	return fmt.Errorf("the chart generator does not know this kind: template it in hack/chart")
}

// knownArgs are the manager flags config/default sets, and what the chart does with each. A
// flag not listed fails the generator: decide whether it is a value or fixed, then list it.
const (
	argFixed        = "fixed"
	argMetrics      = "metrics"
	argAgentBinding = "agentBinding"
)

var knownArgs = map[string]string{
	"--leader-elect":                  argFixed, // replicas share the work through the Lease
	"--health-probe-bind-address":     argFixed, // the probes below name its port
	"--metrics-bind-address":          argMetrics,
	"--metrics-secure":                argFixed,
	"--shutdown-drain":                argFixed, // within the pod's terminationGracePeriodSeconds
	"--webhook-cert-dir":              argFixed, // where the certificate volume is mounted
	"--webhook-disable-cert-generate": argFixed,
	"--webhook-require-agent-binding": argAgentBinding,
}

// manager templates the manager Deployment in place.
func (c *chart) manager(d object) error {
	replicas, ok := get(d, "spec", "replicas").(float64)
	if !ok {
		return errors.New("no spec.replicas")
	}
	c.defaults.Replicas = int64(replicas)
	setPath(d, "@@VAL:replicas@@", "spec", "replicas")
	pod, _ := get(d, "spec", "template", "spec").(object)
	containers, _ := pod["containers"].([]any)
	if len(containers) != 1 {
		return fmt.Errorf("want one container in the manager pod, found %d", len(containers))
	}
	ctr := containers[0].(object)

	image := str(ctr, "image")
	repo, tag, ok := strings.Cut(image, ":")
	if !ok || strings.Contains(image, "@") {
		return fmt.Errorf("manager image %q: want repository:tag", image)
	}
	c.image.repository, c.image.tag = repo, tag
	ctr["image"] = "@@VAL:image@@"
	c.defaults.PullPolicy = str(ctr, "imagePullPolicy")
	ctr["imagePullPolicy"] = "@@VAL:pullPolicy@@"

	args, err := c.managerArgs(ctr["args"].([]any))
	if err != nil {
		return err
	}
	ctr["args"] = args

	for _, e := range ctr["env"].([]any) {
		env := e.(object)
		if env["name"] != "PLANMODE_LOG_STORE" {
			continue
		}
		ref, _ := get(env, "valueFrom", "secretKeyRef").(object)
		if ref == nil {
			return errors.New("PLANMODE_LOG_STORE is not read from a Secret")
		}
		c.defaults.SecretName, c.defaults.SecretKey = str(ref, "name"), str(ref, "key")
		ref["name"], ref["key"] = "@@VAL:logStoreSecret@@", "@@VAL:logStoreKey@@"
	}
	if c.defaults.SecretName == "" {
		return errors.New("the manager reads no PLANMODE_LOG_STORE")
	}

	res, err := yaml.Marshal(ctr["resources"])
	if err != nil {
		return err
	}
	c.defaults.Resources = string(res)
	ctr["resources"] = "@@BLOCK:resources@@"

	for _, v := range pod["volumes"].([]any) {
		if sec, ok := get(v.(object), "secret").(object); ok && sec["secretName"] == "webhook-server-cert" {
			sec["secretName"] = "@@VAL:certSecret@@"
		}
	}
	for _, k := range []string{"imagePullSecrets", "nodeSelector", "tolerations", "affinity", "priorityClassName"} {
		if _, ok := pod[k]; ok {
			return fmt.Errorf("the manager pod sets %s; the chart makes it a value: drop it from config/manager or merge it in hack/chart", k)
		}
		pod[k] = "@@BLOCK:" + k + "@@"
	}
	if labels, ok := get(d, "spec", "template", "metadata", "labels").(object); ok {
		labels["@@BLOCK:podLabels@@"] = ""
	}
	if ann, ok := get(d, "spec", "template", "metadata", "annotations").(object); ok {
		ann["@@BLOCK:podAnnotations@@"] = ""
	}
	return nil
}

// managerArgs templates the manager's arguments: fixed ones kept, values made templates.
func (c *chart) managerArgs(in []any) ([]any, error) {
	// The manager binds agents unless told not to: without the flag in the install the chart's
	// default is the manager's, and it passes the flag only when the value differs from it.
	c.defaults.AgentBinding = webhooks.DefaultOptions().RequireAgentBinding
	bindingSet := false
	var args []any
	for _, a := range in {
		arg := a.(string)
		flagName, value, _ := strings.Cut(arg, "=")
		switch knownArgs[flagName] {
		case argFixed:
			args = append(args, arg)
		case argMetrics:
			port, err := portOf(value)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", arg, err)
			}
			c.defaults.MetricsPort = port
			args = append(args, "--metrics-bind-address=@@VAL:metricsAddress@@")
		case argAgentBinding:
			if value != "true" && value != "false" {
				return nil, fmt.Errorf("%s: want --webhook-require-agent-binding=true or =false in the install", arg)
			}
			c.defaults.AgentBinding = value == "true"
			bindingSet = true
			args = append(args, "@@BLOCK:agentBinding@@")
		default:
			return nil, fmt.Errorf("manager flag %s is not known to the chart generator: list it in knownArgs (hack/chart)", flagName)
		}
	}
	if !bindingSet {
		args = append(args, "@@BLOCK:agentBinding@@")
	}
	return append(args, "@@BLOCK:extraArgs@@"), nil
}

func portOf(addr string) (int64, error) {
	_, p, ok := strings.Cut(addr, ":")
	var n int64
	if _, err := fmt.Sscanf(p, "%d", &n); !ok || err != nil {
		return 0, fmt.Errorf("want :PORT")
	}
	return n, nil
}

// webhooks writes the webhook configuration with, in the same template, the certificate when
// Helm makes it: a CA and the serving certificate are generated once per render, so the
// Secret and every caBundle must come from the one template that generated them.
func (c *chart) webhooks(obj object) error {
	ann, _ := get(obj, "metadata", "annotations").(object)
	if _, ok := ann["cert-manager.io/inject-ca-from"]; !ok {
		return errors.New("no cert-manager.io/inject-ca-from annotation: the chart expects config/default's cert-manager setup")
	}
	ann["cert-manager.io/inject-ca-from"] = "@@BLOCK:injectCA@@"
	for _, h := range obj["webhooks"].([]any) {
		cc, _ := get(h.(object), "clientConfig").(object)
		if cc == nil {
			return errors.New("a webhook without clientConfig")
		}
		cc["caBundle"] = "@@BLOCK:caBundle@@"
	}
	body, err := c.render(obj)
	if err != nil {
		return err
	}
	c.webhookConfigs = append(c.webhookConfigs, body)
	return nil
}

// writeWebhooks writes the webhook configurations after the certificate head they share.
func (c *chart) writeWebhooks() error {
	if len(c.webhookConfigs) == 0 {
		return errors.New("the install has no webhook configuration")
	}
	sort.Strings(c.webhookConfigs) // MutatingWebhookConfiguration, then Validating...
	return c.file("webhook-configuration", certificateHead, strings.Join(c.webhookConfigs, "---\n"), "")
}

// certificateHead computes $caBundle and writes the self-signed Secret before the webhook
// configuration that trusts it.
const certificateHead = `{{- $caBundle := "" }}
{{- $secretName := .Values.certificates.secretName }}
{{- if eq .Values.certificates.source "self-signed" }}
{{- $service := printf "planmode-webhook-service.%s.svc" .Release.Namespace }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $secretName }}
{{- $tlsCrt := "" }}
{{- $tlsKey := "" }}
{{- if and $existing $existing.data (index $existing.data "ca.crt") (index $existing.data "tls.crt") (index $existing.data "tls.key") }}
{{- /* An upgrade keeps the certificate: a new CA would reach the API server (caBundle) and
       the running replicas (the mounted Secret) at different moments and refuse writes between. */}}
{{- $caBundle = index $existing.data "ca.crt" }}
{{- $tlsCrt = index $existing.data "tls.crt" }}
{{- $tlsKey = index $existing.data "tls.key" }}
{{- else }}
{{- $ca := genCA "planmode-webhook-ca" (int .Values.certificates.selfSigned.validityDays) }}
{{- $cert := genSignedCert $service nil (list $service (printf "%s.cluster.local" $service)) (int .Values.certificates.selfSigned.validityDays) $ca }}
{{- $caBundle = $ca.Cert | b64enc }}
{{- $tlsCrt = $cert.Cert | b64enc }}
{{- $tlsKey = $cert.Key | b64enc }}
{{- end }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ $secretName }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "planmode.labels" . | nindent 4 }}
type: kubernetes.io/tls
data:
  ca.crt: {{ $caBundle }}
  tls.crt: {{ $tlsCrt }}
  tls.key: {{ $tlsKey }}
---
{{- else if eq .Values.certificates.source "secret" }}
{{- $caBundle = required "certificates.caBundle: set the CA of Secret certificates.secretName (--set-file certificates.caBundle=ca.crt)" .Values.certificates.caBundle | b64enc }}
{{- end }}`

// values are the template snippets that replace @@VAL:name@@ placeholders.
var values = map[string]string{
	"replicas":       `{{ .Values.replicas }}`,
	"image":          `{{ include "planmode.image" . }}`,
	"pullPolicy":     `{{ .Values.image.pullPolicy }}`,
	"metricsAddress": `{{ if .Values.metrics.enabled }}:{{ .Values.metrics.port }}{{ else }}0{{ end }}`,
	"metricsPort":    `{{ .Values.metrics.port }}`,
	"logStoreSecret": `{{ .Values.logStore.secretName }}`,
	"logStoreKey":    `{{ .Values.logStore.secretKey }}`,
	"certSecret":     `{{ .Values.certificates.secretName }}`,
}

// blocks are the snippets that replace a whole line holding @@BLOCK:name@@, given the line's
// indentation; "- " marks a list item.
var blocks = map[string]func(indent string) string{
	// helm uninstall leaves the CRDs, and so every AgentSession and PlanModeConfig, in place.
	"crdPolicy": func(in string) string {
		return in + "{{- if .Values.crds.keep }}\n" + in + "helm.sh/resource-policy: keep\n" + in + "{{- end }}"
	},
	// Only a value other than the manager's own default is passed, so the chart with no values
	// renders the install's arguments.
	"agentBinding": func(in string) string {
		def := fmt.Sprint(webhooks.DefaultOptions().RequireAgentBinding)
		return in + "{{- if ne .Values.webhook.requireAgentBinding " + def + " }}\n" +
			in + "- --webhook-require-agent-binding={{ .Values.webhook.requireAgentBinding }}\n" + in + "{{- end }}"
	},
	"extraArgs": func(in string) string {
		return in + "{{- range .Values.extraArgs }}\n" + in + "- {{ . | quote }}\n" + in + "{{- end }}"
	},
	"resources": func(in string) string {
		return in + "resources:\n" + in + "  {{- toYaml .Values.resources | nindent " + fmt.Sprint(len(in)+2) + " }}"
	},
	"injectCA": func(in string) string {
		return in + `{{- if eq .Values.certificates.source "cert-manager" }}` + "\n" +
			in + "cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/planmode-serving-cert\n" + in + "{{- end }}"
	},
	"caBundle": func(in string) string {
		return in + "{{- if $caBundle }}\n" + in + "caBundle: {{ $caBundle }}\n" + in + "{{- end }}"
	},
	"imagePullSecrets": withBlock("imagePullSecrets"),
	"nodeSelector":     withBlock("nodeSelector"),
	"tolerations":      withBlock("tolerations"),
	"affinity":         withBlock("affinity"),
	"podLabels":        withMap("podLabels"),
	"podAnnotations":   withMap("podAnnotations"),
	"priorityClassName": func(in string) string {
		return in + "{{- with .Values.priorityClassName }}\n" + in + "priorityClassName: {{ . }}\n" + in + "{{- end }}"
	},
}

func withBlock(key string) func(string) string {
	return func(in string) string {
		return in + "{{- with .Values." + key + " }}\n" + in + key + ":\n" + in + "  {{- toYaml . | nindent " + fmt.Sprint(len(in)+2) + " }}\n" + in + "{{- end }}"
	}
}

// withMap adds the value's entries to the map the placeholder key sits in.
func withMap(key string) func(string) string {
	return func(in string) string {
		return in + "{{- with .Values." + key + " }}\n" + in + "{{- toYaml . | nindent " + fmt.Sprint(len(in)) + " }}\n" + in + "{{- end }}"
	}
}

var (
	valRE   = regexp.MustCompile(`'?@@VAL:(\w+)@@'?`)
	blockRE = regexp.MustCompile(`^(\s*)(- |[\w./-]+: )?'?@@BLOCK:(\w+)@@'?(: .*)?$`)
)

// template writes obj as templates/<name>.yaml between head and tail, with the release's
// namespace and labels and the placeholders filled in.
func (c *chart) template(name string, obj object, head, tail string) error {
	body, err := c.render(obj)
	if err != nil {
		return err
	}
	return c.file(name, head, body, tail)
}

// render is obj as template text: placeholders replaced, the release's namespace and labels.
func (c *chart) render(obj object) (string, error) {
	crd := str(obj, "kind") == "CustomResourceDefinition"
	meta, _ := obj["metadata"].(object)
	if _, ok := meta["namespace"]; ok {
		meta["namespace"] = "@@VAL:namespace@@"
	}
	labels, _ := meta["labels"].(object)
	if labels == nil {
		labels = object{}
		meta["labels"] = labels
	}
	delete(labels, "app.kubernetes.io/managed-by") // kustomize's; the helper sets Helm's
	delete(labels, "app.kubernetes.io/name")
	labels["@@BLOCK:labels@@"] = ""
	raw, err := yaml.Marshal(obj)
	if err != nil {
		return "", err
	}
	body := string(raw)
	if !crd {
		// The namespace's other mentions: subjects, DNS names, the webhooks' Service.
		body = strings.ReplaceAll(body, namespace, "@@VAL:namespace@@")
	} else if strings.Contains(body, namespace) {
		return "", fmt.Errorf("the CRD mentions %s; the chart would install it unchanged into any namespace", namespace)
	}
	if strings.Contains(body, "{{") {
		return "", errors.New("the object contains {{, which Helm would read as a template")
	}
	var out []string
	for _, line := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		if m := blockRE.FindStringSubmatch(line); m != nil {
			in := m[1] // the snippet writes the key, or the list item's "- ", itself
			if m[3] == "labels" {
				out = append(out, in+`{{- include "planmode.labels" . | nindent `+fmt.Sprint(len(in))+` }}`)
				continue
			}
			f, ok := blocks[m[3]]
			if !ok {
				return "", fmt.Errorf("no block %q", m[3])
			}
			out = append(out, f(in))
			continue
		}
		var missing error
		line = valRE.ReplaceAllStringFunc(line, func(s string) string {
			k := valRE.FindStringSubmatch(s)[1]
			if k == "namespace" {
				return "{{ .Release.Namespace }}"
			}
			v, ok := values[k]
			if !ok {
				missing = fmt.Errorf("no value %q", k)
			}
			return v
		})
		if missing != nil {
			return "", missing
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n") + "\n", nil
}

// file writes templates/name.yaml: head, the rendered objects, tail.
func (c *chart) file(name, head, body, tail string) error {
	var b strings.Builder
	b.WriteString("# Generated by hack/chart from dist/install.yaml (make chart). Do not edit.\n")
	if head != "" {
		b.WriteString(head + "\n")
	}
	b.WriteString(body)
	if tail != "" {
		b.WriteString(tail + "\n")
	}
	path := filepath.Join("templates", name+".yaml")
	if _, dup := c.files[path]; dup {
		return fmt.Errorf("two objects map to %s", path)
	}
	c.files[path] = b.String()
	return nil
}

// meta writes Chart.yaml, values.yaml, values.schema.json and the helpers.
func (c *chart) meta() error {
	o := c.opts
	d := &c.defaults
	d.Repository, d.Digest = c.image.repository, o.imageDigest
	if o.imageRepository != "" {
		d.Repository = o.imageRepository
	}
	appVersion := o.appVersion
	if appVersion == "" {
		appVersion = c.image.tag
	}
	if o.imageDigest != "" && !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(o.imageDigest) {
		return fmt.Errorf("-image-digest %q: want sha256:<64 hex digits>", o.imageDigest)
	}
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`).MatchString(o.version) {
		return fmt.Errorf("-version %q: want SemVer without a leading v, e.g. 0.3.0", o.version)
	}
	c.files["Chart.yaml"] = fmt.Sprintf(chartYAML, o.version, appVersion)
	c.files["values.yaml"] = render(valuesYAML, d)
	c.files["values.schema.json"] = valuesSchema
	c.files["templates/_helpers.tpl"] = helpers
	c.files["templates/NOTES.txt"] = notes
	c.files[".helmignore"] = "# Generated by hack/chart (make chart).\n.DS_Store\n*.tmp\n"
	return nil
}

// write replaces the chart directory with the collected files.
func (c *chart) write() error {
	if err := os.RemoveAll(c.opts.out); err != nil {
		return err
	}
	paths := make([]string, 0, len(c.files))
	for p := range c.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(c.opts.out, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(c.files[p]), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "chart: wrote %s (%d files)\n", c.opts.out, len(paths))
	return nil
}

func decode(raw []byte) ([]object, error) {
	var objs []object
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var obj object
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, err
		}
		if obj != nil {
			objs = append(objs, obj)
		}
	}
	return objs, nil
}

// get walks maps by key and lists by index ("0").
func get(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case object:
			v = x[p]
		case []any:
			var i int
			if _, err := fmt.Sscanf(p, "%d", &i); err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any, path ...string) string {
	s, _ := get(v, path...).(string)
	return s
}

func setPath(obj object, value any, path ...string) {
	if parent, ok := get(obj, path[:len(path)-1]...).(object); ok {
		parent[path[len(path)-1]] = value
	}
}

func setAnnotation(obj object, k, v string) {
	meta := obj["metadata"].(object)
	ann, _ := meta["annotations"].(object)
	if ann == nil {
		ann = object{}
		meta["annotations"] = ann
	}
	ann[k] = v
}

// render fills values.yaml's @NAME@ placeholders with the install's defaults.
func render(tmpl string, d *defaults) string {
	return strings.NewReplacer(
		"@REPLICAS@", fmt.Sprint(d.Replicas),
		"@REPOSITORY@", d.Repository,
		"@DIGEST@", d.Digest,
		"@PULLPOLICY@", d.PullPolicy,
		"@SECRETNAME@", d.SecretName,
		"@SECRETKEY@", d.SecretKey,
		"@METRICSPORT@", fmt.Sprint(d.MetricsPort),
		"@AGENTBINDING@", fmt.Sprint(d.AgentBinding),
		"@RESOURCES@", indent(d.Resources, "  "),
	).Replace(tmpl)
}

func indent(s, in string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = in + lines[i]
	}
	return strings.Join(lines, "\n")
}
