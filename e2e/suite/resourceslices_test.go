package suite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// resourceSlicesOf runs `topoalign topology -o resourceslices` on a real
// capture and returns its objects as kubectl would read them.
func resourceSlicesOf(t *testing.T, node string, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	ctx := testContext(t, time.Minute)
	capture := filepath.Join(repo, "testdata/topologies/sysfs/hwloc-32em64t-2n8c+1mic.tar.bz2")
	args := append([]string{"topology", "-o", "resourceslices", "--node-name", node, "--sysfs", capture}, extra...)
	out := runTopoalign(t, ctx, nil, args...)
	if out.code != 0 {
		t.Fatalf("topoalign %s: exit %d: %s", strings.Join(args, " "), out.code, out.stderr)
	}
	file := filepath.Join(t.TempDir(), "slices.yaml")
	if err := os.WriteFile(file, []byte(out.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	objects := readManifests(t, file)
	if len(objects) == 0 {
		t.Fatalf("no objects in:\n%s", out.stdout)
	}
	return objects
}

// The slices of a real capture (NICs, InfiniBand, a Xeon Phi, an NVMe
// drive of numa_node -1) go to resource.k8s.io/v1 of a real API server
// and come back field for field: the attribute names, the int numaNode,
// the device names all pass its validation.
func TestResourceSlicesApplyAndReadBack(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	c := admin(t)
	for _, object := range resourceSlicesOf(t, "e2e-dra-node") {
		sent := object.DeepCopy().Object
		if _, err := c.apply(ctx, object, false); err != nil {
			t.Fatalf("apply %s: %v", object.GetName(), err)
		}
		resource, err := c.resource(object)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = resource.Delete(testContext(t, 30*time.Second), object.GetName(), metav1.DeleteOptions{})
		})
		stored, err := resource.Get(ctx, object.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if problems := sameAsSent(sent, stored); problems != "" {
			t.Errorf("%s: %s", object.GetName(), problems)
		}
		devices, _, _ := unstructured.NestedSlice(stored.Object, "spec", "devices")
		if len(devices) != 6 {
			t.Errorf("%s: %d devices stored, want 6", object.GetName(), len(devices))
		}
	}
}

// The KEP-6072 list form needs DRAListTypeAttributes, alpha and off in
// this API server: it drops the list and refuses the attribute left
// without a value — why the int is the default.
func TestResourceSlicesListFormNeedsTheFeatureGate(t *testing.T) {
	ctx := testContext(t, time.Minute)
	c := admin(t)
	for _, object := range resourceSlicesOf(t, "e2e-dra-list-node", "--numa-node-form", "list") {
		_, err := c.apply(ctx, object, true)
		if err == nil {
			t.Fatalf("%s: the API server took list attributes with DRAListTypeAttributes off", object.GetName())
		}
		if !strings.Contains(err.Error(), "resource.kubernetes.io/numaNode") {
			t.Errorf("%s: refused for another reason: %v", object.GetName(), err)
		}
		t.Logf("refused, as it should be: %v", err)
	}
}
