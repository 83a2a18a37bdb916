// Command plancheck checks one session's log, and optionally its AgentSession, against the
// plan-mode invariants (pkg/invariant) and prints every violation with its seq.
//
//	plancheck --store URL --session ID
//	plancheck --store URL --namespace NS --name NAME [--kubeconfig PATH]   (session id from spec)
//	plancheck --store URL --session ID --acks acks.jsonl                   (a recorded ack history)
//
// Exit status: 0 clean, 1 violations found, 2 the check could not run.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/storeenv"
	"github.com/harness-dev/planmode-operator/internal/version"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// errViolations makes the command exit 1 without printing an error line.
var errViolations = errors.New("violations found")

func main() {
	cmd := newRootCmd(os.Stdout, os.Stderr)
	err := cmd.ExecuteContext(context.Background())
	switch {
	case err == nil:
	case errors.Is(err, errViolations):
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "plancheck:", err)
		os.Exit(2)
	}
}

type options struct {
	store, session              string
	kubeconfig, namespace, name string
	acks                        string
	json                        bool
}

func newRootCmd(out, errOut io.Writer) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "plancheck --store URL (--session ID | --namespace NS --name NAME)",
		Short: "Check a session's log (and AgentSession) against the plan-mode invariants",
		Long: `plancheck reads a session's whole log and reports every violation of the plan-mode
invariants: a plan/mode that repeats the committed state, one inside a step, two at one step
boundary, a boundary acknowledged with a state the log does not hold, a final selection that
never committed, a notice that breaks the narration rule, a seq gap.

With --namespace/--name it also reads the AgentSession (spec.planMode.active, its status and
last boundary answer); with --acks it checks a recorded history of boundary answers (JSON
lines or a JSON array of {turn, step, seq, result, active, nextSeq, notice}).

Exit status: 0 clean, 1 violations found, 2 the check could not run.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		Version:       version.String("plancheck"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.store == "" {
				o.store = storeenv.Lookup()
			}
			return run(cmd.Context(), o, out)
		},
	}
	cmd.SetVersionTemplate("{{.Version}}\n")
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	f := cmd.Flags()
	f.StringVar(&o.store, "store", "", "session-log store URL (sqlite:///abs/path.db, postgres://...); default $"+storeenv.Name)
	f.StringVar(&o.session, "session", "", "session id in the log store (default: the AgentSession's spec.sessionID)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig for reading the AgentSession (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
	f.StringVar(&o.namespace, "namespace", "", "namespace of the AgentSession (with --name)")
	f.StringVar(&o.name, "name", "", "name of the AgentSession: also check its final selection and last boundary answer")
	f.StringVar(&o.acks, "acks", "", "file of recorded boundary answers to check against the log")
	f.BoolVar(&o.json, "json", false, "print the violations as a JSON array")
	return cmd
}

func run(ctx context.Context, o options, out io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	var acks []invariant.Ack
	if o.acks != "" {
		var err error
		if acks, err = readAcks(o.acks); err != nil {
			return err
		}
	}
	var final *invariant.Final
	if o.name != "" {
		var err error
		if final, acks, err = o.readAgentSession(ctx, acks); err != nil {
			return err
		}
	}
	store, err := sessionlog.OpenReadOnly(ctx, o.store)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close() }()
	if _, err := store.Info(ctx, o.session); err != nil {
		return fmt.Errorf("session %q: %w", o.session, err)
	}
	vs, err := invariant.CheckStore(ctx, store, o.session, acks, final)
	if err != nil {
		return err
	}
	if o.json {
		if vs == nil {
			vs = []invariant.Violation{}
		}
		b, _ := json.MarshalIndent(vs, "", "  ")
		fmt.Fprintln(out, string(b))
	} else {
		for _, v := range vs {
			fmt.Fprintln(out, v.String())
		}
		tail, _ := store.Tail(ctx, o.session)
		fmt.Fprintf(out, "session %q: %d events, %d acks checked, %d violations\n", o.session, tail.NextSeq, len(acks), len(vs))
	}
	if len(vs) > 0 {
		return errViolations
	}
	return nil
}

// validate checks that the flags name a store and one session.
func (o *options) validate() error {
	switch {
	case o.store == "":
		return errors.New("--store is required: the session-log URL (sqlite:///abs/path.db or postgres://...), or set " + storeenv.Name)
	case o.name != "" && o.namespace == "":
		return errors.New("--name needs --namespace")
	case o.namespace != "" && o.name == "":
		return errors.New("--namespace needs --name")
	case o.session == "" && o.name == "":
		return errors.New("--session is required (or --namespace and --name to take it from the AgentSession)")
	}
	return nil
}

// readAgentSession reads the AgentSession --namespace/--name: it sets o.session from its spec
// (or checks --session against it), and returns its final selection and acks with its last
// boundary answer added.
func (o *options) readAgentSession(ctx context.Context, acks []invariant.Ack) (*invariant.Final, []invariant.Ack, error) {
	s, err := getSession(ctx, *o)
	if err != nil {
		return nil, nil, err
	}
	if o.session == "" {
		o.session = s.Spec.SessionID
	} else if o.session != s.Spec.SessionID {
		return nil, nil, fmt.Errorf("--session %q differs from AgentSession %s/%s spec.sessionID %q", o.session, o.namespace, o.name, s.Spec.SessionID)
	}
	if a := invariant.AckFrom(s.Status.PlanMode.LastBoundary); a != nil {
		acks = append(acks, *a)
	}
	return invariant.FinalFrom(s), acks, nil
}

func getSession(ctx context.Context, o options) (*agentsv1alpha1.AgentSession, error) {
	cfg, err := config.GetConfig()
	if o.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := agentsv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	var s agentsv1alpha1.AgentSession
	if err := c.Get(ctx, types.NamespacedName{Namespace: o.namespace, Name: o.name}, &s); err != nil {
		return nil, fmt.Errorf("get AgentSession %s/%s: %w", o.namespace, o.name, err)
	}
	return &s, nil
}

// readAcks reads a JSON array or JSON lines of acks.
func readAcks(path string) ([]invariant.Ack, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--acks: %w", err)
	}
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		var acks []invariant.Ack
		if err := json.Unmarshal(t, &acks); err != nil {
			return nil, fmt.Errorf("--acks %s: %w", path, err)
		}
		return acks, nil
	}
	var acks []invariant.Ack
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var a invariant.Ack
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return nil, fmt.Errorf("--acks %s line %d: %w", path, n, err)
		}
		acks = append(acks, a)
	}
	return acks, sc.Err()
}
