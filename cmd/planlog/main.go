// Command planlog exports, imports and inspects session logs in the harness's JSONL format.
//
//	planlog export --store URL --session ID [--cwd DIR] > session.jsonl
//	planlog import --store URL [--session ID] [--owner NAMESPACE/NAME] < session.jsonl[.zstd]
//	planlog tail   --store URL SESSION   (or --session ID)
//	planlog release --store URL --session ID --owner NAMESPACE/NAME
//
// URL is a session-log store URL (sqlite:///abs/path.db, sqlite://rel.db, postgres://...);
// --store defaults to $PLANMODE_LOG_STORE, the variable every binary reads (internal/storeenv).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/harness-dev/planmode-operator/internal/storeenv"
	"github.com/harness-dev/planmode-operator/internal/version"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// storeEnv supplies --store when the flag is not given.
const storeEnv = storeenv.Name

func main() {
	cmd := newRootCmd(os.Stdin, os.Stdout, os.Stderr)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "planlog:", err)
		os.Exit(1)
	}
}

func newRootCmd(in io.Reader, out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "planlog",
		Short:         "Export, import and inspect agent session logs (harness JSONL format)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	root.Version = version.String("planlog")
	root.SetVersionTemplate("{{.Version}}\n")
	st := &store{}
	root.PersistentFlags().StringVar(&st.url, "store", "", "session-log store URL (sqlite:///abs/path.db, sqlite://rel.db, postgres://...); default $"+storeEnv)
	root.AddCommand(newExportCmd(st), newImportCmd(st), newTailCmd(st), newReleaseCmd(st))
	return root
}

// store is the --store every subcommand shares.
type store struct{ url string }

// resolve names the store: --store, else $PLANMODE_LOG_STORE.
func (st *store) resolve() (string, error) {
	if st.url == "" {
		st.url = storeenv.Lookup()
	}
	if st.url == "" {
		return "", fmt.Errorf("no store: pass --store URL or set $%s", storeEnv)
	}
	return st.url, nil
}

// open opens the store for writing.
func (st *store) open(cmd *cobra.Command) (sessionlog.Store, error) {
	url, err := st.resolve()
	if err != nil {
		return nil, err
	}
	return sessionlog.Open(cmd.Context(), url)
}

// openRead opens the store read-only, so a mistyped path or URL creates nothing.
func (st *store) openRead(cmd *cobra.Command) (sessionlog.Store, error) {
	url, err := st.resolve()
	if err != nil {
		return nil, err
	}
	return sessionlog.OpenReadOnly(cmd.Context(), url)
}

func requireSession(id string) error {
	if id == "" {
		return fmt.Errorf("--session is required")
	}
	return nil
}

func newExportCmd(st *store) *cobra.Command {
	var id string
	var opts sessionlog.ExportOptions
	cmd := &cobra.Command{
		Use:   "export --session ID [--cwd DIR]",
		Short: "Write one session as harness JSONL (header line, then one event per line) to stdout",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireSession(id); err != nil {
				return err
			}
			s, err := st.openRead(cmd)
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }()
			if opts.Cwd == "" {
				// The harness resumes such a log but fails its next turn: its prompt needs a cwd.
				fmt.Fprintln(cmd.ErrOrStderr(), "planlog: the header has no cwd; to run turns on this log in the harness, export with --cwd DIR (the directory it resumes in)")
			}
			return sessionlog.ExportJSONL(cmd.Context(), s, id, cmd.OutOrStdout(), opts)
		},
	}
	cmd.Flags().StringVar(&id, "session", "", "session id to export")
	cmd.Flags().StringVar(&opts.Cwd, "cwd", "", "working directory to record in the header: the directory the harness resumes the session in")
	return cmd
}

func newImportCmd(st *store) *cobra.Command {
	var opts sessionlog.ImportOptions
	cmd := &cobra.Command{
		Use:   "import [--session ID] < session.jsonl[.zstd]",
		Short: "Create a session from a harness log on stdin, plain or zstd-compressed (refused if it exists; nothing stored on any error)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := st.open(cmd)
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }()
			info, tail, err := sessionlog.Import(cmd.Context(), s, cmd.InOrStdin(), opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported session %q: %d events\n", info.ID, tail.NextSeq)
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.SessionID, "session", "", "store under this id instead of the header's")
	cmd.Flags().Var(ownerFlag{&opts.Owner}, "owner", "NAMESPACE/NAME of the AgentSession the log is for (its namespace may then fork it); "+
		"unset: the log belongs to nobody until an AgentSession names it, and nobody may fork it")
	return cmd
}

