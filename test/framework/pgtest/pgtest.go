// Package pgtest starts a throwaway PostgreSQL server for tests from the server binaries of
// Debian's postgresql packages: initdb into a temporary directory, trust authentication, a
// free port on 127.0.0.1, the unix socket inside the temporary directory. Stop kills the
// server and removes the directory. It works from plain `testing` tests (MustStart(t)) and
// from ginkgo suites (MustStart(GinkgoT()) or Start in a BeforeSuite).
//
// A missing server is a failure, never a skip: run `make postgres` to install the binaries.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harness-dev/planmode-operator/internal/freeport"
)

// BinDirEnv is the environment variable that, when set, names the directory holding initdb
// and postgres.
const BinDirEnv = "PGTEST_BIN_DIR"

// debianBinGlob is where Debian's postgresql-<major> packages put the server binaries.
var debianBinGlob = "/usr/lib/postgresql/*/bin"

// superuser is the role initdb creates (-U); serverBinary the server's executable.
const (
	superuser    = "postgres"
	serverBinary = "postgres"
)

// StartTimeout bounds initdb plus server start-up.
const StartTimeout = 2 * time.Minute

// TB is the part of testing.TB (and of ginkgo's GinkgoT()) that MustStart uses.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Server is a running throwaway PostgreSQL server.
type Server struct {
	// URL connects as the superuser "postgres" to the database "postgres" over TCP.
	URL string
	// Version is the server's SELECT version(), e.g. "PostgreSQL 15.14 (Debian 15.14-0+deb12u1) on ...".
	Version string
	// Port is the TCP port on 127.0.0.1; Dir the temporary directory (data, socket, log).
	Port   int
	Dir    string
	BinDir string

	// Password is the superuser's password when Options.PasswordCIDRs is set (clients from
	// those networks must give it), else empty.
	Password string

	listen   []string
	cmd      *exec.Cmd
	exited   chan struct{}
	waitErr  error
	stopOnce sync.Once
	stopErr  error
}

