// Command oracle replays a topoalign scenario through the real, unmodified
// kubelet code of one Kubernetes release (the one this binary is built
// against) and prints the result document. It is test tooling, not part of
// topoalign.
//
//	oracle replay [--checkpoint-dir DIR] SCENARIO.json|yaml
//	oracle check [--jobs N] [--save DIR] VECTOR_DIR
//	oracle batch        (scenario paths on stdin, answers as JSON lines)
//	oracle merge        (hint merge cases on stdin, answers as JSON lines)
//	oracle version
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage:
  oracle replay [--checkpoint-dir DIR] SCENARIO.json|yaml
  oracle check [--jobs N] [--save DIR] VECTOR_DIR
  oracle batch        (scenario paths on stdin, answers as JSON lines)
  oracle merge        (hint merge cases on stdin, answers as JSON lines)
  oracle version
  oracle gates
`)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "replay":
		os.Exit(replayCommand(os.Args[2:]))
	case "check":
		os.Exit(checkCommand(os.Args[2:]))
	case "batch":
		os.Exit(batchCommand(os.Args[2:]))
	case "merge":
		os.Exit(mergeCommand(os.Args[2:]))
	case "bench":
		os.Exit(benchCommand(os.Args[2:]))
	case "version":
		fmt.Println(kubeletMinor)
	case "gates":
		printGates()
	default:
		usage()
	}
}

func replayCommand(args []string) int {
	var checkpointDir, file string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--checkpoint-dir" && i+1 < len(args):
			checkpointDir = args[i+1]
			i++
		case file == "" && len(args[i]) > 0 && args[i][0] != '-':
			file = args[i]
		default:
			usage()
		}
	}
	if file == "" {
		usage()
	}
	// Paths given by the user are resolved before the mount namespace hides
	// anything.
	if checkpointDir != "" {
		abs, err := filepath.Abs(checkpointDir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		checkpointDir = abs
	}
	if err := inNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return 1
	}
	// The kubelet code logs through klog; the result document is the output.
	klog.SetLogger(logr.Discard())

	doc, code := run(file, checkpointDir)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return 1
	}
	_, _ = io.Copy(os.Stdout, &buf)
	return code
}

// run replays one scenario: the result document and the exit status.
func run(file, checkpointDir string) (any, int) {
	s, err := readScenario(file)
	if err != nil {
		return errorDoc(err), 2
	}
	if raw, ok := s.Kubelet["kubeletVersion"]; ok {
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return errorDoc(invalidf("kubelet.kubeletVersion: not a string: %s", raw)), 2
		}
		if v != kubeletMinor {
			return errorDoc(invalidf("kubelet.kubeletVersion: the scenario asks for the v%s kubelet; this oracle runs the v%s kubelet code", v, kubeletMinor)), 2
		}
		// Not a KubeletConfiguration field.
		delete(s.Kubelet, "kubeletVersion")
	}
	nodes, err := s.numaNodes()
	if err != nil {
		return errorDoc(err), 2
	}
	if err := s.checkCPUs(nodes); err != nil {
		return errorDoc(err), 2
	}
	pods, err := decodePods(s)
	if err != nil {
		return errorDoc(err), 2
	}
	tmp, err := os.MkdirTemp("", "oracle-")
	if err != nil {
		return errorDoc(err), 1
	}
	defer os.RemoveAll(tmp)

	bootGates := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	kc, err := loadConfig(s.Kubelet, tmp)
	if err != nil {
		return errorDoc(err), exitStatus(err)
	}
	defaultPods(pods)
	n, err := startNode(kc, machineInfo(s, nodes), s.Topology.Devices, nil)
	if n != nil {
		defer n.stop()
	}
	if err != nil {
		return errorDoc(err), exitStatus(err)
	}
	n.bootGates = bootGates
	doc, err := n.replay(s, pods)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return errorDoc(err), 1
	}
	if checkpointDir != "" {
		if err := copyCheckpoints(kc.MemoryManagerPolicy, checkpointDir); err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			return doc, 1
		}
	}
	return doc, 0
}

func errorDoc(err error) map[string]string { return map[string]string{"error": err.Error()} }

// exitStatus: a configuration the kubelet refuses is a result (0), a
// malformed scenario is 2, anything else is the harness failing (1).
func exitStatus(err error) int {
	var refused *startupError
	var invalid *invalidScenario
	switch {
	case errors.As(err, &refused):
		return 0
	case errors.As(err, &invalid):
		return 2
	}
	return 1
}

// copyCheckpoints copies the checkpoint files the kubelet's managers wrote
// in the kubelet root directory, byte for byte: cpu_manager_state,
// memory_manager_state (Static policy only, as the state folders of the
// repository have it) and the device manager's kubelet_internal_checkpoint
// (when it wrote one).
func copyCheckpoints(memoryPolicy, dir string) error {
	files := []string{"cpu_manager_state", filepath.Join("device-plugins", "kubelet_internal_checkpoint")}
	if memoryPolicy == "Static" {
		files = append(files, "memory_manager_state")
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(kubeletRootDir, f))
		if errors.Is(err, fs.ErrNotExist) && filepath.Base(f) == "kubelet_internal_checkpoint" {
			continue
		}
		if err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(dir, f), data); err != nil {
			return err
		}
	}
	return nil
}

// writeFileAtomic writes through a temporary file in the same directory.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
