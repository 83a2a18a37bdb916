package plancli

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// run executes `kubectl plan ARGS...` up to the point where it would need a cluster.
func run(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	root := NewRootCommand(streams)
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	return out.String(), err
}

// Invocations refused before any API call, each with a message that names what is wrong and
// the usage.
func TestBadInvocations(t *testing.T) {
	t.Setenv(StoreEnv, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"on"}, `"on" needs exactly one argument, the session name (usage: kubectl plan on SESSION)`},
		{[]string{"off", "a", "b"}, `"off" needs exactly one argument, the session name (usage: kubectl plan off SESSION)`},
		{[]string{"status"}, `"status" needs exactly one argument, the session name (usage: kubectl plan status SESSION)`},
		{[]string{"log"}, `"log" needs exactly one argument, the session name (usage: kubectl plan log SESSION)`},
		{[]string{"review", "a", "b"}, `"review" needs exactly one argument, the session name (usage: kubectl plan review SESSION)`},
		{[]string{"approve"}, `"approve" needs exactly one argument, the session name (usage: kubectl plan approve SESSION)`},
		{[]string{"revise"}, `"revise" needs the session name, then the feedback if any (usage: kubectl plan revise SESSION [FEEDBACK...] [--file FILE])`},
		{[]string{"approve", "demo", "looks", "good"},
			`"approve" needs exactly one argument, the session name (usage: kubectl plan approve SESSION; feedback goes with kubectl plan revise SESSION FEEDBACK...)`},
		{[]string{"revise", "demo", "words", "--feedback", "flag"}, "feedback given twice: with --feedback and as words after the session; give it one way"},
		{[]string{"approve", "demo", "--feedback", "x"}, "unknown flag: --feedback: --feedback is a flag of kubectl plan revise, not of kubectl plan approve (usage: kubectl plan approve SESSION"},
		{[]string{"list", "--bogus"}, "unknown flag: --bogus (usage: kubectl plan list [-A] [-w] [-o json|yaml]"},
		{[]string{"log", "demo", "--jsonl", "-f"}, "--jsonl writes the whole session: leave out -f and --tail"},
		{[]string{"message", "demo", "text", "--file", "notes.md"}, "the message given twice: as words after the session and with --file notes.md; give it one way"},
		{[]string{"dismiss"}, `"dismiss" needs exactly one argument, the session name (usage: kubectl plan dismiss SESSION)`},
		{[]string{"message", "demo"}, `"message" needs a session and the text, a --file or an --image (usage: kubectl plan message SESSION TEXT... [--file FILE] [--image FILE]...)`},
		{[]string{"off", "demo", "--image", "x.png"}, "Image attachments cannot accompany kubectl plan off."},
		{[]string{"demo", "off", "--image", "x.png"}, "Image attachments cannot accompany kubectl plan off."},
		{[]string{"message", "demo", "  ", ""}, `"message" needs a non-blank text or an --image; to only enter plan mode use: kubectl plan on demo`},
		{[]string{"--", "-demo"}, `unexpected flag "-demo" before the session name`},
		{[]string{"status", "demo", "-o", "wide"}, `unknown output format "wide" for -o: use -o json or -o yaml, or no -o for text`},
		{[]string{"log", "demo"}, "no session-log store: pass --store URL, set " + StoreEnv},
	} {
		_, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("kubectl plan %q: err = %v; want it to contain %q", tc.args, err, tc.want)
		}
	}
}

// With no argument the plugin prints its help and succeeds.
func TestNoArgumentsPrintsHelp(t *testing.T) {
	out, err := run(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubectl plan on SESSION", "kubectl plan SESSION [off|TEXT...]", "Plan mode entry cancelled."} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}

// A subcommand's name is never read as a session name: cobra routes it to the subcommand
// before the short form (kubectl plan SESSION ...) sees it.
func TestSubcommandsWinOverTheShortForm(t *testing.T) {
	root := NewRootCommand(genericiooptions.NewTestIOStreamsDiscard())
	for _, c := range root.Commands() {
		got, _, err := root.Find([]string{c.Name(), "demo"})
		if err != nil || got != c {
			t.Errorf("%q demo: routed to %v (%v), want the %q subcommand", c.Name(), got.Name(), err, c.Name())
		}
	}
}

// A short form whose session is not found hints at the subcommand it may have been mistyped
// for; a name nothing like a subcommand gets no hint.
func TestHintSubcommand(t *testing.T) {
	root := NewRootCommand(genericiooptions.NewTestIOStreamsDiscard())
	if err := hintSubcommand(root, "stauts"); err == nil || err.Error() != `(if you meant the subcommand, did you mean "status"?)` {
		t.Errorf("hint for stauts: %v", err)
	}
	if err := hintSubcommand(root, "aprove"); err == nil || !strings.Contains(err.Error(), `"approve"`) {
		t.Errorf("hint for aprove: %v", err)
	}
	if err := hintSubcommand(root, "payments-migration"); err != nil {
		t.Errorf("hint for payments-migration: %v, want none", err)
	}
}

func TestVersion(t *testing.T) {
	out, err := run(t, "--version")
	if err != nil || !strings.HasPrefix(out, "kubectl-plan ") {
		t.Fatalf("kubectl plan --version = %q, %v", out, err)
	}
}

// Help speaks kubectl: no command's help tells a kubectl user to type the harness's /plan off,
// and none uses the harness's internal names for its decisions.
func TestHelpSpeaksKubectl(t *testing.T) {
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	root := NewRootCommand(streams)
	cmds := append([]*cobra.Command{root}, root.Commands()...)
	for _, c := range cmds {
		text := c.Short + "\n" + c.Long + "\n" + c.Example
		for _, bad := range []string{"Use /plan off", "set() decision", "fold", "§"} {
			if strings.Contains(text, bad) {
				t.Errorf("kubectl plan %s help says %q", c.Name(), bad)
			}
		}
	}
	if !strings.Contains(root.Long, "Use kubectl plan off SESSION to leave.") {
		t.Error("the root help does not show the reply in kubectl's words")
	}
}