func newTailCmd(st *store) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "tail SESSION",
		Short: "Print the session's header, owner and tail state (next seq, plan state, told, turn/step) as JSON",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && id != "" && id != args[0] {
				return fmt.Errorf("two sessions: %q and --session %q; give one", args[0], id)
			}
			if len(args) == 1 {
				id = args[0]
			}
			if err := requireSession(id); err != nil {
				return err
			}
			s, err := st.openRead(cmd)
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }()
			info, err := s.Info(cmd.Context(), id)
			if err != nil {
				return err
			}
			t, err := s.Tail(cmd.Context(), id)
			if err != nil {
				return err
			}
			view := tailView(info, t)
			if o, ok, err := s.OwnerOf(cmd.Context(), id); err != nil {
				return err
			} else if ok {
				view.Owner = o.String()
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(view)
		},
	}
	cmd.Flags().StringVar(&id, "session", "", "session id (the same as the SESSION argument)")
	return cmd
}

// newReleaseCmd is planlog release: the store keeps a log its AgentSession's owning record
// after the session is deleted, so no other session (in any namespace) can claim or fork it by
// naming its ID; release drops that record (docs/operations.md, "Releasing a deleted
// session's log"). It needs write access to the store, which only the platform team has.
func newReleaseCmd(st *store) *cobra.Command {
	var id string
	var holder sessionlog.Owner
	cmd := &cobra.Command{
		Use:   "release --session ID --owner NAMESPACE/NAME",
		Short: "Let another AgentSession claim a deleted session's log (the events stay; the owner named must be the recorded one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if id == "" || holder.IsZero() {
				return fmt.Errorf("--session and --owner are both required: planlog release --session ID --owner NAMESPACE/NAME (planlog tail --session ID shows the owner)")
			}
			s, err := st.open(cmd)
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }()
			if err := s.ReleaseOwner(cmd.Context(), id, holder); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "released session %q from AgentSession %s: the next AgentSession that names it, in any namespace, owns its log\n", id, holder)
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "session", "", "session id whose log to release")
	cmd.Flags().Var(ownerFlag{&holder}, "owner", "NAMESPACE/NAME of the AgentSession the store records as the owner")
	return cmd
}

// ownerFlag is a NAMESPACE/NAME flag naming an AgentSession.
type ownerFlag struct{ o *sessionlog.Owner }

func (f ownerFlag) String() string {
	if f.o == nil || f.o.IsZero() {
		return ""
	}
	return f.o.String()
}

func (f ownerFlag) Set(v string) error {
	ns, name, ok := strings.Cut(v, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("%q: expected NAMESPACE/NAME of an AgentSession", v)
	}
	*f.o = sessionlog.Owner{Namespace: ns, Name: name}
	return nil
}

func (ownerFlag) Type() string { return "namespace/name" }

// tailJSON is tail's output: the header plus the tail state, with told null when no
// request/header was logged.
type tailJSON struct {
	Session          string `json:"session"`
	CreatedAt        int64  `json:"createdAt"`
	ParentSession    string `json:"parentSession,omitempty"`
	SeedLength       int64  `json:"seedLength,omitempty"`
	Owner            string `json:"owner,omitempty"` // NAMESPACE/NAME of the AgentSession that owns the log
	NextSeq          int64  `json:"nextSeq"`
	Active           bool   `json:"active"`
	LastPlanModeSeq  int64  `json:"lastPlanModeSeq"`
	LastShown        *bool  `json:"told"`
	TurnOpen         bool   `json:"turnOpen"`
	Turn             int64  `json:"turn"`
	Step             int64  `json:"step"`
	StepOpen         bool   `json:"stepOpen"`
	LastStepStartSeq int64  `json:"lastStepStartSeq"`
}

func tailView(info sessionlog.SessionInfo, t harness.Tail) tailJSON {
	return tailJSON{Session: info.ID, CreatedAt: info.CreatedAt, ParentSession: info.ParentSession, SeedLength: info.SeedLength,
		NextSeq: t.NextSeq, Active: t.Active, LastPlanModeSeq: t.LastPlanModeSeq, LastShown: t.LastShown, TurnOpen: t.TurnOpen,
		Turn: t.Turn, Step: t.Step, StepOpen: t.StepOpen, LastStepStartSeq: t.LastStepStartSeq}
}
