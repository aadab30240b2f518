package controlplane

import (
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
)

// Every process started and not yet stopped, oldest first, so that an
// interrupt stops them all before the test binary exits.
var (
	mu      sync.Mutex
	running []*Process
)

func register(p *Process) {
	mu.Lock()
	defer mu.Unlock()
	running = append(running, p)
}

func unregister(p *Process) {
	mu.Lock()
	defer mu.Unlock()
	running = slices.DeleteFunc(running, func(q *Process) bool { return q == p })
}

// StopAll stops every process still running, newest first: clients (a
// scheduler, an agent) before the API server, the API server before etcd,
// which it needs to shut down cleanly.
func StopAll() {
	mu.Lock()
	all := slices.Clone(running)
	mu.Unlock()
	slices.Reverse(all)
	for _, p := range all {
		_ = p.Stop()
	}
}

// StopOnSignal stops every process and exits with status 1 on SIGINT,
// SIGTERM or SIGHUP (Ctrl-C, a CI cancellation), so no component outlives
// the run.
func StopOnSignal() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-signals
		os.Stderr.WriteString("e2e: " + s.String() + ": stopping the control plane\n")
		StopAll()
		os.Exit(1)
	}()
}
