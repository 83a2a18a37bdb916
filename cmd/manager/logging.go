package main

import (
	"github.com/go-logr/logr"
	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// newLogger is the manager's logger: controller-runtime's zap logger, except that the fields a
// logger is given (WithValues) are encoded only when a line is written with them.
// controller-runtime gives every reconcile a logger with the session's name and a reconcile
// ID, and most reconciles write no line at the default level, so encoding those fields for
// each was work thrown away (BenchmarkReconcileLogger compares both).
func newLogger(opts ...zap.Opts) logr.Logger {
	return zap.New(append(opts, zap.RawZapOpts(uberzap.WrapCore(deferFields)))...)
}

// deferFields makes every With of core lazy: zap's lazy core encodes its fields once a line
// passes the level check, after those of the core it wraps.
func deferFields(core zapcore.Core) zapcore.Core { return deferredFieldsCore{core} }

type deferredFieldsCore struct{ zapcore.Core }

func (c deferredFieldsCore) With(fields []zapcore.Field) zapcore.Core {
	return deferredFieldsCore{zapcore.NewLazyWith(c.Core, fields)}
}
