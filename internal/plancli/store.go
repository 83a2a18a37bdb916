package plancli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/harness-dev/planmode-operator/internal/storeenv"
	"github.com/harness-dev/planmode-operator/pkg/connstr"
)

// KubeconfigExtension names the kubeconfig context extension that records the session-log
// store of that context's cluster, so `kubectl plan log` needs no --store:
//
//	contexts:
//	- name: dev
//	  context:
//	    cluster: dev
//	    user: me
//	    extensions:
//	    - name: planmode.agents.harness.dev/log-store
//	      extension:
//	        url: postgres://reader@db.example:5432/planmode
//
// make run writes it into its own kubeconfig; `kubectl plan use-store URL` writes it into the
// current context of yours. A kubeconfig already holds credentials, so a password here is
// protected like the rest of the file.
const KubeconfigExtension = "planmode.agents.harness.dev/log-store"

type storeExtension struct {
	URL string `json:"url"`
}

// SetKubeconfigStore records url as the log store of the current context of the kubeconfig
// file at path.
func SetKubeconfigStore(path, url string) error {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return err
	}
	if err := setContextStore(cfg, cfg.CurrentContext, url); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return clientcmd.WriteToFile(*cfg, path)
}

func setContextStore(cfg *clientcmdapi.Config, contextName, url string) error {
	kc := cfg.Contexts[contextName]
	if kc == nil {
		return fmt.Errorf("no context %q in the kubeconfig (set one with kubectl config use-context)", contextName)
	}
	raw, err := json.Marshal(storeExtension{URL: url})
	if err != nil {
		return err
	}
	if kc.Extensions == nil {
		kc.Extensions = map[string]runtime.Object{}
	}
	kc.Extensions[KubeconfigExtension] = &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
	return nil
}

// contextStore reads the store URL recorded in a context; empty when there is none.
func contextStore(cfg clientcmdapi.Config, contextName string) (string, error) {
	kc := cfg.Contexts[contextName]
	if kc == nil {
		return "", nil
	}
	obj, ok := kc.Extensions[KubeconfigExtension]
	if !ok {
		return "", nil
	}
	u, ok := obj.(*runtime.Unknown)
	if !ok {
		return "", fmt.Errorf("kubeconfig context %q: extension %s is not {url: ...}", contextName, KubeconfigExtension)
	}
	var ext storeExtension
	if err := json.Unmarshal(u.Raw, &ext); err != nil || ext.URL == "" {
		return "", fmt.Errorf("kubeconfig context %q: extension %s must be {url: URL}", contextName, KubeconfigExtension)
	}
	return ext.URL, nil
}

// storeURL resolves the session-log store for a read: --store, then $PLANMODE_LOG_STORE, then
// the current kubeconfig context's extension. Empty with a nil error when none names one.
func (o *Options) storeURL(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if url := storeenv.Lookup(); url != "" {
		return url, nil
	}
	if o.Flags == nil {
		return "", nil
	}
	raw, err := o.Flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return "", nil // no kubeconfig: the caller says how to name a store
	}
	name := raw.CurrentContext
	if o.Flags.Context != nil && *o.Flags.Context != "" {
		name = *o.Flags.Context
	}
	return contextStore(raw, name)
}

// noStoreError says every way to name the store.
func noStoreError() error {
	return fmt.Errorf("no session-log store: pass --store URL, set %s, or record it in your kubeconfig's current context with "+
		"`kubectl plan use-store URL` (for example sqlite:///var/lib/planmode/log.db or postgres://user@host:5432/db)", storeenv.Name)
}

func newUseStoreCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "use-store URL",
		Short: "Record the session-log store of the current kubeconfig context, for kubectl plan log and status",
		Long: `Record URL as the session-log store of the current kubeconfig context (or of --context), as
the context extension ` + KubeconfigExtension + `. kubectl plan log and kubectl plan status then
read the log without --store. --store and $` + storeenv.Name + ` still take precedence.

The kubeconfig file is written in place (the first file of $KUBECONFIG, or --kubeconfig); a
password in the URL is stored with the file's other credentials. make run records its own
store in the kubeconfig it writes.`,
		Example: `  kubectl plan use-store postgres://reader@db.example:5432/planmode
  kubectl plan use-store sqlite:///var/lib/planmode/log.db --context dev`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf(`"use-store" needs exactly one argument, the store URL (usage: kubectl plan use-store URL)`)
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			return o.useStore(args[0])
		},
	}
}

func (o *Options) useStore(url string) error {
	if !strings.HasPrefix(url, "sqlite://") && !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		return fmt.Errorf("store URL %q: use sqlite:///abs/path.db or postgres://user@host:5432/db", connstr.Redact(url))
	}
	loader := o.Flags.ToRawKubeConfigLoader()
	raw, err := loader.RawConfig()
	if err != nil {
		return fmt.Errorf("cannot load the kubeconfig: %w", err)
	}
	name := raw.CurrentContext
	if o.Flags.Context != nil && *o.Flags.Context != "" {
		name = *o.Flags.Context
	}
	if err := setContextStore(&raw, name, url); err != nil {
		return err
	}
	if err := clientcmd.ModifyConfig(loader.ConfigAccess(), raw, false); err != nil {
		return fmt.Errorf("write the kubeconfig: %w", err)
	}
	_, err = fmt.Fprintf(o.Streams.Out, "Context %q now reads the session log from the store you gave; kubectl plan log needs no --store.\n", name)
	return err
}
