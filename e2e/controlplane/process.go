package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is one component started by the tests, its output in a log file.
type Process struct {
	Name string
	Log  string
	// URL is where it serves (scheme, host and port), when known.
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProcess starts path with args, standard output and error appended
// to logPath. The process gets its own process group (so Stop reaches its
// children too) and is killed by the kernel if the test binary dies first
// (Pdeathsig): an aborted run leaves nothing behind.
func StartProcess(name, path string, args []string, env []string, logPath string) (*Process, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &Process{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	register(p)
	return p, nil
}

// DieWithParent makes the kernel kill cmd (SIGKILL) when the test binary
// dies, however it dies (a panic, a timeout, kill -9): Linux's
// PR_SET_PDEATHSIG. Call it before cmd.Start. The signal follows the OS
// thread that started the process; Go's runtime does not end its threads
// while the program runs (no goroutine here locks one), so in practice it
// follows the test binary.
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Kill sends SIGKILL to the process group and waits until the process
// has ended.
func (p *Process) Kill() {
	defer unregister(p)
	if exited, _ := p.Exited(); exited {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM to the process group, waits up to 15 s, then kills it.
// Stopping a process that already ended is not an error.
func (p *Process) Stop() error {
	defer unregister(p)
	if exited, _ := p.Exited(); exited {
		return nil
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(15 * time.Second):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.done
	return errors.New(p.Name + ": did not stop within 15 s of SIGTERM; killed")
}
