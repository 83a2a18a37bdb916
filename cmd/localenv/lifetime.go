package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A run's processes die with it however it ends. Three things tie them to localenv:
//
//   - every child gets a parent-death signal (SIGTERM): the kernel sends it when the parent
//     dies, even of SIGKILL. etcd and kube-apiserver are started by envtest, which takes no
//     SysProcAttr, so they are started through a shim (this binary under their names) that
//     asks for the signal itself and then executes the real binary;
//   - the guard, a second copy of this binary in its own process group, reads a pipe from
//     localenv. The pipe closes when localenv dies, whatever kills it; the guard then stops the
//     process groups it was told of (their own children too: the harness spawns some) and
//     removes the run's temporary folder, which a killed process cannot do itself;
//   - Ctrl-C, SIGTERM and SIGHUP stop everything in order (main), and a write to a closed
//     stdout fails instead of killing localenv mid-shutdown.

// Environment variables that make this binary a shim or the guard instead of localenv.
const (
	// shimEnv holds the folder of the real etcd and kube-apiserver; the shim runs when its
	// own name is one of theirs.
	shimEnv = "PLANMODE_LOCALENV_SHIM_ASSETS"
	// shimParentEnv is the pid the shim's parent must have when it asks for the signal: a
	// parent that died before that would never send it.
	shimParentEnv = "PLANMODE_LOCALENV_SHIM_PARENT"
	guardEnv      = "PLANMODE_LOCALENV_GUARD"
)

// shimmed are the binaries envtest starts, by the names it looks for.
var shimmed = []string{etcdBinary, apiServerBinary}

// deathSignal is what a child gets when localenv dies: SIGTERM, so etcd, the manager and the
// agent shut down cleanly (the agent closes its open turn); the guard follows with SIGKILL.
const deathSignal = syscall.SIGTERM

// guardGrace is how long the guard lets a process group stop after SIGTERM before SIGKILL.
const guardGrace = 5 * time.Second

// asHelper runs this binary as the shim or the guard when the environment says so; it returns
// false for a plain localenv. Called first thing in main (and in the tests' TestMain, whose
// binary stands in for localenv).
func asHelper() bool {
	if os.Getenv(guardEnv) == "1" {
		runGuard(os.Stdin)
		os.Exit(0)
	}
	assets := os.Getenv(shimEnv)
	name := filepath.Base(os.Args[0])
	if assets == "" || !isShimmed(name) {
		return false
	}
	err := execWithDeathSignal(filepath.Join(assets, name))
	fmt.Fprintf(os.Stderr, "localenv shim for %s: %v\n", name, err)
	os.Exit(1)
	return true
}

func isShimmed(name string) bool {
	for _, s := range shimmed {
		if name == s {
			return true
		}
	}
	return false
}

// execWithDeathSignal asks for deathSignal on the parent's death, then replaces this process
// with path (the signal setting survives exec). It returns only on failure.
func execWithDeathSignal(path string) error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(deathSignal), 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", e)
	}
	if want, err := strconv.Atoi(os.Getenv(shimParentEnv)); err == nil && os.Getppid() != want {
		return errors.New("localenv exited before the shim started")
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, shimEnv+"=") && !strings.HasPrefix(kv, shimParentEnv+"=") {
			env = append(env, kv)
		}
	}
	return syscall.Exec(path, os.Args, env)
}

// spawnRequests is served by one goroutine locked to its OS thread for the life of the
// process. Linux sends the parent-death signal when the thread that forked a child exits, not
// the process; the Go runtime ends a thread when a goroutine locked to it returns, and any
// thread may become such a goroutine's. Forking every child from a thread that lives as long
// as localenv makes the signal mean localenv's death.
var spawnRequests = sync.OnceValue(func() chan func() {
	reqs := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the goroutine outlives every child
		for f := range reqs {
			f()
		}
	}()
	return reqs
})

// onSpawnThread runs f on the spawning thread and returns when it has.
func onSpawnThread(f func()) {
	done := make(chan struct{})
	spawnRequests() <- func() {
		defer close(done)
		f()
	}
	<-done
}

// lifetime is one run's tie to the guard, and its temporary folder.
type lifetime struct {
	// tmp holds what the run needs only while it runs: the shims, envtest's certificates, the
	// manager's webhook certificates (and, for the binary, everything TMPDIR points at).
	tmp     string
	shimDir string

	mu    sync.Mutex
	pipe  *os.File // the guard's stdin; nil once closed
	guard *exec.Cmd
	// groups are the process groups adopted and not released, for killAll.
	groups map[int]bool
}

// newLifetime creates the run's temporary folder and starts the guard, which removes the
// folder if localenv dies before it does.
func newLifetime() (*lifetime, error) {
	tmp, err := os.MkdirTemp("", "planmode-localenv-")
	if err != nil {
		return nil, fmt.Errorf("create the run's temporary folder: %w", err)
	}
	lt := &lifetime{tmp: tmp, shimDir: filepath.Join(tmp, "bin"), groups: map[int]bool{}}
	if err := lt.startGuard(); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	lt.tell("remove", tmp)
	if err := lt.writeShims(); err != nil {
		lt.close()
		return nil, err
	}
	return lt, nil
}

