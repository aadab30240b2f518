package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The DRA fleet (e2e/testdata/dra-fleet.yaml): 4-NUMA nodes whose GPUs and
// NICs are published through DRA by simulate-nodes. dra-a nodes have a
// GPU and a NIC on every NUMA node, dra-b nodes only on NUMA nodes 2 and 3.
const (
	draFleet     = "e2e/testdata/dra-fleet.yaml"
	draGPUDriver = "gpu.example.com"
	draNICDriver = "nic.example.com"
	draGate      = "topoalign.io/e2e-claims"
	draTemplate  = "gpu-nic"
	draGPUPods   = 3
	draPodCPUs   = 6
)

var draNodes = []string{"dra-a-0", "dra-a-1", "dra-a-2", "dra-b-0", "dra-b-1"}

// draNUMA is a CPU's NUMA node in the DRA fleet (core c has CPUs c and
// c+16; 4 cores per NUMA node).
func draNUMA(cpu int) int { return (cpu % 16) / 4 }

// draResult is what one scheduler made of the DRA workload.
type draResult struct {
	running, failed, unschedulable int
	// misaligned: GPU pods with a device off their CPUs' NUMA node, by the
	// claims' allocations and the CPUs the kubelet pinned (read here);
	// condition: those the simulated kubelet marked DRAAligned=False.
	misaligned, condition int
	placed                []string
}

// DRA devices and the kubelet's CPUs on one NUMA node, stock scheduler vs
// topoalign: simulated 4-NUMA GPU+NIC nodes publish their devices as
// ResourceSlices; pods take a GPU and a NIC from a ResourceClaimTemplate
// and 6 exclusive CPUs (Guaranteed, single-numa-node). CPU-only pods hold
// NUMA node 0 of every dra-a node and NUMA nodes 0 and 1 of every dra-b
// node. On a dra-a node the kubelet then pins a GPU pod's CPUs on NUMA node
// 1 while the scheduler's first-fit allocator gives it the first GPU and
// NIC, on NUMA node 0; on a dra-b node both land on NUMA node 2 (then 3).
// The stock scheduler prefers the less allocated dra-a nodes, one GPU pod
// each: every one misaligned, by construction. kube-scheduler with
// `topoalign extender --dra-align --choose-in-filter` must place every GPU
// pod aligned, with no admission failure.
func TestDRAAlignment(t *testing.T) {
	ctx := testContext(t, 8*time.Minute)
	c := admin(t)
	draFleetUp(t, ctx, c, filepath.Join(repo, draFleet),
		"--dra", "example.com/gpu="+draGPUDriver, "--dra", "example.com/nic="+draNICDriver)
	for _, driver := range []string{draGPUDriver, draNICDriver} {
		class := &resourcev1.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: driver},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
				CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
			}}},
		}
		if _, err := c.kube.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	stock, aligned := draCompare(t, ctx, c, "dra", draFromClaims)
	draReport(t, fmt.Sprintf("DRA workload (%d pods of a GPU + a NIC from DRA and %d exclusive CPUs)", draGPUPods, draPodCPUs), draFleet, stock, aligned)
}

// draExtendedBlock turns the DRA fleet into one whose GPUs serve the
// extended resource nvidia.com/gpu (KEP-5004): simulate-nodes publishes
// the drivers' devices as ResourceSlices and applies the DeviceClasses,
// the GPUs' naming the resource in extendedResourceName.
const draExtendedBlock = `
dra:
  drivers: [example.com/gpu=gpu.example.com, example.com/nic=nic.example.com]
  deviceClasses:
    - metadata: {name: gpu.example.com}
      spec:
        extendedResourceName: nvidia.com/gpu
        selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
    - metadata: {name: nic.example.com}
      spec:
        selectors: [{cel: {expression: 'device.driver == "nic.example.com"'}}]
`

// draExtendedResource is the extended resource the GPU class serves.
const draExtendedResource = "nvidia.com/gpu"

