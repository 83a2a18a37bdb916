// Command planlog exports, imports and inspects session logs in the harness's JSONL format.
//
//	planlog export --store URL --session ID [--cwd DIR] > session.jsonl
//	planlog import --store URL [--session ID] < session.jsonl[.zstd]
//	planlog tail   --store URL --session ID
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
	var storeURL string
	root.Version = version.String("planlog")
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVar(&storeURL, "store", "", "session-log store URL (sqlite:///abs/path.db, sqlite://rel.db, postgres://...); default $"+storeEnv)

	// resolve names the store; readers open it read-only, so a mistyped path or URL creates nothing.
	resolve := func(cmd *cobra.Command) (string, error) {
		if storeURL == "" {
			storeURL = storeenv.Lookup()
		}
		if storeURL == "" {
			return "", fmt.Errorf("no store: pass --store URL or set $%s", storeEnv)
		}
		return storeURL, nil
	}
	open := func(cmd *cobra.Command) (sessionlog.Store, error) {
		url, err := resolve(cmd)
		if err != nil {
			return nil, err
		}
		return sessionlog.Open(cmd.Context(), url)
	}
	openRead := func(cmd *cobra.Command) (sessionlog.Store, error) {
		url, err := resolve(cmd)
		if err != nil {
			return nil, err
		}
		return sessionlog.OpenReadOnly(cmd.Context(), url)
	}
	requireSession := func(id string) error {
		if id == "" {
			return fmt.Errorf("--session is required")
		}
		return nil
	}

	var exportID string
	var exportOpts sessionlog.ExportOptions
	exportCmd := &cobra.Command{
		Use:   "export --session ID [--cwd DIR]",
		Short: "Write one session as harness JSONL (header line, then one event per line) to stdout",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireSession(exportID); err != nil {
				return err
			}
			s, err := openRead(cmd)
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }()
			if exportOpts.Cwd == "" {
				// The harness resumes such a log but fails its next turn: its prompt needs a cwd.
				fmt.Fprintln(cmd.ErrOrStderr(), "planlog: the header has no cwd; to run turns on this log in the harness, export with --cwd DIR (the directory it resumes in)")
			}
			return sessionlog.ExportJSONL(cmd.Context(), s, exportID, cmd.OutOrStdout(), exportOpts)
		},
	}
	exportCmd.Flags().StringVar(&exportID, "session", "", "session id to export")
	exportCmd.Flags().StringVar(&exportOpts.Cwd, "cwd", "", "working directory to record in the header: the directory the harness resumes the session in")

	var importOpts sessionlog.ImportOptions
	importCmd := &cobra.Command{
		Use:   "import [--session ID] < session.jsonl[.zstd]",
		Short: "Create a session from a harness log on stdin, plain or zstd-compressed (refused if it exists; nothing stored on any error)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := open(cmd)
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }()
			info, tail, err := sessionlog.Import(cmd.Context(), s, cmd.InOrStdin(), importOpts)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported session %q: %d events\n", info.ID, tail.NextSeq)
			return nil
		},
	}
	importCmd.Flags().StringVar(&importOpts.SessionID, "session", "", "store under this id instead of the header's")

	var tailID string
	tailCmd := &cobra.Command{
		Use:   "tail --session ID",
		Short: "Print the session's header and tail state (next seq, plan state, told, turn/step) as JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireSession(tailID); err != nil {
				return err
			}
			s, err := openRead(cmd)
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }()
			info, err := s.Info(cmd.Context(), tailID)
			if err != nil {
				return err
			}
			t, err := s.Tail(cmd.Context(), tailID)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(tailView(info, t))
		},
	}
	tailCmd.Flags().StringVar(&tailID, "session", "", "session id")

	root.AddCommand(exportCmd, importCmd, tailCmd)
	return root
}

// tailJSON is tail's output: the header plus the tail state, with told null when no
// request/header was logged.
type tailJSON struct {
	Session          string `json:"session"`
	CreatedAt        int64  `json:"createdAt"`
	ParentSession    string `json:"parentSession,omitempty"`
	SeedLength       int64  `json:"seedLength,omitempty"`
	NextSeq          int64  `json:"nextSeq"`
	Active           bool   `json:"active"`
	LastPlanModeSeq  int64  `json:"lastPlanModeSeq"`
	LastShown             *bool  `json:"told"`
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
