package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"topoalign/e2e/controlplane"
)

// agentIdentity is deploy/topoalign-rbac.yaml's service account of the
// node agent.
const agentNamespace, agentAccount = "kube-system", "topoalign-agent"

// agentKubeconfig installs the CRD and deploy/'s RBAC and returns a
// kubeconfig carrying a token of the agent's service account.
func agentKubeconfig(t *testing.T, ctx context.Context, c *clients) string {
	t.Helper()
	c.installCRD(t, ctx)
	c.applyFile(t, ctx, "topoalign-rbac.yaml")
	return kubeconfigFor(t, "topoalign-agent", c.serviceAccountToken(t, ctx, agentNamespace, agentAccount))
}

// readObject parses the one NRT object of a JSON or YAML file topoalign
// wrote.
func readObject(t *testing.T, path string) map[string]any {
	t.Helper()
	objects := readManifests(t, path)
	if len(objects) != 1 {
		t.Fatalf("%s: %d objects, want 1", path, len(objects))
	}
	return objects[0].Object
}

// sameAsSent says how stored differs from sent: every field topoalign
// sent must come back unchanged; the API server adds only metadata of its
// own (uid, resourceVersion, managedFields, ...).
func sameAsSent(sent map[string]any, stored *unstructured.Unstructured) string {
	// Both through encoding/json, so that numbers compare as numbers
	// whichever decoder read them.
	sent, storedObject := plainJSON(sent), plainJSON(stored.Object)
	stored = &unstructured.Unstructured{Object: storedObject}
	var problems []string
	for key, value := range sent {
		if key == "metadata" {
			continue
		}
		if !reflect.DeepEqual(value, stored.Object[key]) {
			problems = append(problems, fmt.Sprintf("%s: sent %s, stored %s", key, compact(value), compact(stored.Object[key])))
		}
	}
	for key := range stored.Object {
		if _, ok := sent[key]; !ok && key != "metadata" {
			problems = append(problems, "stored has "+key+", not sent")
		}
	}
	sentMeta, _ := sent["metadata"].(map[string]any)
	storedMeta, _ := stored.Object["metadata"].(map[string]any)
	for key, value := range sentMeta {
		if key == "resourceVersion" {
			continue
		}
		if !reflect.DeepEqual(value, storedMeta[key]) {
			problems = append(problems, fmt.Sprintf("metadata.%s: sent %s, stored %s", key, compact(value), compact(storedMeta[key])))
		}
	}
	return strings.Join(problems, "; ")
}

// plainJSON is object as encoding/json decodes it (numbers float64).
func plainJSON(object map[string]any) map[string]any {
	data, err := json.Marshal(object)
	if err != nil {
		return map[string]any{"unencodable": err.Error()}
	}
	var plain map[string]any
	if err := json.Unmarshal(data, &plain); err != nil {
		return map[string]any{"undecodable": err.Error()}
	}
	return plain
}

func compact(value any) string {
	data, _ := json.Marshal(value)
	if len(data) > 300 {
		return string(data[:300]) + "..."
	}
	return string(data)
}

// managedByTopoalign checks the object's fields are owned by topoalign's
// field manager through server-side apply.
func managedByTopoalign(stored *unstructured.Unstructured) bool {
	for _, entry := range stored.GetManagedFields() {
		if entry.Manager == "topoalign" && entry.Operation == "Apply" {
			return true
		}
	}
	return false
}

// `topoalign nrt --publish` with the agent's service account creates the
// object, then updates it; each time the stored object is the one written
// beside it, field for field.
func TestNRTCommandPublishesThroughTheAgentsServiceAccount(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	c := admin(t)
	env := []string{"KUBECONFIG=" + agentKubeconfig(t, ctx, c)}
	const name = "e2e-cli-node"
	c.deleteNRT(t, ctx, name)
	t.Cleanup(func() { c.deleteNRT(t, context.Background(), name) })
	dir := t.TempDir()
	var versions []string
	for i, scenario := range []string{"examples/nodes/two-numa.yaml", "examples/nodes/two-numa-fragmented.yaml"} {
		sent := filepath.Join(dir, fmt.Sprintf("sent-%d.json", i))
		out := runTopoalign(t, ctx, env, "nrt", scenario, "--name", name, "-o", "json", "--out-file", sent, "--publish")
		if out.code != 0 {
			t.Fatalf("topoalign nrt %s --publish: exit %d\n%s%s", scenario, out.code, out.stdout, out.stderr)
		}
		if !strings.Contains(out.stdout, "applied noderesourcetopology/"+name) {
			t.Errorf("no confirmation on stdout: %q", out.stdout)
		}
		stored, err := c.getNRT(ctx, name)
		if err != nil {
			t.Fatalf("after publishing %s: %v", scenario, err)
		}
		if diff := sameAsSent(readObject(t, sent), stored); diff != "" {
			t.Errorf("%s: stored object differs from the one sent: %s", scenario, diff)
		}
		if !managedByTopoalign(stored) {
			t.Errorf("%s: no Apply entry of field manager topoalign in %+v", scenario, stored.GetManagedFields())
		}
		versions = append(versions, stored.GetResourceVersion())
	}
	if versions[0] == versions[1] {
		t.Errorf("the second publication did not update the object (resourceVersion %s both times)", versions[0])
	}
}