func (lt *lifetime) startGuard() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary to start its guard: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), guardEnv+"=1")
	cmd.Stdin = r
	// Its own process group: the terminal's Ctrl-C and hangup reach localenv, not the guard.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		return fmt.Errorf("start the guard that stops this run's processes if localenv dies: %w", err)
	}
	lt.pipe, lt.guard = w, cmd
	return nil
}

// writeShims links etcd and kube-apiserver in shimDir to this binary.
func (lt *lifetime) writeShims() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(lt.shimDir, 0o700); err != nil {
		return err
	}
	for _, name := range shimmed {
		if err := os.Symlink(self, filepath.Join(lt.shimDir, name)); err != nil {
			return fmt.Errorf("link the %s shim: %w", name, err)
		}
	}
	return nil
}

// tell sends one line to the guard. A guard that is gone cannot be helped: localenv still
// stops what it started itself.
func (lt *lifetime) tell(verb string, arg any) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.pipe != nil {
		_, _ = fmt.Fprintf(lt.pipe, "%s %v\n", verb, arg)
	}
}

// adopt hands process group pgid to the guard.
func (lt *lifetime) adopt(pgid int) {
	lt.mu.Lock()
	lt.groups[pgid] = true
	lt.mu.Unlock()
	lt.tell("group", pgid)
}

// release says process group pgid ended (its leader was reaped).
func (lt *lifetime) release(pgid int) {
	lt.mu.Lock()
	delete(lt.groups, pgid)
	lt.mu.Unlock()
	lt.tell("forget", pgid)
}

// killAll kills every process group of the run at once (a second Ctrl-C).
func (lt *lifetime) killAll() {
	lt.killShims()
	lt.mu.Lock()
	defer lt.mu.Unlock()
	for pgid := range lt.groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// shims lists the live etcd and kube-apiserver this run started, by their command line (the
// shim's path, kept through exec).
func (lt *lifetime) shims() []procInfo {
	var out []procInfo
	for _, p := range processes() {
		if p.ppid == os.Getpid() && p.alive() && len(p.args) > 0 && within(p.args[0], lt.shimDir) {
			out = append(out, p)
		}
	}
	return out
}

// adoptShims hands the running etcd and kube-apiserver to the guard. envtest starts them in
// their own process groups; a shim that shares localenv's (envtest's short "--help" runs)
// is not a group to hand over.
func (lt *lifetime) adoptShims() {
	for _, p := range lt.shims() {
		if p.pgid == p.pid {
			lt.adopt(p.pgid)
		}
	}
}

// killShims kills this run's etcd and kube-apiserver at once: an interrupted start. Only a
// process that leads its group has its group killed: the others share localenv's.
func (lt *lifetime) killShims() {
	for _, p := range lt.shims() {
		target := p.pid
		if p.pgid == p.pid {
			target = -p.pid
		}
		_ = syscall.Kill(target, syscall.SIGKILL)
	}
}

// close removes the temporary folder and lets the guard go: it finds nothing left to stop.
func (lt *lifetime) close() {
	_ = os.RemoveAll(lt.tmp)
	lt.mu.Lock()
	pipe, guard := lt.pipe, lt.guard
	lt.pipe = nil
	lt.mu.Unlock()
	if pipe == nil {
		return
	}
	_ = pipe.Close()
	_ = guard.Wait()
}

// runGuard is the guard: it records the process groups and paths localenv names on in, and
// when in ends (localenv exited or died) or SIGTERM comes, stops those groups (SIGTERM, then
// SIGKILL after guardGrace) and removes the paths.
func runGuard(in io.Reader) {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	g := guardState{groups: map[int]int64{}}
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				done = true
				break
			}
			g.record(l)
		case <-term:
			done = true
		}
	}
	g.stopAll()
	for _, p := range g.paths {
		_ = os.RemoveAll(p)
	}
}

type guardState struct {
	// groups maps a process group to its leader's start time when it was adopted.
	groups map[int]int64
	paths  []string
}

func (g *guardState) record(line string) {
	verb, arg, _ := strings.Cut(line, " ")
	switch verb {
	case "remove":
		g.paths = append(g.paths, arg)
	case "group":
		if pgid, err := strconv.Atoi(arg); err == nil && pgid > 1 {
			p, _ := readProc(pgid)
			g.groups[pgid] = p.start
		}
	case "forget":
		if pgid, err := strconv.Atoi(arg); err == nil {
			delete(g.groups, pgid)
		}
	}
}

// stopAll stops the groups that are still this run's. A group outlives its leader (the
// harness's children); a pid is not reused while its group has members, so a live process
// with the leader's pid but another start time means the group ended and the pid is someone
// else's now.
func (g *guardState) stopAll() {
	var left []int
	for pgid, start := range g.groups {
		if p, ok := readProc(pgid); ok && p.start != start {
			continue
		}
		if syscall.Kill(-pgid, syscall.SIGTERM) == nil {
			left = append(left, pgid)
		}
	}
	deadline := time.Now().Add(guardGrace)
	for len(left) > 0 && time.Now().Before(deadline) {
		var still []int
		for _, pgid := range left {
			if groupAlive(pgid) {
				still = append(still, pgid)
			}
		}
		left = still
		if len(left) > 0 {
			time.Sleep(100 * time.Millisecond) // polling processes that are not our children
		}
	}
	for _, pgid := range left {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}
