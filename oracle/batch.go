package main

// oracle batch: many replays in one process, for long differential runs
// (crates/difftest). A replay in a fresh process costs two Go start-ups of
// a binary holding much of Kubernetes (the process and its re-execution in
// a mount namespace); a batch pays them once.
//
// Each line of stdin names a scenario file; each answer is one line of
// stdout, in the order asked:
//
//	{"status":0,"document":{...}}
//
// status and document are what `oracle replay` would exit with and print
// (1 adds "stderr", the harness's message). Every replay starts from what a
// fresh process has:
//
//   - the feature gates: a copy of the registry as it was before the first
//     replay replaces utilfeature.DefaultMutableFeatureGate and
//     DefaultFeatureGate (the kubelet code reads them at call time);
//   - an empty kubelet root directory (checkpoints, device-plugin sockets);
//   - the device manager's registration server and the plugins of the last
//     replay stopped (node.stop), so the sockets are free.
//
// What cannot be undone: the CPU manager's reconcile goroutine of each
// replay stays asleep (cpuReconcilePeriod) with its manager, so a batch
// grows by a few hundred kilobytes per replay; callers start a new batch
// every few hundred scenarios. A panic in the kubelet code ends the batch
// (status 1 for that scenario): nothing after it could be trusted.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
)

type batchAnswer struct {
	Status   int    `json:"status"`
	Document any    `json:"document"`
	Stderr   string `json:"stderr,omitempty"`
}

func batchCommand(args []string) int {
	if len(args) != 0 {
		usage()
	}
	if err := inNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return 1
	}
	klog.SetLogger(logr.Discard())
	pristine := utilfeature.DefaultMutableFeatureGate.DeepCopy()

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<16), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for in.Scan() {
		file := strings.TrimSpace(in.Text())
		if file == "" {
			continue
		}
		gates := pristine.DeepCopy()
		utilfeature.DefaultMutableFeatureGate = gates
		utilfeature.DefaultFeatureGate = gates
		answer, fatal := batchReplay(file)
		if err := enc.Encode(answer); err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			return 1
		}
		if err := out.Flush(); err != nil {
			return 1
		}
		if fatal {
			return 1
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		return 1
	}
	return 0
}

// batchReplay replays one scenario from an empty kubelet root directory;
// fatal when the kubelet code panicked.
func batchReplay(file string) (answer batchAnswer, fatal bool) {
	if err := emptyDir(kubeletRootDir); err != nil {
		return batchAnswer{Status: 1, Document: errorDoc(err), Stderr: err.Error()}, true
	}
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprintf("panic: %v", r)
			answer, fatal = batchAnswer{Status: 1, Document: map[string]string{"error": msg}, Stderr: msg}, true
		}
	}()
	doc, code := run(file, "")
	answer = batchAnswer{Status: code, Document: doc}
	if code == 1 {
		if m, ok := doc.(map[string]string); ok {
			answer.Stderr = m["error"]
		}
	}
	return answer, false
}

// emptyDir removes everything inside dir, keeping dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
