package controlplane

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Every process started and not yet stopped, so that an interrupt stops
// them all before the test binary exits.
var (
	mu      sync.Mutex
	running = map[*Process]struct{}{}
)

func register(p *Process) {
	mu.Lock()
	defer mu.Unlock()
	running[p] = struct{}{}
}

func unregister(p *Process) {
	mu.Lock()
	defer mu.Unlock()
	delete(running, p)
}

// StopAll stops every process still running (newest first is not needed:
// each is independent once the tests are over).
func StopAll() {
	mu.Lock()
	all := make([]*Process, 0, len(running))
	for p := range running {
		all = append(all, p)
	}
	mu.Unlock()
	for _, p := range all {
		_ = p.Stop()
	}
}

// StopOnSignal stops every process and exits with status 1 on SIGINT or
// SIGTERM (Ctrl-C, a CI cancellation), so no component outlives the run.
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