// FindBinaries returns the directory holding initdb and postgres: $PGTEST_BIN_DIR, else the
// newest /usr/lib/postgresql/<major>/bin, else the directory of initdb on PATH.
func FindBinaries() (string, error) {
	ok := func(d string) bool {
		for _, b := range []string{"initdb", serverBinary} {
			if st, err := os.Stat(filepath.Join(d, b)); err != nil || st.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if d := os.Getenv(BinDirEnv); d != "" {
		if ok(d) {
			return d, nil
		}
		return "", fmt.Errorf("%s=%s does not contain initdb and postgres", BinDirEnv, d)
	}
	dirs, _ := filepath.Glob(debianBinGlob)
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if ok(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && ok(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL server binaries (initdb, postgres) not found under /usr/lib/postgresql/*/bin or on PATH: " +
		"run `make postgres` (hack/ensure-postgres.sh installs Debian's postgresql package) or set " + BinDirEnv)
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// MustStart starts a server, logs its version and stops it when the test (or suite) ends.
// Any failure fails the test; it never skips.
func MustStart(t TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	s, err := Start(ctx)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
		return nil
	}
	t.Logf("pgtest: started %s on 127.0.0.1:%d (binaries %s, data %s)", s.Version, s.Port, s.BinDir, s.Dir)
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Logf("pgtest: stop: %v", err)
		}
	})
	return s
}

// Options widen where a server started by StartWith can be reached. The zero value is Start's
// server: 127.0.0.1 only, trust authentication.
type Options struct {
	// ListenAddresses are addresses to listen on besides 127.0.0.1, e.g. the address of a test
	// cluster's own bridge so its pods can connect. Never the machine's own address.
	ListenAddresses []string
	// PasswordCIDRs are networks (e.g. a test cluster's pod CIDR) allowed to connect with the
	// superuser's password (scram-sha-256); the server gets a random password (Server.Password).
	PasswordCIDRs []string
}

// Start runs initdb into a new temporary directory and starts a server on a free port.
func Start(ctx context.Context) (*Server, error) {
	return StartWith(ctx, Options{})
}

// StartWith is Start with more listen addresses and password access from more networks.
func StartWith(ctx context.Context, opts Options) (*Server, error) {
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	// initdb and postgres refuse to run as root: run them as the postgres user (created by
	// Debian's package) or nobody, owning the temporary directory.
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	parent := os.TempDir()
	if st, err := os.Stat(parent); cred != nil && (err != nil || st.Mode().Perm()&0o001 == 0) {
		parent = "/tmp" // that user could not reach a private TMPDIR
	}
	dir, err := os.MkdirTemp(parent, "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("create temporary directory: %w", err)
	}
	s := &Server{Dir: dir, BinDir: bin, listen: append([]string{"127.0.0.1"}, opts.ListenAddresses...)}
	fail := func(err error) (*Server, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(fmt.Errorf("chown %s: %w", dir, err))
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", superuser, "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb in %s: %w\n%s", data, err, out))
	}
	if len(opts.PasswordCIDRs) > 0 {
		if err := allowPassword(data, opts.PasswordCIDRs); err != nil {
			return fail(err)
		}
	}
	// A free port can be taken between probing it and the server binding it: retry.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return fail(err)
		}
		lastErr = s.run(ctx, cred, data, port)
		if lastErr == nil && len(opts.PasswordCIDRs) > 0 {
			if err := s.setPassword(ctx); err != nil {
				s.kill()
				return fail(err)
			}
		}
		if lastErr == nil {
			return s, nil
		}
		if !strings.Contains(lastErr.Error(), "could not bind") && !strings.Contains(lastErr.Error(), "already in use") {
			break
		}
	}
	return fail(lastErr)
}

func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
	}
	return nil, errors.New("running as root and neither a postgres nor a nobody user exists to run the server as")
}

func freePort() (int, error) {
	port, err := freeport.Pick()
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	return port, nil
}

// run starts postgres on port and waits until it accepts connections.
func (s *Server) run(ctx context.Context, cred *syscall.Credential, data string, port int) error {
	logPath := filepath.Join(s.Dir, "postgres.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create server log: %w", err)
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(filepath.Join(s.BinDir, serverBinary), "-D", data, "-p", strconv.Itoa(port), "-k", s.Dir,
		"-c", "listen_addresses="+strings.Join(s.listen, ","), "-c", "max_connections=200", "-c", "shared_buffers=32MB",
		"-c", "logging_collector=off", "-c", "log_min_messages=warning")
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group; the server dies with the test process if that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.cmd, s.Port, s.exited = cmd, port, make(chan struct{})
	go func() { s.waitErr = cmd.Wait(); close(s.exited) }()
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)

	// Poll until the server accepts a connection, it exits, or the context ends.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, s.URL)
		if err == nil {
			err = conn.QueryRow(cctx, "SELECT version()").Scan(&s.Version)
			_ = conn.Close(cctx)
			cancel()
			if err != nil {
				s.kill()
				return fmt.Errorf("query server version: %w", err)
			}
			return nil
		}
		cancel()
		select {
		case <-s.exited:
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres exited during start-up (%v):\n%s", s.waitErr, bytes.TrimSpace(out))
		case <-ctx.Done():
			s.kill()
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres did not accept connections on port %d: %w\n%s", port, ctx.Err(), bytes.TrimSpace(out))
		case <-tick.C:
		}
	}
}

func (s *Server) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
}

// Pause stops the server and all its backends with SIGSTOP: it keeps its connections and the
// kernel still accepts new ones, but nothing answers: a hung store, not a refused one.
func (s *Server) Pause() error {
	if s.cmd == nil || s.cmd.Process == nil {
		return fmt.Errorf("pgtest: server not started")
	}
	return PauseServer(s.cmd.Process.Pid)
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error {
	if s.cmd == nil || s.cmd.Process == nil {
		return fmt.Errorf("pgtest: server not started")
	}
	return ResumeServer(s.cmd.Process.Pid)
}

// PauseServer SIGSTOPs the postmaster postmasterPID and every backend it forked. Backends call
// setsid, so the postmaster's process group does not reach them: each is signalled.
func PauseServer(postmasterPID int) error {
	if err := syscall.Kill(postmasterPID, syscall.SIGSTOP); err != nil { // first: no backend is forked after the scan
		return fmt.Errorf("pgtest: stop the postmaster %d: %w", postmasterPID, err)
	}
	return signalChildren(postmasterPID, syscall.SIGSTOP)
}

// ResumeServer continues what PauseServer stopped.
func ResumeServer(postmasterPID int) error {
	if err := signalChildren(postmasterPID, syscall.SIGCONT); err != nil {
		return err
	}
	if err := syscall.Kill(postmasterPID, syscall.SIGCONT); err != nil {
		return fmt.Errorf("pgtest: continue the postmaster %d: %w", postmasterPID, err)
	}
	return nil
}

// signalChildren signals every process whose parent is parent (from /proc).
func signalChildren(parent int, sig syscall.Signal) error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("pgtest: list processes: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...: comm may hold blanks, so read after its closing parenthesis.
		rest := stat[bytes.LastIndexByte(stat, ')')+1:]
		var state string
		var ppid int
		if _, err := fmt.Sscan(string(rest), &state, &ppid); err != nil || ppid != parent {
			continue
		}
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("pgtest: signal %v to backend %d: %w", sig, pid, err)
		}
	}
	return nil
}

// Stop shuts the server down (fast shutdown, SIGKILL after 15 s) and removes its directory.
// It is safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		if s.cmd != nil && s.cmd.Process != nil {
			_ = s.Resume() // a paused server would not see the SIGINT
			_ = s.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-s.exited:
			case <-time.After(15 * time.Second):
				s.kill()
			}
		}
		s.stopErr = os.RemoveAll(s.Dir)
	})
	return s.stopErr
}

// allowPassword lets clients from cidrs connect with a password (after initdb's local trust lines).
func allowPassword(data string, cidrs []string) error {
	f, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open pg_hba.conf: %w", err)
	}
	for _, c := range cidrs {
		if _, _, err := net.ParseCIDR(c); err != nil {
			_ = f.Close()
			return fmt.Errorf("pgtest.Options.PasswordCIDRs: %q is not a CIDR: %w", c, err)
		}
		if _, err := fmt.Fprintf(f, "host all all %s scram-sha-256\n", c); err != nil {
			_ = f.Close()
			return fmt.Errorf("write pg_hba.conf: %w", err)
		}
	}
	return f.Close()
}

// setPassword gives the superuser a random password.
func (s *Server) setPassword(ctx context.Context) error {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("generate a password: %w", err)
	}
	pw := hex.EncodeToString(b)
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return fmt.Errorf("connect to set the password: %w", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	// ALTER ROLE takes no parameters: the password is hex, so quoting it is safe.
	if _, err := conn.Exec(ctx, "ALTER ROLE postgres PASSWORD '"+pw+"'"); err != nil {
		return fmt.Errorf("set the password: %w", err)
	}
	s.Password = pw
	return nil
}

// URLFor is the URL of database db through host (one of the listen addresses), with the
// password when the server has one.
func (s *Server) URLFor(host, db string) string {
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(host, strconv.Itoa(s.Port)), Path: "/" + db, RawQuery: "sslmode=disable"}
	if s.Password != "" {
		u.User = url.UserPassword(superuser, s.Password)
	} else {
		u.User = url.User(superuser)
	}
	return u.String()
}

// CreateDatabase creates a fresh database and returns its URL, so tests can isolate data.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", s.URL, err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %q: %w", name, err)
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, name), nil
}
