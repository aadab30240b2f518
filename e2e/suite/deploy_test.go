package suite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The CRD as shipped installs, is Established and serves v1alpha2 (the
// version topoalign writes) as its storage version.
func TestNRTCRDInstallsAndIsEstablished(t *testing.T) {
	ctx := testContext(t, time.Minute)
	c := admin(t)
	crd := c.installCRD(t, ctx)
	if crd.Spec.Scope != "Cluster" {
		t.Errorf("scope %q, want Cluster", crd.Spec.Scope)
	}
	if got := crd.Status.StoredVersions; len(got) != 1 || got[0] != "v1alpha2" {
		t.Errorf("stored versions %v, want [v1alpha2]", got)
	}
	// Served: an empty list comes back from the new resource.
	if _, err := c.dynamic.Resource(nrtGVR).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("listing noderesourcetopologies: %v", err)
	}
}

// Every manifest in deploy/ is accepted: API objects by the API server
// (server-side apply, dry run; the CRD is installed first so that objects
// of its kind would resolve), the KubeSchedulerConfiguration by the real
// kube-scheduler, which refuses to start on a configuration it rejects. A
// kind the suite does not know how to check fails the test.
func TestEveryDeployManifestIsAccepted(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	c := admin(t)
	c.installCRD(t, ctx)
	paths, err := filepath.Glob(filepath.Join(repo, "deploy", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in deploy/ (%v)", err)
	}
	checked := 0
	for _, path := range paths {
		name := filepath.Base(path)
		for _, object := range readManifests(t, path) {
			what := name + ": " + object.GetKind() + " " + object.GetName()
			switch {
			case object.GetKind() == "KubeSchedulerConfiguration":
				schedulerStarts(t, ctx, path)
			case object.GetAPIVersion() == "" || object.GetKind() == "":
				t.Errorf("%s: not a Kubernetes object (apiVersion/kind missing)", what)
				continue
			default:
				if _, err := c.apply(ctx, object, true); err != nil {
					t.Errorf("%s: refused: %v", what, err)
					continue
				}
			}
			checked++
			t.Logf("%s: accepted", what)
		}
	}
	if checked < 3 {
		t.Errorf("only %d manifests checked; deploy/ ships a CRD, RBAC and a scheduler configuration", checked)
	}
}

// schedulerStarts starts kube-scheduler with the configuration at path,
// adapted only in clientConnection.kubeconfig (a path on the node), and
// fails the test unless it becomes ready.
func schedulerStarts(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	config := adaptSchedulerConfig(t, path, "deploy-check", "", false)
	p, err := cp.StartScheduler(ctx, "deploy-check", bins.Scheduler, config)
	if err != nil {
		t.Fatalf("kube-scheduler refused %s: %v", filepath.Base(path), err)
	}
	if err := p.Stop(); err != nil {
		t.Error(err)
	}
}

// adaptSchedulerConfig writes a copy of the KubeSchedulerConfiguration at
// path whose clientConnection names this control plane's kubeconfig for
// scheduler name and, when extenderURL is given, whose extenders call it.
// With bind, the commented-out `bindVerb: bind` line is enabled (as its
// comment suggests where the extender creates Bindings). Nothing else
// changes; the replaced lines must exist.
func adaptSchedulerConfig(t *testing.T, path, name, extenderURL string, bind bool) string {
	t.Helper()
	return adaptSchedulerConfigWith(t, path, name, extenderURL, bind, nil)
}

// adaptSchedulerConfigWith is adaptSchedulerConfig, then every line
// starting with a key of lines (after indentation) replaced by its value.
func adaptSchedulerConfigWith(t *testing.T, path, name, extenderURL string, bind bool, lines map[string]string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	// replace gives every line starting with prefix (after indentation)
	// the text line instead.
	replace := func(prefix, line string) {
		lines := strings.Split(text, "\n")
		found := false
		for i, old := range lines {
			if strings.HasPrefix(strings.TrimSpace(old), prefix) {
				indent := old[:len(old)-len(strings.TrimLeft(old, " "))]
				lines[i] = indent + line
				found = true
			}
		}
		if !found {
			t.Fatalf("%s: no %q line to adapt", path, prefix)
		}
		text = strings.Join(lines, "\n")
	}
	replace("kubeconfig:", `kubeconfig: "`+cp.SchedulerKubeconfig(name)+`"`)
	if extenderURL != "" {
		replace("- urlPrefix:", `- urlPrefix: "`+extenderURL+`"`)
	}
	if bind {
		replace("# bindVerb:", "bindVerb: bind")
	}
	for prefix, line := range lines {
		replace(prefix, line)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(out, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}
