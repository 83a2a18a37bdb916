package connstr_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/connstr"
	"github.com/harness-dev/planmode-operator/pkg/connstr/connstrtest"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://planmode:s3cret@db:5432/log?sslmode=require":              "postgres://planmode:xxxxx@db:5432/log?sslmode=require",
		"postgres://planmode@db/log?password=s3cret&sslmode=disable":          "postgres://planmode@db/log?password=xxxxx&sslmode=disable",
		"postgresql://planmode@db/log?sslmode=verify-full&sslpassword=s3cret": "postgresql://planmode@db/log?sslmode=verify-full&sslpassword=xxxxx",
		"postgres://planmode@db/log?PASSWORD=s3cret":                          "postgres://planmode@db/log?PASSWORD=xxxxx",
		"postgres://planmode@db/log?pass%77ord=s3cret":                        "postgres://planmode@db/log?pass%77ord=xxxxx",
		"host=db user=planmode password=s3cret dbname=log":                    "host=db user=planmode password=xxxxx dbname=log",
		`host=db password = 's3 cret\' x' dbname=log`:                         "host=db password = xxxxx dbname=log",
		`host=db password=s3\ cret dbname=log`:                                "host=db password=xxxxx dbname=log",
		"host=db password='s3 cret":                                           "host=db password=xxxxx",
		"sqlite:///var/lib/planmode/log.db":                                   "sqlite:///var/lib/planmode/log.db",
		"postgres://u:s3cret@[::1:bad":                                        "postgres://u:xxxxx@[::1:bad",
		// Characters a URL does not allow unescaped: the password still runs to the last '@'.
		"postgres://u:s3/cret@db/log":               "postgres://u:xxxxx@db/log",
		"postgres://u:s3 cret@db/log":               "postgres://u:xxxxx@db/log",
		"postgres://u:s3@cr@et@db/log":              "postgres://u:xxxxx@db/log",
		"postgres://u:s3?c#ret@db/log":              "postgres://u:xxxxx@db/log",
		"postgres://u:s3%2Fcret@db/log":             "postgres://u:xxxxx@db/log",
		"postgres://u:s3cret@h1:5432,h2/log":        "postgres://u:xxxxx@h1:5432,h2/log",
		"host=h1,h2 port=5432,5433 password=s3cret": "host=h1,h2 port=5432,5433 password=xxxxx",
		// A secret that itself looks like a URL is a key=value value.
		"host=db password=s3://cr@et": "host=db password=xxxxx",
	} {
		got := connstr.Redact(in)
		if got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "s3") || strings.Contains(got, "cr") {
			t.Errorf("Redact(%q) kept part of the password: %q", in, got)
		}
	}
}

// A password that occurs in other words is masked where it stands, and the words stay: the
// mask hides the secret's positions, not its text.
func TestRedactMasksPositionsNotOccurrences(t *testing.T) {
	for _, c := range []struct{ conn, msg, want string }{
		{"postgres://postgres:postgres@db:5432/postgres",
			"open postgres session log postgres://postgres:postgres@db:5432/postgres: dial tcp 10.0.0.1:5432: connect: connection refused",
			"open postgres session log postgres://postgres:xxxxx@db:5432/postgres: dial tcp 10.0.0.1:5432: connect: connection refused"},
		{"postgres://u:p@db/log", "dial tcp db:5432 for postgres://u:p@db/log: timeout",
			"dial tcp db:5432 for postgres://u:xxxxx@db/log: timeout"},
		{"host=db user=planmode password=planmode", "failed to connect to `user=planmode database=planmode`: host=db user=planmode password=planmode",
			"failed to connect to `user=planmode database=planmode`: host=db user=planmode password=xxxxx"},
		{"postgres://a:e@db/log", "user=a: password authentication failed (see postgres://a:e@db/log)",
			"user=a: password authentication failed (see postgres://a:xxxxx@db/log)"},
	} {
		got := connstr.Error(errors.New(c.msg), c.conn).Error()
		if got != c.want {
			t.Errorf("Error(%q, %q) = %q, want %q", c.msg, c.conn, got, c.want)
		}
	}
}

func TestSecretsAreWhatAClientReads(t *testing.T) {
	for in, want := range map[string][]string{
		"postgres://u:s3%2Fc%20ret@db/log":          {"s3/c ret"},
		"postgres://u:a+b@db/log?sslpassword=k%40y": {"a+b", "k@y"},
		`host=db password='it\'s' sslpassword=a\ b`: {"it's", "a b"},
		"postgres://u@db/log":                       nil,
		"host=db user=u":                            nil,
		"postgres://u:p@ss@db/log":                  {"p@ss"},
		"postgres://u@db/log?password=%20x%20&a=b":  {" x "},
		"host=db password=trailing\\":               {"trailing"},
	} {
		got := connstr.Secrets(in)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Secrets(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestErrorKeepsTheChain(t *testing.T) {
	sentinel := errors.New("sentinel")
	err := connstr.Error(fmt.Errorf("open host=db password=s3cret: %w", sentinel), "host=db password=s3cret")
	if strings.Contains(err.Error(), "s3cret") || !errors.Is(err, sentinel) {
		t.Fatalf("Error: %q, errors.Is sentinel = %v", err, errors.Is(err, sentinel))
	}
	if connstr.Error(nil, "x") != nil {
		t.Fatal("Error(nil) is not nil")
	}
}

// FuzzRedact: whatever the password, Redact of each form keeps no part of it, and Error of a
// message quoting the connection string keeps none either. (A message that quotes it escaped,
// as a parser's %q does, is not redactable in general: pkg/sessionlog never prints a parser's
// error about a connection string, and its fuzz target checks the whole open path.)
func FuzzRedact(f *testing.F) {
	for _, s := range connstrtest.Cores {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, core string) {
		if strings.ContainsAny(core, "\x00\n\r") {
			return
		}
		pw := connstrtest.Password(core)
		for _, form := range connstrtest.Forms {
			conn := form.Build(pw)
			for _, out := range []string{
				connstr.Redact(conn),
				connstr.Error(fmt.Errorf("open %s: dial tcp 127.0.0.1:1: refused", conn), conn).Error(),
			} {
				if connstrtest.Leaks(out) {
					t.Fatalf("form %s: %q leaks part of the password in %q", form.Name, conn, out)
				}
			}
		}
	})
}
