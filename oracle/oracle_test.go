package main

// Tests run the oracle binary itself (this test binary re-executed as the
// oracle, see TestMain): every replay in a fresh process, in its own mount
// namespace, like `oracle check` does.
//
//	go test -modfile versions/1.32/go.mod -tags k8s_1_32 .

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const runMainEnv = "TOPOALIGN_ORACLE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	// Processes started by the tests (replays, and the replays `check`
	// starts) are the oracle.
	os.Setenv(runMainEnv, "1")
	os.Exit(m.Run())
}

// vectors is the repository's copy of the v1.32.10 kubelet vectors.
var vectors = filepath.Join("..", "testdata", "conformance", "1.32")

func replay(t *testing.T, args ...string) (map[string]any, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"replay"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("replay %v: %v", args, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("replay %v: output is not a JSON object: %v: %q (stderr %q)", args, err, out, stderr.String())
	}
	return doc, code
}

// The hand-written vectors (0001-0051): the v1.32 build reproduces them; the
// other builds replay each to a result or a start-up refusal.
func TestHandwrittenVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(vectors, "scenarios", "00*.json"))
	if err != nil || len(files) < 51 {
		t.Fatalf("hand-written vectors missing under %s (found %d)", vectors, len(files))
	}
	alternatives, err := readAlternatives(filepath.Join(vectors, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	exe := os.Args[0]
	for _, f := range files {
		if kubeletMinor == "1.32" {
			if r := checkOne(exe, vectors, f, alternatives); r.diff != "" {
				t.Errorf("%s: %s", r.name, r.diff)
			}
			continue
		}
		doc, code := replay(t, f)
		if code != 0 {
			t.Errorf("%s: exit status %d: %v", f, code, doc)
		}
	}
}

func writeScenario(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scenario.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const smallNode = `topology:
  numaNodes:
    - {id: 0, memory: 8Gi, distances: [10, 20]}
    - {id: 1, memory: 8Gi, distances: [20, 10]}
  cpus:
    - {id: 0, core: 0, socket: 0, numa: 0}
    - {id: 1, core: 1, socket: 0, numa: 0}
    - {id: 2, core: 2, socket: 1, numa: 1}
    - {id: 3, core: 3, socket: 1, numa: 1}
  devices:
    example.com/nic:
      - {id: nic0, numa: [1]}
`

func TestReplayWritesKubeletCheckpoints(t *testing.T) {
	path := writeScenario(t, smallNode+`kubelet:
  kubeletVersion: "`+kubeletMinor+`"
  topologyManagerPolicy: single-numa-node
  cpuManagerPolicy: static
  reservedSystemCPUs: "0"
  memoryManagerPolicy: Static
  systemReserved: {memory: 100Mi}
  reservedMemory: [{numaNode: 0, limits: {memory: 200Mi}}]
events:
  - add:
      metadata: {name: p}
      spec:
        containers:
          - name: app
            resources: {limits: {cpu: "2", memory: 1Gi, example.com/nic: "1"}}
`)
	dir := t.TempDir()
	doc, code := replay(t, "--checkpoint-dir", dir, path)
	if code != 0 {
		t.Fatalf("exit status %d: %v", code, doc)
	}
	got, _ := json.Marshal(doc["results"])
	want := `[{"admitted":true,"containers":[{"cpus":"2-3","devices":{"example.com/nic":["nic0"]},"init":false,"memoryNuma":[1],"name":"app"}],"event":0,"pod":"default/p"}]`
	if string(got) != want {
		t.Fatalf("results\n got: %s\nwant: %s", got, want)
	}
	cpuState, err := os.ReadFile(filepath.Join(dir, "cpu_manager_state"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cpuState), `"00000000-0000-0000-0000-000000000001":{"app":"2-3"}`) || !strings.Contains(string(cpuState), `"checksum":`) {
		t.Errorf("cpu_manager_state: %s", cpuState)
	}
	for _, f := range []string{"memory_manager_state", filepath.Join("device-plugins", "kubelet_internal_checkpoint")} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "00000000-0000-0000-0000-000000000001") {
			t.Errorf("%s does not name the pod: %s", f, data)
		}
	}
}

func TestReplayRefusals(t *testing.T) {
	other := "1.31"
	for _, tc := range []struct {
		name, body string
		code       int
		error      string
	}{
		{"version mismatch", smallNode + "kubelet: {kubeletVersion: \"" + other + "\"}\nevents: []\n", 2,
			`invalid scenario: kubelet.kubeletVersion: the scenario asks for the v1.31 kubelet`},
		{"no NUMA nodes", "topology: {cpus: [{id: 0, core: 0, socket: 0, numa: 0}]}\nevents: []\n", 2,
			"invalid scenario: "},
		{"delete without namespace", smallNode + "events: [{delete: p}]\n", 2,
			`invalid scenario: events[0].delete: "p" is not namespace/name`},
		// The kubelet's v1beta1 defaulting panics on a gate it does not know.
		{"unknown feature gate", smallNode + "kubelet: {featureGates: {NoSuchGate: true}}\nevents: []\n", 0,
			"panic: failed to merge global and in-flight KubeletConfiguration while setting defaults, error: unrecognized feature gate: NoSuchGate"},
		{"static policy without reservation", smallNode + "kubelet: {cpuManagerPolicy: static}\nevents: []\n", 0,
			"[cpumanager] unable to determine reserved CPU resources for static policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, code := replay(t, writeScenario(t, tc.body))
			msg, _ := doc["error"].(string)
			if code != tc.code || !strings.HasPrefix(msg, tc.error) {
				t.Errorf("got exit %d %q, want exit %d and an error starting %q", code, msg, tc.code, tc.error)
			}
		})
	}
}

// The modelled node is a cgroup v2 host on any machine: failCgroupV1 (the
// default from v1.35) must not refuse a start on a cgroup v1 test machine.
func TestNodeIsACgroupV2Host(t *testing.T) {
	path := writeScenario(t, smallNode+"kubelet: {failCgroupV1: true}\nevents: []\n")
	doc, code := replay(t, path)
	if code != 0 || doc["error"] != nil {
		t.Fatalf("exit status %d: %v", code, doc)
	}
}