// DRA-backed extended resources (KEP-5004, GA and locked on in 1.37) and
// the kubelet's CPUs on one NUMA node, stock scheduler vs topoalign: the
// workload of TestDRAAlignment, but each GPU pod asks a plain
// `nvidia.com/gpu: 1`, which no node's allocatable has. The DeviceClass
// naming it in extendedResourceName serves it: the scheduler's
// DynamicResources plugin makes the pod a special ResourceClaim, allocates
// it first-fit (the first GPU, on NUMA node 0 of a dra-a node, while the
// kubelet pins the CPUs on NUMA node 1) and records it in
// status.extendedResourceClaimStatus, where the simulated kubelet finds it
// (DRAAligned) and the kubelet's device manager leaves the resource to
// DRA. The fleet is simulate-nodes' with a dra: block (draExtendedBlock).
func TestDRAExtendedResource(t *testing.T) {
	ctx := testContext(t, 8*time.Minute)
	c := admin(t)
	text, err := os.ReadFile(filepath.Join(repo, draFleet))
	if err != nil {
		t.Fatal(err)
	}
	fleet := filepath.Join(t.TempDir(), "dra-extended-fleet.yaml")
	if err := os.WriteFile(fleet, append(text, draExtendedBlock...), 0o600); err != nil {
		t.Fatal(err)
	}
	draFleetUp(t, ctx, c, fleet)
	class, err := c.kube.ResourceV1().DeviceClasses().Get(ctx, draGPUDriver, metav1.GetOptions{})
	if err != nil || class.Spec.ExtendedResourceName == nil || *class.Spec.ExtendedResourceName != draExtendedResource {
		t.Fatalf("simulate-nodes should have applied the DeviceClass %s serving %s: %+v, %v", draGPUDriver, draExtendedResource, class, err)
	}
	stock, aligned := draCompare(t, ctx, c, "dra-ext", draFromExtendedResource)
	draReport(t, fmt.Sprintf("DRA-backed extended resource workload (%d pods of %s: 1 served by the DeviceClass %s, and %d exclusive CPUs)",
		draGPUPods, draExtendedResource, draGPUDriver, draPodCPUs), draFleet+" with a dra: block", stock, aligned)
}

// draFleetUp simulates the DRA fleet of the file fleet (simulate-nodes
// given extra) and waits until its 5 nodes are Ready with their GPU and
// NIC ResourceSlices; at the end the nodes, their slices and the drivers'
// DeviceClasses are deleted. The extender may read what --dra-align reads.
func draFleetUp(t *testing.T, ctx context.Context, c *clients, fleet string, extra ...string) {
	t.Helper()
	c.applyFile(t, ctx, "topoalign-rbac.yaml")
	grantExtenderDRA(t, ctx, c)
	simulatedNodes(t, ctx, c, fleet, "dra-a", 3, extra...)
	t.Cleanup(func() {
		background := context.Background()
		for _, name := range draNodes[3:] {
			_ = c.kube.CoreV1().Nodes().Delete(background, name, metav1.DeleteOptions{})
			_ = c.kube.CoordinationV1().Leases("kube-node-lease").Delete(background, name, metav1.DeleteOptions{})
			c.deleteNRT(t, background, name)
		}
		slices, err := c.kube.ResourceV1().ResourceSlices().List(background, metav1.ListOptions{})
		if err == nil {
			for _, slice := range slices.Items {
				if slice.Spec.Driver == draGPUDriver || slice.Spec.Driver == draNICDriver {
					_ = c.kube.ResourceV1().ResourceSlices().Delete(background, slice.Name, metav1.DeleteOptions{})
				}
			}
		}
		for _, class := range []string{draGPUDriver, draNICDriver} {
			_ = c.kube.ResourceV1().DeviceClasses().Delete(background, class, metav1.DeleteOptions{})
		}
	})
	eventually(t, ctx, "the 5 DRA nodes Ready with their GPU and NIC ResourceSlices", func() (bool, string) {
		for _, name := range draNodes {
			node, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !nodeReady(node) || len(node.Spec.Taints) != 0 {
				return false, fmt.Sprintf("%s: not ready (%v)", name, err)
			}
		}
		slices, err := c.kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		count := 0
		for _, slice := range slices.Items {
			if slice.Spec.Driver == draGPUDriver || slice.Spec.Driver == draNICDriver {
				count++
			}
		}
		return count == 2*len(draNodes), fmt.Sprintf("%d slices", count)
	})
}

