package pgtest

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestStartQueryStop(t *testing.T) {
	s := MustStart(t)
	ctx := context.Background()
	if !strings.HasPrefix(s.Version, "PostgreSQL ") {
		t.Fatalf("version = %q", s.Version)
	}
	url, err := s.CreateDatabase(ctx, "scratch")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var db string
	var fsync string
	if err := conn.QueryRow(ctx, "SELECT current_database(), current_setting('fsync')").Scan(&db, &fsync); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	if db != "scratch" || fsync != "on" {
		t.Fatalf("database %q fsync %q; want scratch, on", db, fsync)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("data directory %s still exists after Stop: %v", s.Dir, err)
	}
	if _, err := pgx.Connect(ctx, s.URL); err == nil {
		t.Fatal("server still accepts connections after Stop")
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestMissingBinariesFailLoudly(t *testing.T) {
	t.Setenv(BinDirEnv, t.TempDir())
	if _, err := Start(context.Background()); err == nil || !strings.Contains(err.Error(), "does not contain initdb and postgres") {
		t.Fatalf("Start with an empty %s: err = %v", BinDirEnv, err)
	}
	t.Setenv(BinDirEnv, "")
	t.Setenv("PATH", t.TempDir())
	saved := debianBinGlob
	debianBinGlob = "/nonexistent/postgresql/*/bin"
	defer func() { debianBinGlob = saved }()
	_, err := Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "make postgres") || !strings.Contains(err.Error(), "/usr/lib/postgresql/*/bin") {
		t.Fatalf("Start without binaries: err = %v, want a failure pointing at make postgres", err)
	}
}

// StartWith's extra listen address and password network: a client from that network gets in
// with the password and is refused without it, while 127.0.0.1 keeps trust.
func TestStartWithPasswordNetwork(t *testing.T) {
	ctx := context.Background()
	s, err := StartWith(ctx, Options{ListenAddresses: []string{"127.0.0.2"}, PasswordCIDRs: []string{"127.0.0.2/32"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	if s.Password == "" {
		t.Fatal("no password set")
	}
	// from 127.0.0.2, not 127.0.0.1 (trusted): a client in the password network
	from := func(u string) (*pgx.Conn, error) {
		cfg, err := pgx.ParseConfig(u)
		if err != nil {
			return nil, err
		}
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
		cfg.DialFunc = d.DialContext
		return pgx.ConnectConfig(ctx, cfg)
	}
	with := s.URLFor("127.0.0.2", "postgres")
	conn, err := from(with)
	if err != nil {
		t.Fatalf("connect through 127.0.0.2 with the password: %v", err)
	}
	_ = conn.Close(ctx)
	without := strings.Replace(with, ":"+s.Password+"@", "@", 1)
	if _, err := from(without); err == nil || !strings.Contains(err.Error(), "password") {
		t.Fatalf("connect through 127.0.0.2 without the password: %v; want a password failure", err)
	}
	conn, err = pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatalf("connect through 127.0.0.1 (trust): %v", err)
	}
	_ = conn.Close(ctx)
	if _, err := StartWith(ctx, Options{PasswordCIDRs: []string{"10.0.0.0"}}); err == nil || !strings.Contains(err.Error(), "PasswordCIDRs") {
		t.Fatalf("a bad CIDR: %v; want an error naming PasswordCIDRs", err)
	}
}
