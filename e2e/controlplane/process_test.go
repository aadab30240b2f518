package controlplane

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The child half of TestDieWithParent: starts `sleep` with DieWithParent,
// prints its pid and waits to be killed.
func TestDieWithParentChild(t *testing.T) {
	if os.Getenv("TOPOALIGN_E2E_DIE_WITH_PARENT_CHILD") != "1" {
		t.Skip("the child half of TestDieWithParent")
	}
	cmd := exec.Command("sleep", "600")
	DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Println(cmd.Process.Pid)
	select {}
}

// A process started with DieWithParent dies when the process that started
// it is killed with SIGKILL (nothing of its own runs then).
func TestDieWithParent(t *testing.T) {
	child := exec.Command(os.Args[0], "-test.run=^TestDieWithParentChild$", "-test.v")
	child.Env = append(os.Environ(), "TOPOALIGN_E2E_DIE_WITH_PARENT_CHILD=1")
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	lines := bufio.NewScanner(stdout)
	for pid == 0 && lines.Scan() {
		pid, _ = strconv.Atoi(strings.TrimSpace(lines.Text()))
	}
	if pid == 0 {
		_ = child.Process.Kill()
		t.Fatalf("the child printed no pid (%v)", lines.Err())
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the grandchild %d is not running: %v", pid, err)
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	// The kernel signals the grandchild as its parent exits; it is then
	// reaped by whoever inherits it. Wait for that, up to a limit.
	deadline := time.Now().Add(30 * time.Second)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(stat), ") Z ") || !strings.Contains(string(stat), "(sleep)") {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the grandchild %d outlived its parent by 30 s: %s", pid, stat)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