// draCompare runs the DRA workload whose GPU pods ask as ask says, first
// through the stock kube-scheduler (profile e2e-<name>-stock), then
// through kube-scheduler with `topoalign extender --dra-align
// --choose-in-filter --create-bindings` (namespace e2e-<name>-topoalign),
// the extender started once the CPU-only pods are in the NRT objects: its
// first listing has them.
func draCompare(t *testing.T, ctx context.Context, c *clients, name string, ask draAsk) (stock, aligned draResult) {
	t.Helper()
	stockName := "e2e-" + name + "-stock"
	defaultConfig := filepath.Join(t.TempDir(), "stock.yaml")
	text := fmt.Sprintf("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection: {leaderElect: false}\nclientConnection: {kubeconfig: %q}\nprofiles:\n  - schedulerName: %s\n",
		cp.SchedulerKubeconfig("kube-scheduler-"+name+"-stock"), stockName)
	if err := os.WriteFile(defaultConfig, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	scheduler, err := cp.StartScheduler(ctx, "kube-scheduler-"+name+"-stock", bins.Scheduler, defaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	stock = draRun(t, ctx, c, stockName, stockName, ask, func() string { return "" })
	stop(t, scheduler)

	aligned = draRun(t, ctx, c, "e2e-"+name+"-topoalign", "default-scheduler", ask, func() string {
		url, _ := startExtenderBinary(t, ctx, c, topoalign, len(draNodes), "--create-bindings", "--choose-in-filter", "--dra-align")
		config := adaptSchedulerConfig(t, filepath.Join(repo, "deploy", "kube-scheduler-extender.yaml"), "kube-scheduler-"+name, url, true)
		scheduler, err := cp.StartScheduler(ctx, "kube-scheduler-"+name, bins.Scheduler, config)
		if err != nil {
			t.Fatal(err)
		}
		stopAtEnd(t, scheduler)
		return url
	})
	return stock, aligned
}

// draReport prints the table of the workload and checks it: topoalign 0
// misaligned and 0 admission failures; the stock scheduler, by
// construction (see TestDRAAlignment), one GPU pod on each dra-a node,
// where first-fit must miss the kubelet's NUMA node.
func draReport(t *testing.T, workload, fleet string, stock, aligned draResult) {
	t.Helper()
	fmt.Fprintf(os.Stderr, "\n%s, %d simulated 4-NUMA nodes (%s):\n", workload, len(draNodes), fleet)
	fmt.Fprintf(os.Stderr, "  %-38s %8s %11s %18s %14s   %s\n", "scheduler", "running", "misaligned", "failed admission", "unschedulable", "nodes")
	for _, row := range []struct {
		name string
		r    draResult
	}{{"kube-scheduler (stock, DRA first-fit)", stock}, {"kube-scheduler + topoalign --dra-align", aligned}} {
		fmt.Fprintf(os.Stderr, "  %-38s %8d %11d %18d %14d   %v\n", row.name, row.r.running, row.r.misaligned, row.r.failed, row.r.unschedulable, row.r.placed)
	}
	for name, r := range map[string]draResult{"stock": stock, "topoalign": aligned} {
		if r.misaligned != r.condition {
			t.Errorf("%s: %d pods misaligned by their claims and CPUs, but %d marked DRAAligned=False by the simulated kubelet", name, r.misaligned, r.condition)
		}
	}
	if aligned.misaligned != 0 || aligned.failed != 0 || aligned.running != draGPUPods {
		t.Errorf("topoalign --dra-align: %d running, %d misaligned, %d failed admission; want %d, 0, 0", aligned.running, aligned.misaligned, aligned.failed, draGPUPods)
	}
	if stock.misaligned != draGPUPods || stock.failed != 0 {
		t.Errorf("stock: %d misaligned, %d failed admission; the workload is built for %d and 0", stock.misaligned, stock.failed, draGPUPods)
	}
}

// grantExtenderDRA lets the extender's service account read what
// --dra-align reads.
func grantExtenderDRA(t *testing.T, ctx context.Context, c *clients) {
	t.Helper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "topoalign-e2e-dra-read"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"deviceclasses", "resourceslices", "resourceclaims"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	if _, err := c.kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "topoalign-e2e-dra-read"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "kube-system", Name: "topoalign-extender"}},
	}
	if _, err := c.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// draAsk is how a pod of the DRA workload asks for devices.
