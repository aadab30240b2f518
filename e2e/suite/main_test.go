// Package suite is topoalign's end-to-end suite: the real `topoalign`
// binary against a real kube-apiserver (and kube-scheduler), started by
// package controlplane. Run it with e2e/run.sh, which builds what is
// missing and sets $TOPOALIGN_BIN and the $TOPOALIGN_E2E_* paths of the
// control plane. A missing component fails the suite; nothing is skipped.
package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"topoalign/e2e/controlplane"
)

// TopoalignEnv names the `topoalign` binary under test.
const TopoalignEnv = "TOPOALIGN_BIN"

var (
	// cp is the control plane every test shares.
	cp *controlplane.ControlPlane
	// bins are its executables.
	bins controlplane.Binaries
	// topoalign is the binary under test.
	topoalign string
	// repo is the repository's root (deploy/, examples/).
	repo string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	controlplane.StopOnSignal()
	defer controlplane.StopAll()
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
		return 1
	}
	var err error
	if bins, err = controlplane.BinariesFromEnv(); err != nil {
		return fail("%v", err)
	}
	topoalign = os.Getenv(TopoalignEnv)
	if topoalign == "" {
		return fail("$%s is not set: run e2e/run.sh, or set it to a built topoalign binary", TopoalignEnv)
	}
	if _, err := os.Stat(topoalign); err != nil {
		return fail("$%s: %v", TopoalignEnv, err)
	}
	if repo, err = filepath.Abs("../.."); err != nil {
		return fail("%v", err)
	}
	dir, err := os.MkdirTemp("", "topoalign-e2e-")
	if err != nil {
		return fail("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	started := time.Now()
	cp, err = controlplane.Start(ctx, bins, dir)
	if err != nil {
		return fail("control plane did not start: %v (files in %s)", err, dir)
	}
	fmt.Fprintf(os.Stderr, "e2e: control plane up in %.1fs at %s (files in %s)\n", time.Since(started).Seconds(), cp.URL, dir)
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: stopping the control plane: %v\n", err)
	}
	if code == 0 {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: logs and files kept in %s\n", dir)
	}
	return code
}
