package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func TestLoggerEncodesFieldsOnlyForWrittenLines(t *testing.T) {
	var out bytes.Buffer
	log := newLogger(zap.WriteTo(&out))
	encoded := 0 // how often the session field was encoded
	session := zapcore.ObjectMarshalerFunc(func(enc zapcore.ObjectEncoder) error {
		encoded++
		enc.AddString("name", "s-1")
		return nil
	})
	reconcile := log.WithValues("controller", "agentsession").WithValues("session", session).WithValues("reconcileID", "r-1")
	reconcile.V(1).Info("status written")
	if encoded != 0 || out.Len() != 0 {
		t.Fatalf("a line below the level encoded the fields %d times and wrote %q", encoded, out.String())
	}
	reconcile.Info("refused an invalid step-boundary report", "reason", "seq ahead of the log")
	if encoded != 1 {
		t.Fatalf("the written line encoded the fields %d times, want 1", encoded)
	}
	line := out.String()
	for _, want := range []string{`"controller":"agentsession"`, `"session":{"name":"s-1"}`, `"reconcileID":"r-1"`, `"reason":"seq ahead of the log"`} {
		if !strings.Contains(line, want) {
			t.Errorf("line %s lacks %s", line, want)
		}
	}
	if i, j := strings.Index(line, `"controller"`), strings.Index(line, `"reconcileID"`); i > j {
		t.Errorf("fields out of order: %s", line)
	}
	reconcile.Info("second line")
	if encoded != 1 || strings.Count(out.String(), `"session":{"name":"s-1"}`) != 2 {
		t.Fatalf("after a second line the fields were encoded %d times in all, want 1, and both lines carry them: %s", encoded, out.String())
	}
}

// BenchmarkReconcileLogger is the logger controller-runtime makes for each reconcile (the
// session's name, then a reconcile ID) and the debug line a reconcile writes, off at the
// default level: with the fields deferred (the manager's) and encoded at once (zap's default).
func BenchmarkReconcileLogger(b *testing.B) {
	for _, c := range []struct {
		name string
		log  logr.Logger
	}{
		{"deferred", newLogger(zap.WriteTo(&bytes.Buffer{}))},
		{"eager", zap.New(zap.WriteTo(&bytes.Buffer{}))},
	} {
		b.Run(c.name, func(b *testing.B) {
			base := c.log.WithValues("controller", "agentsession", "controllerGroup", "agents.harness.dev", "controllerKind", "AgentSession")
			b.ReportAllocs()
			for b.Loop() {
				log := base.WithValues("AgentSession", klog.KRef("team-a", "s-1"), "namespace", "team-a", "name", "s-1")
				log = log.WithValues("reconcileID", uuid.NewUUID())
				log.V(1).Info("status written", "active", true, "pending", false, "nextSeq", 42)
			}
		})
	}
}