type draAsk int

const (
	// draCPUOnly: none.
	draCPUOnly draAsk = iota
	// draFromClaims: a GPU and a NIC from the ResourceClaimTemplate, the
	// pod gated until the test made its claim.
	draFromClaims
	// draFromExtendedResource: nvidia.com/gpu: 1, which the GPUs'
	// DeviceClass serves.
	draFromExtendedResource
)

func draPod(namespace, name, schedulerName string, ask draAsk) *corev1.Pod {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(strconv.Itoa(draPodCPUs)),
		corev1.ResourceMemory: resource.MustParse("1Gi"),
	}
	if ask == draFromExtendedResource {
		resources[draExtendedResource] = resource.MustParse("1")
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			SchedulerName: schedulerName,
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: resources, Limits: resources},
			}},
		},
	}
	if ask == draFromClaims {
		template := draTemplate
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: draTemplate, ResourceClaimTemplateName: &template}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: draTemplate}}
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: draGate}}
	}
	return pod
}

// draRun runs the workload in namespace for schedulerName, its GPU pods
// asking as ask says, counts, and cleans up. Once the CPU-only pods are
// in the NRT objects, start is called: it returns the URL of the extender
// it started, if any.
func draRun(t *testing.T, ctx context.Context, c *clients, namespace, schedulerName string, ask draAsk, start func() string) draResult {
	t.Helper()
	createNamespace(t, ctx, c, namespace)
	template := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: draTemplate},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{
				{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: draGPUDriver}},
				{Name: "nic", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: draNICDriver}},
			},
		}}},
	}
	if _, err := c.kube.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, template, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// CPU-only pods bound by name, one at a time (each node admits them
	// in order: NUMA node 0, then 1).
	cpuOnly := map[string]int{"dra-a-0": 1, "dra-a-1": 1, "dra-a-2": 1, "dra-b-0": 2, "dra-b-1": 2}
	total := 0
	for _, node := range draNodes {
		for i := range cpuOnly[node] {
			pod := draPod(namespace, fmt.Sprintf("cpu-%s-%d", node, i), schedulerName, draCPUOnly)
			pod.Spec.NodeName = node
			if _, err := c.kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			total++
			name := pod.Name
			podsUntil(t, ctx, c, namespace, name+" running", func(pods map[string]*corev1.Pod) bool {
				return pods[name] != nil && pods[name].Status.Phase == corev1.PodRunning
			})
		}
	}
	eventually(t, ctx, "the NRT objects list the CPU-only pods", func() (bool, string) {
		for _, node := range draNodes {
			if pods, err := nrtPods(ctx, c, node); err != nil || len(pods) != cpuOnly[node] {
				return false, fmt.Sprintf("%s: %v %v", node, pods, err)
			}
		}
		return true, ""
	})

	extenderURL := start()
	switch ask {
	case draFromClaims:
		draClaimPods(t, ctx, c, namespace, schedulerName, extenderURL, template)
	case draFromExtendedResource:
		if extenderURL != "" {
			// Created before the extender started, the classes are in its
			// first listing.
			extenderSays(t, ctx, extenderURL, "the extender lists the DeviceClasses", func(_, _, _, classes int) bool { return classes >= 2 })
		}
		for i := range draGPUPods {
			if _, err := c.kube.CoreV1().Pods(namespace).Create(ctx, draPod(namespace, fmt.Sprintf("gpu-%d", i), schedulerName, ask), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	total += draGPUPods
	// Settled, and each running GPU pod's alignment condition written.
	final := podsUntil(t, ctx, c, namespace, "every pod of "+schedulerName+" decided", func(pods map[string]*corev1.Pod) bool {
		if !settled(total)(pods) {
			return false
		}
		for name, pod := range pods {
			// A gated pod's PodScheduled=False (SchedulingGated) is not
			// a verdict: the ungating may not show yet.
			if strings.HasPrefix(name, "gpu-") && podOutcome(pod) == corev1.PodReasonSchedulingGated {
				return false
			}
			if strings.HasPrefix(name, "gpu-") && pod.Status.Phase == corev1.PodRunning && draCondition(pod) == nil {
				return false
			}
		}
		return true
	})

	result := draResult{}
	for i := range draGPUPods {
		pod := final[fmt.Sprintf("gpu-%d", i)]
		switch outcome := podOutcome(pod); {
		case outcome == "Running":
			result.running++
			result.placed = append(result.placed, pod.Spec.NodeName)
		case strings.HasPrefix(outcome, "Failed"):
			result.failed++
		case outcome == corev1.PodReasonUnschedulable:
			result.unschedulable++
		}
		if pod.Status.Phase != corev1.PodRunning {
			continue
		}
		if condition := draCondition(pod); condition != nil && condition.Status == corev1.ConditionFalse {
			result.condition++
		}
		if draMisaligned(t, ctx, c, pod) {
			result.misaligned++
		}
	}

	// Clean up: pods, then claims (the scheduler's delete protection is
	// the resourceclaim controller's to lift; none runs here).
	zero := int64(0)
	if err := c.kube.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	podsUntil(t, ctx, c, namespace, "the pods of "+schedulerName+" gone", func(pods map[string]*corev1.Pod) bool { return len(pods) == 0 })
	claims, err := c.kube.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, claim := range claims.Items {
		_, _ = c.kube.ResourceV1().ResourceClaims(namespace).Patch(ctx, claim.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = c.kube.ResourceV1().ResourceClaims(namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{})
	}
	eventually(t, ctx, "the claims of "+schedulerName+" gone and the nodes empty", func() (bool, string) {
		claims, err := c.kube.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
		if err != nil || len(claims.Items) != 0 {
			return false, fmt.Sprintf("claims left: %v", err)
		}
		for _, node := range draNodes {
			if pods, err := nrtPods(ctx, c, node); err != nil || len(pods) != 0 {
				return false, fmt.Sprintf("%s: %v %v", node, pods, err)
			}
		}
		return true, ""
	})
	return result
}

// draClaimPods creates the GPU pods of draFromClaims, gated until their
// claims exist, then ungates them.
func draClaimPods(t *testing.T, ctx context.Context, c *clients, namespace, schedulerName, extenderURL string, template *resourcev1.ResourceClaimTemplate) {
	t.Helper()
	// GPU pods, gated until their claims exist (no controller manager
	// runs: the test makes each claim from the template as the
	// resourceclaim controller would, and names it in the pod's status).
	for i := range draGPUPods {
		pod, err := c.kube.CoreV1().Pods(namespace).Create(ctx, draPod(namespace, fmt.Sprintf("gpu-%d", i), schedulerName, draFromClaims), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		yes := true
		claim := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: namespace, Name: pod.Name + "-" + draTemplate,
				Annotations: map[string]string{"resource.kubernetes.io/pod-claim-name": draTemplate},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: &yes, BlockOwnerDeletion: &yes,
				}},
			},
			Spec: template.Spec.Spec,
		}
		if _, err := c.kube.ResourceV1().ResourceClaims(namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		status, _ := json.Marshal(map[string]any{"status": map[string]any{"resourceClaimStatuses": []any{
			map[string]any{"name": draTemplate, "resourceClaimName": claim.Name},
		}}})
		if _, err := c.kube.CoreV1().Pods(namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	if extenderURL != "" {
		extenderSays(t, ctx, extenderURL, "the extender sees the GPU pods' claims", func(_, _, claims, _ int) bool { return claims >= draGPUPods })
	}
	ungate := []byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`)
	for i := range draGPUPods {
		if _, err := c.kube.CoreV1().Pods(namespace).Patch(ctx, fmt.Sprintf("gpu-%d", i), types.JSONPatchType, ungate, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// extenderSays waits until the extender's /healthz counts (nodes, assumed
// pods, ResourceClaims, DeviceClasses) satisfy done.
func extenderSays(t *testing.T, ctx context.Context, url, what string, done func(nodes, assumed, claims, classes int) bool) {
	t.Helper()
	eventually(t, ctx, what, func() (bool, string) {
		resp, err := http.Get(url + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var nodes, assumed, claims, classes int
		_, err = fmt.Sscanf(string(body), "ok: %d nodes, %d assumed pods, %d ResourceClaims, %d DeviceClasses", &nodes, &assumed, &claims, &classes)
		return err == nil && done(nodes, assumed, claims, classes), string(body)
	})
}

func draCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == "topoalign.io/DRAAligned" {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// draMisaligned: a device of the pod's claim (its allocation, the
// device's numaNode attribute in its ResourceSlice) is on a NUMA node
// none of the pod's exclusive CPUs (the simulated kubelet's annotation)
// is on. The claim must be allocated (the special claim of an extended
// resource too, and annotated so).
func draMisaligned(t *testing.T, ctx context.Context, c *clients, pod *corev1.Pod) bool {
	t.Helper()
	var containers []struct {
		Cpus string `json:"cpus"`
	}
	if err := json.Unmarshal([]byte(pod.Annotations[containersAnnotation]), &containers); err != nil || len(containers) == 0 {
		t.Fatalf("%s: no CPUs in %s: %v", pod.Name, containersAnnotation, err)
	}
	cpuNUMA := map[int]bool{}
	for _, container := range containers {
		for _, cpu := range parseCPUList(t, container.Cpus) {
			cpuNUMA[draNUMA(cpu)] = true
		}
	}
	// The claim made from the template, or the special claim the
	// scheduler made for the extended resource.
	var name string
	switch status := pod.Status; {
	case len(status.ResourceClaimStatuses) > 0 && status.ResourceClaimStatuses[0].ResourceClaimName != nil:
		name = *status.ResourceClaimStatuses[0].ResourceClaimName
	case status.ExtendedResourceClaimStatus != nil:
		name = status.ExtendedResourceClaimStatus.ResourceClaimName
		mappings := status.ExtendedResourceClaimStatus.RequestMappings
		if len(mappings) != 1 || mappings[0].ContainerName != "app" || mappings[0].ResourceName != draExtendedResource {
			t.Errorf("%s: extendedResourceClaimStatus maps %+v, want app's %s", pod.Name, mappings, draExtendedResource)
		}
	default:
		t.Fatalf("%s: no claim in its status", pod.Name)
	}
	claim, err := c.kube.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil {
		t.Fatalf("%s: claim %s not allocated", pod.Name, claim.Name)
	}
	if pod.Status.ExtendedResourceClaimStatus != nil && claim.Annotations[resourcev1.ExtendedResourceClaimAnnotation] != "true" {
		t.Errorf("%s: claim %s is not annotated %s", pod.Name, claim.Name, resourcev1.ExtendedResourceClaimAnnotation)
	}
	slices, err := c.kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	misaligned := false
	for _, result := range claim.Status.Allocation.Devices.Results {
		numa := int64(-1)
		for _, slice := range slices.Items {
			if slice.Spec.Driver != result.Driver || slice.Spec.Pool.Name != result.Pool {
				continue
			}
			for _, device := range slice.Spec.Devices {
				if attribute, ok := device.Attributes["resource.kubernetes.io/numaNode"]; device.Name == result.Device && ok && attribute.IntValue != nil {
					numa = *attribute.IntValue
				}
			}
		}
		if numa < 0 {
			t.Fatalf("%s: device %s/%s/%s has no numaNode", pod.Name, result.Driver, result.Pool, result.Device)
		}
		if !cpuNUMA[int(numa)] {
			misaligned = true
		}
	}
	return misaligned
}

// parseCPUList reads the kubelet's CPU list syntax ("0-2,16").
func parseCPUList(t *testing.T, text string) []int {
	t.Helper()
	var cpus []int
	for _, part := range strings.Split(text, ",") {
		if part == "" {
			continue
		}
		first, last, found := strings.Cut(part, "-")
		from, err := strconv.Atoi(first)
		if err != nil {
			t.Fatalf("CPU list %q: %v", text, err)
		}
		to := from
		if found {
			if to, err = strconv.Atoi(last); err != nil {
				t.Fatalf("CPU list %q: %v", text, err)
			}
		}
		for cpu := from; cpu <= to; cpu++ {
			cpus = append(cpus, cpu)
		}
	}
	return cpus
}
