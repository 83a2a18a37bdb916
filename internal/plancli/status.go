package plancli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/termtext"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

func newStatusCommand(o *Options) *cobra.Command {
	var output, store string
	cmd := &cobra.Command{
		Use:   "status SESSION",
		Short: "Show committed, pending and desired plan state, the config in force, and any review",
		Long: `Show the plan state of an AgentSession, in the words of kubectl plan list's columns:

  Plan mode      status.planMode.active: the last plan/mode in the session log, true (on) or false (off)
  Pending        status.planMode.pendingActive: the plan mode waiting for the agent's next step
                 boundary (a selection, or an approved plan's exit); none when nothing waits
  Selected       spec.planMode.active: your selection (none: the session follows its log)
  Turn           whether a turn is open (selections made now wait for a step boundary), read
                 live from the session log when its store is known (--store, $PLANMODE_LOG_STORE
                 or the kubeconfig context), else as of the manager's last status write
  Config         the PlanModeConfig in force (name, generation, section SHA-256)
  Last change    when the committed plan mode last changed (the time of the last plan/mode in
                 the log when the store is known)
  Notice owed    a notice owed to the model after a between-turns change, until the agent's
                 next step records it
  Last boundary  the step boundary the manager last answered
  Review         the plan under review and its phase (status.review.phase: Pending, Approved,
                 KeepPlanning, Dismissed, Expired, Rejected)
  Ready          the Ready condition (reason and message explain a stuck selection)

-o json or -o yaml prints the same facts as a structured document.
Needs "get" on agentsessions.agents.harness.dev.`,
		Example: `  kubectl plan status demo
  kubectl plan status demo -o json`,
		Args: exactSession("status SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.status(cmd.Context(), args[0], output, store)
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().StringVar(&store, "store", "", "Session-log store URL to read the live log tail from (default: $"+StoreEnv+", then the kubeconfig context's; none: status only)")
	return cmd
}

// StatusView is the structured form of `kubectl plan status`.
type StatusView struct {
	Session       string                 `json:"session"`
	Namespace     string                 `json:"namespace"`
	SessionID     string                 `json:"sessionID"`
	PlanMode      bool                   `json:"planMode"`
	Pending       *bool                  `json:"pending,omitempty"`
	PendingSource v1alpha1.PendingSource `json:"pendingSource,omitempty"`
	// PendingUnwritten: Pending is the user's selection, which the manager has not taken on
	// yet (during a turn it writes it only at the agent's next step boundary, or once
	// --pending-status-delay has passed).
	PendingUnwritten bool                        `json:"pendingUnwritten,omitempty"`
	Selected         *bool                       `json:"selected,omitempty"`
	TurnOpen         bool                        `json:"turnOpen"`
	NextSeq          int64                       `json:"nextSeq"`
	Config           *v1alpha1.ConfigInForce     `json:"config,omitempty"`
	ConfigRef        string                      `json:"configRef"`
	LastTransition   *time.Time                  `json:"lastTransition,omitempty"`
	Notice           *v1alpha1.OwedNotice        `json:"notice,omitempty"`
	LastBoundary     *v1alpha1.BoundaryAck       `json:"lastBoundary,omitempty"`
	Review           *v1alpha1.PlanReviewRequest `json:"review,omitempty"`
	ReviewDecision   *v1alpha1.ReviewDecision    `json:"reviewDecision,omitempty"`
	ReviewStatus     *v1alpha1.ReviewStatus      `json:"reviewStatus,omitempty"`
	ReviewTimeout    string                      `json:"reviewTimeout,omitempty"`
	Ready            string                      `json:"ready,omitempty"`
	ReadyReason      string                      `json:"readyReason,omitempty"`
	ReadyMessage     string                      `json:"readyMessage,omitempty"`
	SelectedBy       *v1alpha1.Actor             `json:"selectedBy,omitempty"`
	SelectedAt       *time.Time                  `json:"selectedAt,omitempty"`
	Changes          []v1alpha1.PlanModeChange   `json:"planModeChanges,omitempty"`
	ReviewHistory    []v1alpha1.ReviewRevision   `json:"reviewHistory,omitempty"`
	LastMessage      *v1alpha1.SteerMessage      `json:"lastMessage,omitempty"` // the queue's last (spec.steerQueue)
	LastDelivered    bool                        `json:"lastMessageDelivered,omitempty"`
	ObservedCurrent  bool                        `json:"observedCurrent"`
	// Live is the log's tail read from the store (--store), when given.
	Live *LiveTail `json:"live,omitempty"`
}

// LiveTail is the session log's tail as the store has it now.
type LiveTail struct {
	Active           bool       `json:"active"`
	NextSeq          int64      `json:"nextSeq"`
	TurnOpen         bool       `json:"turnOpen"`
	Turn             int64      `json:"turn"`
	Step             int64      `json:"step"`
	LastPlanModeSeq  int64      `json:"lastPlanModeSeq"`
	LastPlanModeTime *time.Time `json:"lastPlanModeTime,omitempty"`
	LastStepStartSeq int64      `json:"lastStepStartSeq"`
}

func viewOf(as *v1alpha1.AgentSession) StatusView {
	pm := as.Status.PlanMode
	v := StatusView{
		Session: as.Name, Namespace: as.Namespace, SessionID: as.Spec.SessionID,
		PlanMode: pm.Active, TurnOpen: pm.TurnOpen, NextSeq: pm.NextSeq,
		Selected: as.Spec.PlanMode.Active, Config: pm.Config, Notice: pm.Notice, LastBoundary: pm.LastBoundary,
		ReviewDecision: as.Spec.Review, ReviewStatus: as.Status.Review,
		ConfigRef:       v1alpha1.DefaultPlanModeConfigName,
		ObservedCurrent: as.Status.ObservedGeneration == as.Generation,
	}
	v.SelectedBy, v.Changes, v.ReviewHistory = as.Spec.PlanMode.SelectedBy, pm.Changes, as.Status.ReviewHistory
	if t := as.Spec.PlanMode.SelectedAt; t != nil {
		at := t.UTC()
		v.SelectedAt = &at
	}
	if pm.PendingActive != nil {
		p := *pm.PendingActive
		v.Pending, v.PendingSource = &p, pm.PendingSource
	} else if x := as.Spec.PlanMode.Active; x != nil && *x != pm.Active && (pm.Selection == nil || *pm.Selection != *x) {
		p := *x
		v.Pending, v.PendingSource, v.PendingUnwritten = &p, v1alpha1.PendingSourceUser, true
	}
	if as.Spec.PlanMode.ConfigRef != nil {
		v.ConfigRef = as.Spec.PlanMode.ConfigRef.Name
	}
	if pm.LastTransitionTime != nil {
		t := pm.LastTransitionTime.UTC()
		v.LastTransition = &t
	}
	if q := as.Spec.SteerQueue; len(q) > 0 {
		v.LastMessage = &q[len(q)-1]
	}
	if as.Status.Agent != nil {
		v.Review = as.Status.Agent.Review
		v.LastDelivered = v.LastMessage != nil && as.Status.Agent.SteerID == v.LastMessage.ID
	}
	if as.Spec.ReviewTimeout != nil {
		v.ReviewTimeout = as.Spec.ReviewTimeout.Duration.String()
	}
	if c := apimeta.FindStatusCondition(as.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		v.Ready, v.ReadyReason, v.ReadyMessage = string(c.Status), c.Reason, c.Message
	}
	return v
}

func (o *Options) status(ctx context.Context, name, output, storeURL string) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	if err := o.complete(); err != nil {
		return err
	}
	as, err := o.get(ctx, name)
	if err != nil {
		return err
	}
	v := viewOf(as)
	explicit := storeURL != ""
	storeURL, err = o.storeURL(storeURL)
	if err != nil {
		return err
	}
	if storeURL != "" {
		live, err := readLive(ctx, storeURL, as.Spec.SessionID)
		switch {
		case err == nil:
			v.Live = live
		case explicit:
			return err
		default:
			// A store found in the environment or kubeconfig that does not answer: the status
			// still shows what the API has.
			fmt.Fprintf(o.Streams.ErrOut, "warning: the session log was not read (%v); showing the manager's last status write\n", err)
		}
	}
	if output != "" {
		return printStructured(o.Streams.Out, v, output)
	}
	return printStatus(o.Streams.Out, v, time.Now())
}

// pendingText is the Pending line of the status.
func pendingText(v StatusView) string {
	switch {
	case v.Pending == nil:
		return noneWord + " (nothing waits for the agent's next step boundary)"
	case *v.Pending == v.PlanMode:
		return inWords(*v.Pending) + ", which the log has already: nothing changes at the next step boundary (a cancelled selection it clears)"
	case v.PendingSource == v1alpha1.PendingSourceExit:
		return inWords(*v.Pending) + " at the agent's next step boundary (an approved plan's exit, not narrated)"
	case v.PendingUnwritten && v.TurnOpen:
		return inWords(*v.Pending) + " at the agent's next step boundary (selected during the turn; the manager writes it when the agent reaches it)"
	case v.PendingUnwritten:
		return inWords(*v.Pending) + ", selected and not yet taken on by the manager"
	}
	return inWords(*v.Pending) + " at the agent's next step boundary"
}

// printStatus prints the status for a person, one fact a line.
func printStatus(out io.Writer, v StatusView, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(k, f string, a ...any) { fmt.Fprintf(w, "%s:\t%s\n", k, fmt.Sprintf(f, a...)) }
	row("Session", "%s (namespace %s, session ID %s)", v.Session, v.Namespace, v.SessionID)
	row("Plan mode", "%s, committed in the session log", inWords(v.PlanMode))
	row("Pending", "%s", pendingText(v))
	if v.Selected == nil {
		row("Selected", "%s (no selection: the session follows its log)", noneWord)
	} else {
		row("Selected", "%s (spec.planMode.active%s)", inWords(*v.Selected), selectedByText(v))
	}
	switch {
	case v.Live != nil && v.Live.TurnOpen:
		row("Turn", "%d open, step %d (live from the log: selections wait for the agent's next step boundary)", v.Live.Turn, v.Live.Step)
	case v.Live != nil:
		row("Turn", "none open (live from the log: selections are logged at once)")
	case v.TurnOpen:
		row("Turn", "open at the manager's last status write (selections wait for the next step boundary)")
	default:
		row("Turn", "none open at the manager's last status write (the agent may have opened one since)")
	}
	switch {
	case v.Config != nil:
		sha := v.Config.SectionSHA256
		if len(sha) > 12 {
			sha = sha[:12]
		}
		row("Config", "%s (generation %d, section sha256 %s)", v.Config.Name, v.Config.Generation, orDash(sha))
	default:
		row("Config", "%s (requested; not read by the manager yet)", v.ConfigRef)
	}
	lastChangeRow(row, v, now)
	noticeRow(row, v)
	if b := v.LastBoundary; b != nil {
		msg := ""
		if b.Message != "" {
			msg = ": " + b.Message
		}
		row("Last boundary", "turn %d step %d seq %d: %s, plan mode %s%s", b.Turn, b.Step, b.Seq, b.Result, planmode.OnOff(b.Active), msg)
	}
	if v.Live != nil {
		row("Log position", "next seq %d (live; the status reflects %d)", v.Live.NextSeq, v.NextSeq)
		if v.Live.Active != v.PlanMode {
			row("Note", "the log has committed plan mode %s since the manager's last status write", inWords(v.Live.Active))
		}
	} else {
		row("Log position", "next seq %d", v.NextSeq)
	}
	row("Review", "%s", termtext.Line(reviewLine(v)))
	if a := agentLine(v); a != "" {
		row("Agent", "%s", a)
	}
	if v.LastMessage != nil {
		state := "not yet delivered"
		if v.LastDelivered {
			state = "delivered"
		}
		row("Last message", "%q (%s)", abbreviate(v.LastMessage.Text, 60), state)
	}
	if v.Ready != "" {
		row("Ready", "%s %s%s", v.Ready, v.ReadyReason, prefixed(": ", v.ReadyMessage))
	} else {
		row("Ready", "unknown (the manager has not reported yet)")
	}
	if !v.ObservedCurrent {
		row("Note", "the manager has not caught up with the latest spec change yet")
	}
	return w.Flush()
}

// lastChangeRow says when the committed state last changed: the time of the log's last
// plan/mode when the store was read, else the status's record of it.
func lastChangeRow(row func(k, f string, a ...any), v StatusView, now time.Time) {
	switch {
	case v.Live != nil && v.Live.LastPlanModeTime != nil:
		t := *v.Live.LastPlanModeTime
		row("Last change", "%s (%s ago, plan/mode at seq %d)", t.Format(time.RFC3339), now.Sub(t).Round(time.Second), v.Live.LastPlanModeSeq)
	case v.Live != nil:
		row("Last change", "never (no plan/mode in the log)")
	case v.LastTransition != nil:
		row("Last change", "%s (%s ago)", v.LastTransition.Format(time.RFC3339), now.Sub(*v.LastTransition).Round(time.Second))
	default:
		row("Last change", "not recorded in the status (the log has it: name the store with --store)")
	}
}

// noticeRow shows an owed notice; with the live log, a notice the agent has recorded (a
// step/start after its plan/mode, which it writes with no API write) is shown as recorded.
func noticeRow(row func(k, f string, a ...any), v StatusView) {
	switch {
	case v.Notice == nil:
	case v.Live != nil && v.Live.LastStepStartSeq > v.Notice.Seq:
		row("Notice", "%q recorded by the agent (step at seq %d)", v.Notice.Text, v.Live.LastStepStartSeq)
	case v.Live != nil:
		row("Notice owed", "%q (for plan/mode at seq %d; the agent records it at its next step)", v.Notice.Text, v.Notice.Seq)
	default:
		row("Notice owed", "%q (for plan/mode at seq %d, as of the manager's last status write)", v.Notice.Text, v.Notice.Seq)
	}
}

// reviewLine is the plan under review and its phase, in the REVIEW column's words.
func reviewLine(v StatusView) string {
	if v.Review == nil {
		if v.ReviewStatus != nil {
			return fmt.Sprintf("%s (review %s; the agent has withdrawn its plan)", v.ReviewStatus.Phase, v.ReviewStatus.ID)
		}
		return noneWord + " (no plan presented)"
	}
	title := planTitle(v.Review.Plan)
	s := fmt.Sprintf("%q (review %s, turn %d)", title, v.Review.ID, v.Review.Turn)
	rs := v.ReviewStatus
	decided := v.ReviewDecision != nil && v.ReviewDecision.ReviewID == v.Review.ID
	if rs != nil && rs.ID == v.Review.ID && rs.Revision > 0 {
		s = fmt.Sprintf("%q (revision %d, review %s, turn %d)", title, rs.Revision, v.Review.ID, v.Review.Turn)
	}
	switch {
	case rs != nil && rs.ID == v.Review.ID && rs.Phase != v1alpha1.ReviewPending:
		s += ": " + string(rs.Phase) + reviewProgress(v, rs)
		if rs.Message != "" {
			s += " (" + abbreviate(rs.Message, 80) + ")"
		}
		return s
	case decided:
		return s + ": " + string(v1alpha1.ReviewPending) + "; decision " + string(v.ReviewDecision.Decision) + " written, waiting for the manager"
	case rs != nil && rs.ID == v.Review.ID:
		return s + ": " + string(v1alpha1.ReviewPending) + reviewProgress(v, rs) + ", awaiting kubectl plan approve|revise|dismiss " + v.Session
	}
	return s + ": posted, not opened by the manager yet"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

func abbreviate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
