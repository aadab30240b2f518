package suite

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"topoalign/e2e/controlplane"
)

// A service account deploy/'s RBAC does not bind: the API server refuses
// its applies with 403.
const unboundAccount = "e2e-no-permissions"

// `topoalign nrt --publish` as an identity without the permission fails at
// once, naming the refusal and the permission it needs.
func TestNRTCommandReportsAnRBACRefusal(t *testing.T) {
	ctx := testContext(t, time.Minute)
	c := admin(t)
	c.installCRD(t, ctx)
	env := []string{"KUBECONFIG=" + kubeconfigFor(t, unboundAccount, c.serviceAccountToken(t, ctx, "default", unboundAccount))}
	const name = "e2e-refused-cli"
	out := runTopoalign(t, ctx, env, "nrt", "examples/nodes/two-numa.yaml", "--name", name, "--publish")
	if out.code == 0 {
		t.Fatalf("exit 0 though the identity may not write the objects:\n%s%s", out.stdout, out.stderr)
	}
	for _, want := range []string{"forbids", "system:serviceaccount:default:" + unboundAccount, "noderesourcetopologies", "patch", "deploy/topoalign-rbac.yaml"} {
		if !strings.Contains(out.stderr, want) {
			t.Errorf("the error does not mention %q:\n%s", want, out.stderr)
		}
	}
	if _, err := c.getNRT(ctx, name); err == nil {
		t.Errorf("noderesourcetopology/%s exists though its apply was refused", name)
	}
}

// The node agent as an identity without the permission logs the refusal
// once, stops publishing (no retry loop against the API server), and goes
// on allocating.
func TestAgentStopsPublishingOnAnRBACRefusal(t *testing.T) {
	ctx := testContext(t, time.Minute)
	c := admin(t)
	c.installCRD(t, ctx)
	env := []string{"KUBECONFIG=" + kubeconfigFor(t, unboundAccount, c.serviceAccountToken(t, ctx, "default", unboundAccount))}
	dir := t.TempDir()
	a := startAgent(t, ctx, dir, env, "--nrt-publish", "--nrt-node-name", "e2e-refused-agent", "--nrt-interval", "100")
	log := func() string {
		data, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
		return string(data)
	}
	eventually(t, ctx, "the agent reports that publishing stopped", func() (bool, string) {
		return strings.Contains(log(), "publishing stopped"), controlplane.Tail(filepath.Join(dir, "agent.log"), 10)
	})
	text := log()
	if !strings.Contains(text, "forbids") || !strings.Contains(text, "noderesourcetopologies") {
		t.Errorf("the refusal is not explained:\n%s", text)
	}
	if strings.Contains(text, "will retry") {
		t.Errorf("the refusal was retried:\n%s", text)
	}
	// Allocations go on; the change does not restart publishing.
	admitted := a.call(t, http.MethodPost, "/v1/allocations", `{"name": "after", "cpus": 1, "memory": "1Gi"}`, http.StatusCreated)
	if admitted["allocation"] == nil {
		t.Errorf("no allocation in %v", admitted)
	}
	if exited, err := a.process.Exited(); exited {
		t.Errorf("the agent exited (%v)", err)
	}
}
