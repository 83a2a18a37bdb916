package storeenv

import (
	"bytes"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		url      string
		from     string
		warnWant string
	}{
		{"none", nil, "", Name, ""},
		{"new name", map[string]string{Name: "sqlite:///a.db"}, "sqlite:///a.db", Name, ""},
		{"old name only", map[string]string{"KUBECTL_PLAN_STORE": "sqlite:///b.db"}, "sqlite:///b.db", "KUBECTL_PLAN_STORE",
			"KUBECTL_PLAN_STORE is deprecated; set PLANMODE_LOG_STORE instead"},
		{"each old name", map[string]string{"SESSION_LOG_URL": "sqlite:///c.db"}, "sqlite:///c.db", "SESSION_LOG_URL", "SESSION_LOG_URL is deprecated"},
		{"new wins over a different old", map[string]string{Name: "sqlite:///a.db", "PLANLOG_STORE": "sqlite:///z.db"}, "sqlite:///a.db", Name,
			"PLANLOG_STORE is deprecated and differs from PLANMODE_LOG_STORE"},
		{"same value under both is quiet", map[string]string{Name: "sqlite:///a.db", "PLANLOG_STORE": "sqlite:///a.db"}, "sqlite:///a.db", Name, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w bytes.Buffer
			url, from := lookup(env(tc.env), &w)
			if url != tc.url || from != tc.from {
				t.Fatalf("lookup = %q from %s, want %q from %s", url, from, tc.url, tc.from)
			}
			if tc.warnWant == "" && w.Len() > 0 || !strings.Contains(w.String(), tc.warnWant) {
				t.Fatalf("warning %q, want one containing %q", w.String(), tc.warnWant)
			}
		})
	}
}
