package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"topoalign/e2e/controlplane"
)

// nrtPluginProfile is the scheduler name of the NodeResourceTopologyMatch
// profile.
const nrtPluginProfile = "topology-aware-scheduler"

// The scheduler-plugins scheduler's NodeResourceTopologyMatch plugin reads
// the objects topoalign publishes: on a node whose NUMA zones have 4 and 6
// CPUs available (single-numa-node), it binds a 3-CPU Guaranteed pod and
// refuses a 7-CPU one, although the Node's allocatable has room for both.
func TestNodeResourceTopologyMatchReadsTopoalignsObjects(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c := admin(t)
	publisher := []string{"KUBECONFIG=" + agentKubeconfig(t, ctx, c)}

	grantSchedulerNRT(t, ctx, c)

	const node = "e2e-nrt-plugin-fragmented"
	createNode(t, ctx, c, node)
	out := runTopoalign(t, ctx, publisher, "nrt", "examples/nodes/two-numa-fragmented.yaml", "--name", node, "--publish")
	if out.code != 0 {
		t.Fatalf("publishing %s: exit %d: %s", node, out.code, out.stderr)
	}
	t.Cleanup(func() { c.deleteNRT(t, context.Background(), node) })

	scheduler := startNRTPluginScheduler(t, ctx, "scheduler-plugins")
	stopAtEnd(t, scheduler)

	ns := "e2e-nrt-plugin"
	namespace(t, ctx, c, ns)
	small := guaranteedPod(ns, "fits", 3, "1Gi")
	large := guaranteedPod(ns, "spans-numa", 7, "1Gi")
	for _, pod := range []*corev1.Pod{small, large} {
		pod.Spec.SchedulerName = nrtPluginProfile
		if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, ctx, "the 3-CPU pod bound to "+node, func() (bool, string) {
		pod, err := c.kube.CoreV1().Pods(ns).Get(ctx, small.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pod.Spec.NodeName == node, fmt.Sprintf("nodeName %q, conditions %+v", pod.Spec.NodeName, pod.Status.Conditions)
	})
	eventually(t, ctx, "the 7-CPU pod refused by NodeResourceTopologyMatch", func() (bool, string) {
		pod, err := c.kube.CoreV1().Pods(ns).Get(ctx, large.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if pod.Spec.NodeName != "" {
			t.Fatalf("the 7-CPU pod was bound to %s, whose NUMA zones have at most 6 CPUs free", pod.Spec.NodeName)
		}
		for _, condition := range pod.Status.Conditions {
			if condition.Type == corev1.PodScheduled && condition.Reason == corev1.PodReasonUnschedulable {
				if !strings.Contains(condition.Message, "cannot align") {
					t.Errorf("unschedulable, but not for topology: %q", condition.Message)
				}
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %+v", pod.Status.Conditions)
	})
}

// grantSchedulerNRT lets the schedulers' identity read NRT objects, as
// scheduler-plugins' own manifests grant it (the plugin's informer lists
// them as the scheduler).
func grantSchedulerNRT(t *testing.T, ctx context.Context, c *clients) {
	t.Helper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-scheduler-nrt"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"topology.node.k8s.io"}, Resources: []string{"noderesourcetopologies"}, Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-scheduler-nrt"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "system:kube-scheduler"}},
	}
	if _, err := c.kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := c.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// startNRTPluginScheduler starts the scheduler-plugins scheduler with one
// profile, nrtPluginProfile: NodeResourceTopologyMatch filtering and
// scoring (LeastAllocated) beside the default plugins, reading every NRT
// object from the API server when it filters or scores a node (no cache:
// what the e2e tests compare).
func startNRTPluginScheduler(t *testing.T, ctx context.Context, name string) *controlplane.Process {
	t.Helper()
	return startNRTPlugin(t, ctx, name, `
      filter:
        enabled: [{name: NodeResourceTopologyMatch}]
      score:
        enabled: [{name: NodeResourceTopologyMatch}]`, "")
}

// startNRTPluginCached starts it as its README recommends for large
// clusters: the plugin at every extension point (Reserve too) and its
// scheduler-side cache resynced every resyncSeconds, which reads the NRT
// objects once and then over-reserves on the nodes it binds pods to until
// their objects' pod fingerprint (nodeTopologyPodsFingerprint) matches the
// pods running there.
func startNRTPluginCached(t *testing.T, ctx context.Context, name string, resyncSeconds int) *controlplane.Process {
	t.Helper()
	return startNRTPlugin(t, ctx, name, `
      multiPoint:
        enabled: [{name: NodeResourceTopologyMatch}]`, fmt.Sprintf("\n          cacheResyncPeriodSeconds: %d", resyncSeconds))
}

// startNRTPlugin starts the scheduler-plugins scheduler with the profile
// nrtPluginProfile, its plugins block and NodeResourceTopologyMatch's args
// after the scoring strategy.
func startNRTPlugin(t *testing.T, ctx context.Context, name, plugins, args string) *controlplane.Process {
	t.Helper()
	config := filepath.Join(t.TempDir(), "scheduler-plugins.yaml")
	text := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: %q
profiles:
  - schedulerName: %s
    plugins:%s
    pluginConfig:
      - name: NodeResourceTopologyMatch
        args:
          scoringStrategy: {type: LeastAllocated}%s
`, cp.SchedulerKubeconfig(name), nrtPluginProfile, plugins, args)
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	scheduler, err := cp.StartScheduler(ctx, name, bins.SchedulerPlugins, config)
	if err != nil {
		t.Fatal(err)
	}
	return scheduler
}
