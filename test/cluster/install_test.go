//go:build cluster

package cluster

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// What dist/install.yaml names (config/default's namePrefix and namespace).
const (
	systemNS       = "planmode-system"
	managerDeploy  = "planmode-controller-manager"
	webhookService = "planmode-webhook-service"
	webhookConfig  = "planmode-validating-webhook-configuration"
	mutatingConfig = "planmode-mutating-webhook-configuration"
	metricsService = "planmode-controller-manager-metrics-service"
	leaseName      = "planmode-operator.agents.harness.dev"
)

// renderInstall renders dist/install.yaml through test/cluster/overlay and a generated layer
// on top (renderInstallFrom).
func renderInstall(dir, managerImage, storeURL string) []byte {
	GinkgoHelper()
	return renderInstallFrom(dir, filepath.Join(root, "dist", "install.yaml"), managerImage, storeURL)
}

// renderInstallFrom renders an install manifest (dist/install.yaml of this or an earlier
// commit) through test/cluster/overlay and a generated layer on top: the manager image (by tag
// or digest), the serving Secret the Deployment mounts (a CA and certificate made here, in place
// of cert-manager's; dir/ca.crt keeps the CA), the CA as every webhook's caBundle, and the
// log-store Secret. It returns the rendered manifest.
func renderInstallFrom(dir, install, managerImage, storeURL string) []byte {
	GinkgoHelper()
	Expect(os.MkdirAll(filepath.Join(dir, "overlay"), 0o700)).To(Succeed())
	caPEM, certPEM, keyPEM := servingCert(webhookService + "." + systemNS + ".svc")
	for name, b := range map[string][]byte{"ca.crt": caPEM, "tls.crt": certPEM, "tls.key": keyPEM, "log-store-url": []byte(storeURL)} {
		Expect(os.WriteFile(filepath.Join(dir, name), b, 0o600)).To(Succeed())
	}
	// test/cluster/overlay, on the given install.
	overlay := string(must(os.ReadFile(filepath.Join(root, "test", "cluster", "overlay", "kustomization.yaml"))))
	Expect(overlay).To(ContainSubstring("- ../../../dist/install.yaml\n"))
	overlay = strings.Replace(overlay, "- ../../../dist/install.yaml\n", "- install.yaml\n", 1)
	Expect(os.WriteFile(filepath.Join(dir, "overlay", "kustomization.yaml"), []byte(overlay), 0o600)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, "overlay", "install.yaml"), must(os.ReadFile(install)), 0o600)).To(Succeed())
	base := must(kube("kustomize", filepath.Join(dir, "overlay")))
	hooks := webhookCount(base, "ValidatingWebhookConfiguration")
	Expect(hooks).To(BeNumerically(">", 0), "the overlay renders no webhooks in %s", webhookConfig)
	// The mutating webhook (the deciders' stamps) came after the first releases: an earlier
	// commit's install has none, this tree's must.
	mutating := webhookCount(base, "MutatingWebhookConfiguration")
	if install == filepath.Join(root, "dist", "install.yaml") {
		Expect(mutating).To(BeNumerically(">", 0), "the overlay renders no webhooks in %s", mutatingConfig)
	}

	var k strings.Builder
	fmt.Fprintf(&k, "resources:\n- overlay\n")
	if name, digest, ok := strings.Cut(managerImage, "@"); ok {
		fmt.Fprintf(&k, "images:\n- name: planmode-operator\n  newName: %s\n  digest: %s\n", name, digest)
	} else {
		name, tag, ok := strings.Cut(managerImage, ":")
		Expect(ok).To(BeTrue(), "manager image %q has no tag", managerImage)
		fmt.Fprintf(&k, "images:\n- name: planmode-operator\n  newName: %s\n  newTag: %q\n", name, tag)
	}
	fmt.Fprintf(&k, "secretGenerator:\n")
	fmt.Fprintf(&k, "- name: webhook-server-cert\n  namespace: %s\n  type: kubernetes.io/tls\n  files: [tls.crt, tls.key, ca.crt]\n  options: {disableNameSuffixHash: true}\n", systemNS)
	fmt.Fprintf(&k, "- name: planmode-log-store\n  namespace: %s\n  files: [url=log-store-url]\n  options: {disableNameSuffixHash: true}\n", systemNS)
	ca := base64.StdEncoding.EncodeToString(caPEM)
	fmt.Fprintf(&k, "patches:\n")
	for _, c := range []struct {
		kind, name string
		n          int
	}{{"ValidatingWebhookConfiguration", webhookConfig, hooks}, {"MutatingWebhookConfiguration", mutatingConfig, mutating}} {
		if c.n == 0 {
			continue
		}
		fmt.Fprintf(&k, "- target: {kind: %s, name: %s}\n  patch: |\n", c.kind, c.name)
		for i := 0; i < c.n; i++ {
			fmt.Fprintf(&k, "    - {op: add, path: /webhooks/%d/clientConfig/caBundle, value: %s}\n", i, ca)
		}
	}
	Expect(os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k.String()), 0o600)).To(Succeed())
	out, err := kube("kustomize", dir)
	Expect(err).NotTo(HaveOccurred(), out)
	return []byte(out)
}

// webhookCount counts the webhooks of the webhook configuration of kind in a rendered manifest.
func webhookCount(manifest, kind string) int {
	GinkgoHelper()
	for _, doc := range strings.Split(manifest, "\n---\n") {
		var obj struct {
			Kind     string           `json:"kind"`
			Webhooks []map[string]any `json:"webhooks"`
		}
		Expect(yaml.Unmarshal([]byte(doc), &obj)).To(Succeed())
		if obj.Kind == kind {
			return len(obj.Webhooks)
		}
	}
	return 0
}

// servingCert makes a CA and a serving certificate for the webhook Service's DNS names.
func servingCert(svc string) (caPEM, certPEM, keyPEM []byte) {
	GinkgoHelper()
	caKey := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "planmode-cluster-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER := must(x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey))
	caCert := must(x509.ParseCertificate(caDER))
	key := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: svc},
		DNSNames:  []string{svc, svc + ".cluster.local"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey))
	keyDER := must(x509.MarshalECPrivateKey(key))
	enc := func(typ string, b []byte) []byte {
		var buf bytes.Buffer
		Expect(pem.Encode(&buf, &pem.Block{Type: typ, Bytes: b})).To(Succeed())
		return buf.Bytes()
	}
	return enc("CERTIFICATE", caDER), enc("CERTIFICATE", der), enc("EC PRIVATE KEY", keyDER)
}
