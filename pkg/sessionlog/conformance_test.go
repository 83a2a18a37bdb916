package sessionlog_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog/sessionlogtest"
)

// backend opens stores on url, which every store of one run shares.
func backend(url string) sessionlogtest.Backend {
	return sessionlogtest.Backend{
		Open: func(t *testing.T) sessionlog.Store {
			s, err := sessionlog.Open(context.Background(), url)
			if err != nil {
				t.Fatalf("open %s: %v", url, err)
			}
			return s
		},
		Corrupt: sessionlog.CorruptForTest,
		Delete:  sessionlog.DeleteForTest,
	}
}

func TestSQLiteConformance(t *testing.T) {
	sessionlogtest.Run(t, backend("sqlite://"+filepath.Join(t.TempDir(), "log.db")))
}

func TestPostgresConformance(t *testing.T) {
	sessionlogtest.Run(t, backend(sessionlog.PostgresDB(t)))
}
