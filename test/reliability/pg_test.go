package reliability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
)

// pgServer is pgtest's throwaway server plus what the outage runs need: stop it (a fast
// shutdown, as an operator stopping the database would) and start it again on the same data
// directory and port, so every client's URL stays valid.
type pgServer struct {
	*pgtest.Server
	mu        sync.Mutex
	restarted *exec.Cmd     // the server process after a restart (pgtest owns the first one)
	exited    chan struct{} // closed when restarted has been waited for
	dbs       int
}

func startPG(ctx context.Context) (*pgServer, error) {
	s, err := pgtest.Start(ctx)
	if err != nil {
		return nil, err
	}
	return &pgServer{Server: s}, nil
}

func (p *pgServer) dataDir() string { return filepath.Join(p.Dir, "data") }

// postmasterPID reads the running server's pid from its data directory; 0 when none.
func (p *pgServer) postmasterPID() int {
	b, err := os.ReadFile(filepath.Join(p.dataDir(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, _ := strconv.Atoi(string(bytes.TrimSpace(line)))
	return pid
}

// NewDatabase creates a fresh database and returns its URL.
func (p *pgServer) NewDatabase(ctx context.Context, prefix string) (string, error) {
	p.mu.Lock()
	p.dbs++
	name := fmt.Sprintf("%s%d", prefix, p.dbs)
	p.mu.Unlock()
	return p.CreateDatabase(ctx, name)
}

// Stop shuts the server down (SIGINT: fast shutdown, connections are closed) and waits until
// the postmaster is gone.
func (p *pgServer) Stop(timeout time.Duration) error {
	pid := p.postmasterPID()
	if pid == 0 {
		return errors.New("postgres is not running (no postmaster.pid)")
	}
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
		return fmt.Errorf("signal postmaster %d: %w", pid, err)
	}
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	deadline := time.After(timeout)
	if exited != nil {
		// Our own child: wait for it (a zombie still answers kill(pid, 0)).
		select {
		case <-exited:
		case <-deadline:
			return fmt.Errorf("postmaster %d still running after %s", pid, timeout)
		}
		p.mu.Lock()
		p.restarted, p.exited = nil, nil
		p.mu.Unlock()
		return nil
	}
	// pgtest's child: pgtest waits for it, so it disappears when it exits.
	for syscall.Kill(pid, 0) == nil {
		select {
		case <-deadline:
			return fmt.Errorf("postmaster %d still running after %s", pid, timeout)
		case <-time.After(20 * time.Millisecond): // polling a process we cannot wait for
		}
	}
	return nil
}

// Start runs the server again on the same data directory and port and waits until it accepts
// connections.
func (p *pgServer) Start(ctx context.Context) error {
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			if u, err = user.Lookup("nobody"); err != nil {
				return errors.New("running as root and no postgres or nobody user to run the server as")
			}
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
	}
	logf, err := os.OpenFile(filepath.Join(p.Dir, "postgres-restart.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(filepath.Join(p.BinDir, "postgres"), "-D", p.dataDir(), "-p", strconv.Itoa(p.Port), "-k", p.Dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "shared_buffers=32MB",
		"-c", "logging_collector=off", "-c", "log_min_messages=warning")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restart postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.restarted, p.exited = cmd, exited
	p.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, p.URL)
		if err == nil {
			_ = conn.Close(cctx)
			cancel()
			return nil
		}
		cancel()
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections after the restart: %w", err)
		}
		time.Sleep(50 * time.Millisecond) // polling the server's start-up
	}
}

// Close stops a restarted server and lets pgtest remove everything.
func (p *pgServer) Close() error {
	p.mu.Lock()
	cmd, exited := p.restarted, p.exited
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	return p.Server.Stop()
}