// agent is a running `topoalign agent` on a scenario's node.
type agent struct {
	process *controlplane.Process
	socket  string
	http    *http.Client
}

// startAgent starts the node agent on examples/nodes/two-numa.yaml,
// serving its Unix socket in dir, with extra arguments and environment.
func startAgent(t *testing.T, ctx context.Context, dir string, env []string, args ...string) *agent {
	t.Helper()
	socket := filepath.Join(dir, "agent.sock")
	all := append([]string{
		"agent",
		"--node", filepath.Join(repo, "examples/nodes/two-numa.yaml"),
		"--socket", socket,
		"--state-dir", filepath.Join(dir, "state"),
	}, args...)
	p, err := controlplane.StartProcess("topoalign-agent", topoalign, all, append(env, "RUST_LOG=info"), filepath.Join(dir, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, p)
	a := &agent{process: p, socket: socket, http: &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}},
	}}
	eventually(t, ctx, "the agent answers /healthz", func() (bool, string) {
		if exited, err := p.Exited(); exited {
			t.Fatalf("the agent exited (%v):\n%s", err, controlplane.Tail(p.Log, 30))
		}
		resp, err := a.http.Get("http://agent/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return a
}

// call sends a request to the agent's API and decodes the JSON answer.
func (a *agent) call(t *testing.T, method, path, body string, want int) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, "http://agent"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var answer map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %s, want %d: %v", method, path, resp.Status, want, answer)
	}
	return answer
}

// The node agent publishes through the agent's service account: its first
// object, the one after an admission and the one after the release are
// stored exactly as written to its --nrt-file (the same objects go to both
// destinations).
func TestAgentPublishesItsNodeAfterEachChange(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	c := admin(t)
	kubeconfig := agentKubeconfig(t, ctx, c)
	const name = "e2e-agent-node"
	c.deleteNRT(t, ctx, name)
	t.Cleanup(func() { c.deleteNRT(t, context.Background(), name) })
	dir := t.TempDir()
	file := filepath.Join(dir, "nrt.yaml")
	a := startAgent(t, ctx, dir, []string{"KUBECONFIG=" + kubeconfig},
		"--nrt-publish", "--nrt-file", file, "--nrt-node-name", name, "--nrt-interval", "100")

	// storedMatchesFile waits until the stored object is the file's
	// object and returns it.
	storedMatchesFile := func(what string, accept func(map[string]any) bool) map[string]any {
		t.Helper()
		var sent map[string]any
		eventually(t, ctx, what, func() (bool, string) {
			if _, err := os.Stat(file); err != nil {
				return false, err.Error()
			}
			sent = readObject(t, file)
			if !accept(sent) {
				return false, "the file does not show it yet"
			}
			stored, err := c.getNRT(ctx, name)
			if err != nil {
				return false, err.Error()
			}
			if diff := sameAsSent(sent, stored); diff != "" {
				return false, diff
			}
			if !managedByTopoalign(stored) {
				return false, "not applied by field manager topoalign"
			}
			return true, ""
		})
		return sent
	}
	// holds says whether the object's exact state (topoalign's
	// attributes other than the machine) lists the pod named name.
	holds := func(object map[string]any, name string) bool {
		attributes, _ := object["attributes"].([]any)
		for _, a := range attributes {
			a, _ := a.(map[string]any)
			key, _ := a["name"].(string)
			value, _ := a["value"].(string)
			if strings.HasPrefix(key, "topoalign.io/") && key != "topoalign.io/node-spec" && strings.Contains(value, `"name":"`+name+`"`) {
				return true
			}
		}
		return false
	}
	initial := storedMatchesFile("the empty node stored", func(map[string]any) bool { return true })

	admitted := a.call(t, http.MethodPost, "/v1/allocations", `{"name": "web", "cpus": 2, "memory": "1Gi"}`, http.StatusCreated)
	allocation, _ := admitted["allocation"].(map[string]any)
	id, _ := allocation["id"].(string)
	if id == "" {
		t.Fatalf("no allocation id in %v", admitted)
	}
	busy := storedMatchesFile("the admission stored", func(o map[string]any) bool { return holds(o, "web") })
	if reflect.DeepEqual(busy["zones"], initial["zones"]) {
		t.Errorf("the admission did not change any zone: %s", compact(busy["zones"]))
	}

	a.call(t, http.MethodDelete, "/v1/allocations/"+id, "", http.StatusOK)
	released := storedMatchesFile("the release stored", func(o map[string]any) bool { return !holds(o, "web") })
	if !reflect.DeepEqual(released["zones"], initial["zones"]) {
		t.Errorf("after the release the zones are %s, want the empty node's %s", compact(released["zones"]), compact(initial["zones"]))
	}
}
