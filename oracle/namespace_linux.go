package main

// A private mount namespace for one replay. The device manager's registration
// socket and checkpoint directory are fixed by the kubelet
// (/var/lib/kubelet/device-plugins, pluginapi.KubeletSocket); the replay runs
// the real device manager unmodified, so it gets its own empty tmpfs there,
// invisible to the host and to other replays.
//
// The node a scenario describes is a cgroup v2 host, whatever this machine
// runs: from v1.35 the kubelet's configuration validation refuses to start
// on cgroup v1 (failCgroupV1 defaults to true) and decides that from
// statfs("/sys/fs/cgroup"). The namespace therefore gets a cgroup2 mount
// there (and a cgroup namespace of its own), so that no answer depends on
// the host's cgroup mode.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

const namespaceEnv = "TOPOALIGN_ORACLE_IN_NAMESPACE"

// cgroupRoot is where the kubelet's cgroup libraries look for the cgroup
// mode (libcontainer's IsCgroup2UnifiedMode).
const cgroupRoot = "/sys/fs/cgroup"

// inNamespace re-executes the program in a new mount namespace (and a user
// namespace when not root) unless it already runs in one. It returns only in
// the child; the parent exits with the child's status.
func inNamespace() error {
	if os.Getenv(namespaceEnv) == "1" {
		return setupNamespace()
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), namespaceEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWCGROUP}
	if os.Geteuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	cmd.SysProcAttr = attr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		return fmt.Errorf("cannot start the replay in a private mount namespace (needs root or user namespaces): %v", err)
	}
	os.Exit(0)
	return nil
}

// setupNamespace mounts an empty tmpfs on the deepest existing directory of
// the kubelet root directory's path and creates the rest.
func setupNamespace() error {
	if err := syscall.Mount("none", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %v", err)
	}
	target := kubeletRootDir
	for {
		if st, err := os.Stat(target); err == nil && st.IsDir() {
			break
		}
		parent := filepath.Dir(target)
		if parent == "/" {
			return fmt.Errorf("no directory to mount the kubelet root directory on")
		}
		target = parent
	}
	if err := syscall.Mount("tmpfs", target, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("mounting a tmpfs on %s: %v", target, err)
	}
	if err := syscall.Mount("none", cgroupRoot, "cgroup2", 0, ""); err != nil {
		return fmt.Errorf("mounting cgroup2 on %s (the modelled node is a cgroup v2 host): %v", cgroupRoot, err)
	}
	return os.MkdirAll(kubeletRootDir, 0o755)
}
