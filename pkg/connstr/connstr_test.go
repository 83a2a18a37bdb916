package connstr_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/connstr"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://planmode:s3cret@db:5432/log?sslmode=require":              "postgres://planmode:xxxxx@db:5432/log?sslmode=require",
		"postgres://planmode@db/log?password=s3cret&sslmode=disable":          "postgres://planmode@db/log?password=xxxxx&sslmode=disable",
		"postgresql://planmode@db/log?sslmode=verify-full&sslpassword=s3cret": "postgresql://planmode@db/log?sslmode=verify-full&sslpassword=xxxxx",
		"postgres://planmode@db/log?PASSWORD=s3cret":                          "postgres://planmode@db/log?PASSWORD=xxxxx",
		"host=db user=planmode password=s3cret dbname=log":                    "host=db user=planmode password=xxxxx dbname=log",
		"host=db password = 's3 cret\\' x' dbname=log":                        "host=db password = xxxxx dbname=log",
		"sqlite:///var/lib/planmode/log.db":                                   "sqlite:///var/lib/planmode/log.db",
		"postgres://u:s3cret@[::1:bad":                                        "postgres://u:xxxxx@[::1:bad",
	} {
		got := connstr.Redact(in)
		if got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "s3") {
			t.Errorf("Redact(%q) kept the password: %q", in, got)
		}
	}
}

func TestRedactForRemovesTheLiteralSecretAnywhere(t *testing.T) {
	for _, conn := range []string{
		"postgres://u:s3cret@db/log",
		"postgres://u@db/log?password=s3cret",
		"postgres://u@db/log?password=s3%63ret", // escaped in the URL, literal in a driver's message
		"host=db user=u password=s3cret",
		"host=db user=u password='s3cret'",
	} {
		msg := `connect as u with s3cret failed: dial postgres://u:s3cret@db; host=db password=s3cret`
		if got := connstr.RedactFor(msg, conn); strings.Contains(got, "s3cret") {
			t.Errorf("RedactFor(_, %q) kept the password: %s", conn, got)
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
