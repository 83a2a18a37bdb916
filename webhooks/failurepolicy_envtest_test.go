package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("failurePolicy", func() {
	ctx := context.Background()

	It("is Fail with no side effects for every webhook in config/webhook", func() {
		data, err := os.ReadFile(filepath.Join(repoRoot, "config", "webhook", "manifests.yaml"))
		Expect(err).NotTo(HaveOccurred())
		type policies struct {
			Name          string                                     `json:"name"`
			FailurePolicy *admissionregistrationv1.FailurePolicyType `json:"failurePolicy"`
			SideEffects   *admissionregistrationv1.SideEffectClass   `json:"sideEffects"`
		}
		var kinds []string
		var webhooks []policies
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var doc struct {
				Kind     string     `json:"kind"`
				Webhooks []policies `json:"webhooks"`
			}
			if err := dec.Decode(&doc); err != nil {
				Expect(err).To(MatchError(io.EOF))
				break
			}
			kinds = append(kinds, doc.Kind)
			webhooks = append(webhooks, doc.Webhooks...)
		}
		Expect(kinds).To(ConsistOf("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"))
		Expect(webhooks).To(HaveLen(5))
		for _, w := range webhooks {
			Expect(w.FailurePolicy).To(HaveValue(Equal(admissionregistrationv1.Fail)), w.Name)
			Expect(w.SideEffects).To(HaveValue(Equal(admissionregistrationv1.SideEffectClassNone)), w.Name)
		}
	})

	It("refuses even a good PlanModeConfig while its webhook cannot be reached, instead of admitting it unchecked", func() {
		// The installed PlanModeConfig webhook, pointed at a port nobody listens on and scoped by
		// a label so the rest of the suite is untouched: what the API server does when the
		// manager is down.
		installed := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		Expect(adminC.List(ctx, installed)).To(Succeed())
		var pmc *admissionregistrationv1.ValidatingWebhook
		for i := range installed.Items {
			for j := range installed.Items[i].Webhooks {
				if installed.Items[i].Webhooks[j].Name == "vplanmodeconfig-v1alpha1.agents.harness.dev" {
					pmc = installed.Items[i].Webhooks[j].DeepCopy()
				}
			}
		}
		Expect(pmc).NotTo(BeNil())
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		deadPort := l.Addr().(*net.TCPAddr).Port
		Expect(l.Close()).To(Succeed())
		pmc.Name = "down.vplanmodeconfig-v1alpha1.agents.harness.dev"
		pmc.ClientConfig.URL = ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", deadPort, PlanModeConfigPath))
		pmc.ClientConfig.Service = nil
		pmc.TimeoutSeconds = ptr.To[int32](2)
		pmc.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"planmode.test/webhook": "down"}}
		down := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "planmode-webhook-down"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{*pmc}}
		Expect(adminC.Create(ctx, down)).To(Succeed())
		DeferCleanup(func() { Expect(adminC.Delete(context.Background(), down)).To(Succeed()) })

		name := uniqueName("down")
		obj := pmcObject(name, `{"section":"You are in plan mode."}`)
		obj.SetLabels(map[string]string{"planmode.test/webhook": "down"})
		// The API server picks up a new webhook configuration asynchronously.
		// The API server picks up a new webhook configuration asynchronously: a create that slips in
		// before that is undone and retried.
		Eventually(func() error {
			err := adminC.Create(ctx, obj.DeepCopy())
			if err == nil {
				Expect(adminC.Delete(ctx, obj.DeepCopy())).To(Succeed())
				return errors.New("admitted before the webhook configuration was active")
			}
			return err
		}).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).
			Should(MatchError(ContainSubstring(`failed calling webhook "down.vplanmodeconfig-v1alpha1.agents.harness.dev"`)))
		Eventually(func() bool {
			return apierrors.IsNotFound(adminC.Get(ctx, client.ObjectKey{Namespace: testNS, Name: name}, obj.DeepCopy()))
		}).WithTimeout(10*time.Second).Should(BeTrue(), "nothing may be stored while the webhook is down")
	})
})
