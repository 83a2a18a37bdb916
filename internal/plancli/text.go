package plancli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// The CRD's limits on text a person sends, checked before anything is written, so a long text
// gets an error naming the command and the limit instead of the API server's refusal of a
// field path (a test ties these to config/crd).
const (
	// maxMessageChars is spec.steerQueue[].text's maxLength, in characters.
	maxMessageChars = 65536
	// maxFeedbackChars is spec.review.feedback's maxLength, in characters.
	maxFeedbackChars = 65536
)

// checkText refuses text longer than limit characters (the OpenAPI maxLength counts characters,
// not bytes), naming what it is and the field that holds it.
func checkText(what, text string, limit int, field string) error {
	if n := utf8.RuneCountInString(text); n > limit {
		return fmt.Errorf("%s is %d characters, and %s holds at most %d: shorten it, or send it as several messages; nothing was sent", what, n, field, limit)
	}
	return nil
}

// addFileFlag adds --file for text too long for the command line.
func addFileFlag(cmd *cobra.Command, path *string, what string) {
	cmd.Flags().StringVar(path, "file", "", "Read "+what+" from this file (- for standard input) instead of the command line")
}

// textArg is the text of a command: its words, or the file given with --file ("-": in). Both
// at once is an error naming the flag. A file is read only up to what the limits allow (the
// caller checks its own).
func textArg(words []string, file string, in io.Reader, what string) (string, error) {
	if file == "" {
		return strings.Join(words, " "), nil
	}
	if len(words) > 0 {
		return "", fmt.Errorf("%s given twice: as words after the session and with --file %s; give it one way", what, file)
	}
	r := in
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return "", fmt.Errorf("--file: %w", err)
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	// A character is at most 4 bytes: one byte more than that is enough to know it is too long.
	b, err := io.ReadAll(io.LimitReader(r, max(maxMessageChars, maxFeedbackChars)*utf8.UTFMax+1))
	if err != nil {
		return "", fmt.Errorf("--file %s: %w", file, err)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("--file %s is not UTF-8 text", file)
	}
	return string(b), nil
}
