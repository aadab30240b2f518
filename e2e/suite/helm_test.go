package suite

// The Helm chart (deploy/helm/topoalign) against deploy/: rendered with
// Helm's own library, its default objects are deploy/'s objects, field for
// field (parsed, not compared as text; deploy/ is read when the test runs,
// so a change there that the chart does not follow fails here); `helm
// lint`'s rules pass; and the chart installs on the real API server — a
// release with the scheduler Deployment whose kube-scheduler (the
// ConfigMap's KubeSchedulerConfiguration) and extender (the Deployment's
// arguments), run with the chart's service accounts, bind a pod only where
// the kubelet would admit it.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"topoalign/e2e/controlplane"
)

// chartKubeVersion is the cluster version the chart is rendered for: this
// suite's API server.
var chartKubeVersion = chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}

func chartDir() string { return filepath.Join(repo, "deploy", "helm", "topoalign") }

// renderChart renders the chart as `helm install release -n namespace
// --set ...` would: its crds/ first, then its templates' objects, in file
// order (NOTES.txt and empty documents left out).
func renderChart(t *testing.T, release, namespace string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	chart, err := loader.Load(chartDir())
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartKubeVersion
	options := chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(chart, values, options, caps)
	if err != nil {
		t.Fatalf("chart values: %v", err)
	}
	rendered, err := engine.Render(chart, top)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	var objects []*unstructured.Unstructured
	for _, crd := range chart.CRDObjects() {
		objects = append(objects, decodeManifests(t, crd.Filename, crd.File.Data)...)
	}
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		objects = append(objects, decodeManifests(t, name, []byte(rendered[name]))...)
	}
	return objects
}

// decodeManifests decodes the YAML documents of data (empty ones skipped).
func decodeManifests(t *testing.T, name string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	decoder := yamlutil.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objects []*unstructured.Unstructured
	for {
		var object map[string]any
		if err := decoder.Decode(&object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("%s: %v\n%s", name, err, data)
		}
		if len(object) == 0 {
			continue
		}
		objects = append(objects, &unstructured.Unstructured{Object: object})
	}
	return objects
}

func objectKey(o *unstructured.Unstructured) string {
	key := o.GetAPIVersion() + " " + o.GetKind() + " "
	if o.GetNamespace() != "" {
		key += o.GetNamespace() + "/"
	}
	return key + o.GetName()
}

// byKey indexes objects, failing the test on a duplicate.
func byKey(t *testing.T, what string, objects []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	index := map[string]*unstructured.Unstructured{}
	for _, o := range objects {
		key := objectKey(o)
		if _, dup := index[key]; dup {
			t.Errorf("%s: %s twice", what, key)
		}
		index[key] = o
	}
	return index
}

// deployObjects are deploy/*.yaml's API objects (the
// KubeSchedulerConfiguration is a file for kube-scheduler, not one).
func deployObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repo, "deploy", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in deploy/ (%v)", err)
	}
	var objects []*unstructured.Unstructured
	for _, path := range paths {
		for _, o := range readManifests(t, path) {
			if o.GetKind() != "KubeSchedulerConfiguration" {
				objects = append(objects, o)
			}
		}
	}
	return objects
}

// deploySchedulerConfig is deploy/kube-scheduler-extender.yaml, parsed.
func deploySchedulerConfig(t *testing.T) map[string]any {
	t.Helper()
	objects := readManifests(t, filepath.Join(repo, "deploy", "kube-scheduler-extender.yaml"))
	if len(objects) != 1 || objects[0].GetKind() != "KubeSchedulerConfiguration" {
		t.Fatalf("deploy/kube-scheduler-extender.yaml: want one KubeSchedulerConfiguration, got %d objects", len(objects))
	}
	return objects[0].Object
}

// valueDiffs lists where want and got differ, one "path: ..." a line.
func valueDiffs(path string, want, got any) []string {
	return labelledDiffs("deploy/", "the chart", path, want, got)
}

// labelledDiffs is valueDiffs with want and got called wantName and
// gotName.
func labelledDiffs(wantName, gotName, path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %s has a map, %s %s", path, wantName, gotName, compact(got))}
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var out []string
		for _, k := range sorted {
			wv, inWant := w[k]
			gv, inGot := g[k]
			switch {
			case !inGot:
				out = append(out, fmt.Sprintf("%s.%s: %s has %s, %s nothing", path, k, wantName, compact(wv), gotName))
			case !inWant:
				out = append(out, fmt.Sprintf("%s.%s: %s has %s, %s nothing", path, k, gotName, compact(gv), wantName))
			default:
				out = append(out, labelledDiffs(wantName, gotName, path+"."+k, wv, gv)...)
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %s has %s, %s %s", path, wantName, compact(want), gotName, compact(got))}
		}
		var out []string
		for i := range w {
			out = append(out, labelledDiffs(wantName, gotName, fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	default:
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: %s has %s, %s %s", path, wantName, compact(want), gotName, compact(got))}
		}
		return nil
	}
}

// With its default values, installed as release "topoalign" in
// kube-system, the chart makes exactly deploy/'s objects, field for field.
func TestHelmChartIsDeploy(t *testing.T) {
	want := byKey(t, "deploy/", deployObjects(t))
	got := byKey(t, "the chart", renderChart(t, "topoalign", "kube-system", nil))
	for key, w := range want {
		g, ok := got[key]
		if !ok {
			t.Errorf("%s: in deploy/, not made by the chart", key)
			continue
		}
		for _, d := range valueDiffs(key, w.Object, g.Object) {
			t.Error(d)
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("%s: made by the chart, not in deploy/", key)
		}
	}
	if len(want) < 10 {
		t.Errorf("deploy/ has only %d objects; it ships the CRD, the follower and the RBAC", len(want))
	}
	if !t.Failed() {
		t.Logf("%d objects, equal to deploy/'s", len(want))
	}
}

// The scheduler Deployment's KubeSchedulerConfiguration is deploy/'s with
// exactly three changes: the in-cluster connection (no kubeconfig path),
// the profile's name, and a leader-election lease of its own. With bind,
// the extender binds (deploy/'s commented-out `bindVerb: bind`) and is
// started with --create-bindings.
func TestHelmSchedulerConfigIsDeploys(t *testing.T) {
	for _, bind := range []bool{false, true} {
		t.Run(fmt.Sprintf("bind=%v", bind), func(t *testing.T) {
			values := map[string]any{"scheduler": map[string]any{"enabled": true, "extender": map[string]any{"bind": bind}}}
			objects := byKey(t, "the chart", renderChart(t, "topoalign", "kube-system", values))
			config, args := schedulerParts(t, objects, "topoalign-scheduler", "kube-system")
			schedulerReadsItsConfigMap(t, objects, "topoalign-scheduler", "kube-system")

			want := deploySchedulerConfig(t)
			delete(want, "clientConnection")
			want["leaderElection"] = map[string]any{"leaderElect": true, "resourceName": "topoalign-scheduler", "resourceNamespace": "kube-system"}
			profiles, _ := want["profiles"].([]any)
			if len(profiles) != 1 {
				t.Fatalf("deploy/kube-scheduler-extender.yaml: %d profiles, the chart makes one", len(profiles))
			}
			profiles[0].(map[string]any)["schedulerName"] = "topoalign-scheduler"
			if bind {
				extenders, _ := want["extenders"].([]any)
				if len(extenders) != 1 {
					t.Fatalf("deploy/kube-scheduler-extender.yaml: %d extenders, want 1", len(extenders))
				}
				extenders[0].(map[string]any)["bindVerb"] = "bind"
			}
			for _, d := range valueDiffs("config.yaml", want, config) {
				t.Error(d)
			}

			wantArgs := []any{"extender", "--nrt-from-cluster", "--listen=127.0.0.1:8888"}
			if bind {
				wantArgs = append(wantArgs, "--create-bindings")
			}
			if !reflect.DeepEqual(args, wantArgs) {
				t.Errorf("extender arguments %v, want %v", args, wantArgs)
			}
		})
	}
}

// schedulerParts finds the scheduler's ConfigMap (its config.yaml,
// parsed) and the extender container's arguments in rendered objects.
func schedulerParts(t *testing.T, objects map[string]*unstructured.Unstructured, name, namespace string) (map[string]any, []any) {
	t.Helper()
	cm, ok := objects["v1 ConfigMap "+namespace+"/"+name]
	if !ok {
		t.Fatalf("no ConfigMap %s/%s rendered", namespace, name)
	}
	text, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	var config map[string]any
	if err := yaml.Unmarshal([]byte(text), &config); err != nil {
		t.Fatalf("ConfigMap %s config.yaml: %v\n%s", name, err, text)
	}
	deployment, ok := objects["apps/v1 Deployment "+namespace+"/"+name]
	if !ok {
		t.Fatalf("no Deployment %s/%s rendered", namespace, name)
	}
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		container := c.(map[string]any)
		if container["name"] == "extender" {
			args, _ := container["args"].([]any)
			return config, args
		}
	}
	t.Fatalf("Deployment %s: no extender container", name)
	return nil, nil
}

// kube-scheduler in the Deployment reads the ConfigMap's config.yaml: its
// --config is that key's path in the volume of that ConfigMap.
func schedulerReadsItsConfigMap(t *testing.T, objects map[string]*unstructured.Unstructured, name, namespace string) {
	t.Helper()
	deployment := objects["apps/v1 Deployment "+namespace+"/"+name]
	spec, _, _ := unstructured.NestedMap(deployment.Object, "spec", "template", "spec")
	volumes := map[string]string{}
	for _, v := range spec["volumes"].([]any) {
		volume := v.(map[string]any)
		if cm, ok := volume["configMap"].(map[string]any); ok {
			volumes[volume["name"].(string)] = cm["name"].(string)
		}
	}
	for _, c := range spec["containers"].([]any) {
		container := c.(map[string]any)
		if container["name"] != "kube-scheduler" {
			continue
		}
		var config string
		for _, a := range container["args"].([]any) {
			if rest, ok := strings.CutPrefix(a.(string), "--config="); ok {
				config = rest
			}
		}
		for _, m := range container["volumeMounts"].([]any) {
			mount := m.(map[string]any)
			if volumes[mount["name"].(string)] == name && config == mount["mountPath"].(string)+"/config.yaml" {
				return
			}
		}
		t.Fatalf("kube-scheduler's --config=%s is not config.yaml of a mounted ConfigMap %s (mounts %s, volumes %v)", config, name, compact(container["volumeMounts"]), volumes)
	}
	t.Fatalf("Deployment %s: no kube-scheduler container", name)
}

// The values a Helm user sets reach the objects: image, namespace, the
// follower's kubelet directory (flag and mount), its scheduling
// (tolerations, nodeSelector), resources, extra arguments and labels.
func TestHelmValuesReachTheObjects(t *testing.T) {
	values := map[string]any{
		"namespaceOverride": "topoalign",
		"commonLabels":      map[string]any{"team": "numa"},
		"image":             map[string]any{"repository": "registry.example/topoalign", "tag": "v9", "pullPolicy": "IfNotPresent"},
		"follower": map[string]any{
			"kubeletDir":   "/data/kubelet/",
			"port":         9797,
			"logFormat":    "text",
			"events":       false,
			"hostPID":      false,
			"extraArgs":    []any{"--resync-interval=30"},
			"tolerations":  []any{map[string]any{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}},
			"nodeSelector": map[string]any{"topoalign.io/numa": "true"},
			"resources":    map[string]any{"requests": map[string]any{"cpu": "50m"}},
		},
		"agent":     map[string]any{"rbac": map[string]any{"create": false}},
		"scheduler": map[string]any{"enabled": true, "name": "numa-scheduler", "extender": map[string]any{"port": 9999, "scoring": "LeastNUMANodes", "chooseInFilter": true, "bind": true, "managedResources": []any{map[string]any{"name": "nvidia.com/gpu", "ignoredByScheduler": false}}}},
	}
	objects := renderChart(t, "ta", "default", values)
	index := byKey(t, "the chart", objects)
	for _, o := range objects {
		if o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		if o.GetLabels()["team"] != "numa" {
			t.Errorf("%s: no commonLabels (labels %v)", objectKey(o), o.GetLabels())
		}
		if strings.Contains(o.GetName(), "agent") {
			t.Errorf("%s: made with agent.rbac.create=false", objectKey(o))
		}
		if !strings.HasPrefix(o.GetName(), "ta-topoalign-") {
			t.Errorf("%s: release ta's objects are named ta-topoalign-...", objectKey(o))
		}
	}
	ds, ok := index["apps/v1 DaemonSet topoalign/ta-topoalign-follower"]
	if !ok {
		t.Fatalf("no DaemonSet topoalign/ta-topoalign-follower in %v", keys(index))
	}
	spec, _, _ := unstructured.NestedMap(ds.Object, "spec", "template", "spec")
	container := spec["containers"].([]any)[0].(map[string]any)
	checks := map[string][2]any{
		"image":           {container["image"], "registry.example/topoalign:v9"},
		"imagePullPolicy": {container["imagePullPolicy"], "IfNotPresent"},
		"args":            {container["args"], []any{"agent", "--follow-kubelet", "--kubelet-dir=/data/kubelet", "--pod-resources=/data/kubelet/pod-resources/kubelet.sock", "--socket=/run/topoalign/follower.sock", "--follow-listen=0.0.0.0:9797", "--nrt-publish", "--nrt-node-name=$(NODE_NAME)", "--log-format=text", "--resync-interval=30"}},
		"hostPID":         {spec["hostPID"], nil},
		"events rule":     {len(index["rbac.authorization.k8s.io/v1 ClusterRole ta-topoalign-follower"].Object["rules"].([]any)), 2},
		"port":            {container["ports"], []any{map[string]any{"name": "http", "containerPort": float64(9797)}}},
		// Helm merges maps with the defaults (`limits: null` removes).
		"resources":         {container["resources"], map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "64Mi"}, "limits": map[string]any{"memory": "256Mi"}}},
		"tolerations":       {spec["tolerations"], []any{map[string]any{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}}},
		"nodeSelector":      {spec["nodeSelector"], map[string]any{"topoalign.io/numa": "true"}},
		"kubelet mount":     {container["volumeMounts"].([]any)[0].(map[string]any)["mountPath"], "/data/kubelet"},
		"kubelet hostPath":  {spec["volumes"].([]any)[0].(map[string]any)["hostPath"].(map[string]any)["path"], "/data/kubelet"},
		"service account":   {spec["serviceAccountName"], "ta-topoalign-follower"},
		"binding's subject": {index["rbac.authorization.k8s.io/v1 ClusterRoleBinding ta-topoalign-follower"].Object["subjects"], []any{map[string]any{"kind": "ServiceAccount", "name": "ta-topoalign-follower", "namespace": "topoalign"}}},
	}
	for what, c := range checks {
		if !reflect.DeepEqual(c[0], c[1]) {
			t.Errorf("follower %s: %s, want %s", what, compact(c[0]), compact(c[1]))
		}
	}
	config, args := schedulerParts(t, index, "ta-topoalign-scheduler", "topoalign")
	wantArgs := []any{"extender", "--nrt-from-cluster", "--listen=127.0.0.1:9999", "--create-bindings", "--choose-in-filter", "--scoring=LeastNUMANodes"}
	if !reflect.DeepEqual(args, wantArgs) {
		t.Errorf("extender arguments %v, want %v", args, wantArgs)
	}
	extender := config["extenders"].([]any)[0].(map[string]any)
	if extender["urlPrefix"] != "http://127.0.0.1:9999" || extender["bindVerb"] != "bind" || !reflect.DeepEqual(extender["managedResources"], values["scheduler"].(map[string]any)["extender"].(map[string]any)["managedResources"]) {
		t.Errorf("the scheduler's extender entry %s does not follow the values", compact(extender))
	}
	if name := config["profiles"].([]any)[0].(map[string]any)["schedulerName"]; name != "numa-scheduler" {
		t.Errorf("profile %v, want numa-scheduler", name)
	}
}

func keys(index map[string]*unstructured.Unstructured) []string {
	out := make([]string, 0, len(index))
	for k := range index {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// `helm lint`'s rules (Chart.yaml, values, templates rendered and checked
// as Kubernetes objects, dependencies) find nothing worse than advice,
// with the defaults and with every component on.
func TestHelmLint(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults":  nil,
		"scheduler": {"scheduler": map[string]any{"enabled": true, "extender": map[string]any{"bind": true, "chooseInFilter": true, "draAlign": true}}},
	} {
		linter := lint.AllWithKubeVersion(chartDir(), values, "kube-system", &chartKubeVersion)
		for _, m := range linter.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: %s", name, m)
			} else {
				t.Logf("%s: %s", name, m)
			}
		}
	}
}

// values.schema.json refuses what Helm would otherwise ignore or render
// into a broken object: a misspelt key, a port out of range, an unknown
// scoring.
func TestHelmValuesSchema(t *testing.T) {
	chart, err := loader.Load(chartDir())
	if err != nil {
		t.Fatal(err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartKubeVersion
	options := chartutil.ReleaseOptions{Name: "topoalign", Namespace: "kube-system", IsInstall: true}
	for _, bad := range []struct {
		values map[string]any
		named  string
	}{
		{map[string]any{"follower": map[string]any{"kubeletdir": "/data/kubelet"}}, "kubeletdir"},
		{map[string]any{"follower": map[string]any{"port": 70000}}, "port"},
		{map[string]any{"scheduler": map[string]any{"extender": map[string]any{"scoring": "MostNUMA"}}}, "scoring"},
		{map[string]any{"imagee": map[string]any{"tag": "v1"}}, "imagee"},
	} {
		_, err := chartutil.ToRenderValues(chart, bad.values, options, caps)
		if err == nil || !strings.Contains(err.Error(), bad.named) {
			t.Errorf("values %s: error %v, want one naming %q", compact(bad.values), err, bad.named)
		}
	}
}

// applyOrder ranks kinds as Helm installs them (CRDs, identities and
// permissions, configuration, workloads).
var applyOrder = []string{"CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Service", "DaemonSet", "Deployment"}

func sortForApply(t *testing.T, objects []*unstructured.Unstructured) {
	t.Helper()
	rank := func(o *unstructured.Unstructured) int {
		i := slices.Index(applyOrder, o.GetKind())
		if i < 0 {
			t.Fatalf("%s: a kind the install test does not order", objectKey(o))
		}
		return i
	}
	sort.SliceStable(objects, func(i, j int) bool { return rank(objects[i]) < rank(objects[j]) })
}

// The chart installs on the real API server. Its default objects
// (deploy/'s, in kube-system) pass a server-side dry run. A second release
// with every component — the scheduler Deployment with bindVerb, in a
// namespace of its own — is applied for real: every object is stored as
// rendered and the CRD is Established; then, without kubelets to run the
// pods, their processes run here with the chart's identities and
// configuration: kube-scheduler with the ConfigMap's
// KubeSchedulerConfiguration (only the in-cluster connection replaced by
// a kubeconfig of the chart's extender service account), `topoalign
// extender` with the Deployment's arguments and that account, nodes
// published with the chart's agent account. A 7-CPU Guaranteed pod for
// the chart's scheduler is bound by the extender (its /bind, the chart's
// RBAC) to the node whose single-numa-node kubelet admits it, never to
// the fragmented one.
func TestHelmChartInstalls(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	c := admin(t)

	// The defaults: server-side dry run (objects equal to deploy/'s, which
	// other tests apply for real).
	defaults := renderChart(t, "topoalign", "kube-system", nil)
	sortForApply(t, defaults)
	for _, o := range defaults {
		if o.GetKind() == "CustomResourceDefinition" {
			// Applied for real below: a dry run of objects of its kind
			// needs it installed.
			continue
		}
		if _, err := c.apply(ctx, o, true); err != nil {
			t.Errorf("defaults: %s refused (dry run): %v", objectKey(o), err)
		}
	}

	const release, ns, schedulerName = "helm-e2e", "topoalign-helm-e2e", "helm-e2e-scheduler"
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{"scheduler": map[string]any{
		"enabled": true, "name": schedulerName,
		"extender": map[string]any{"port": ports[0], "bind": true, "scoring": "LeastNUMANodes", "nrtPoll": 1},
	}}
	objects := renderChart(t, release, ns, values)
	sortForApply(t, objects)
	namespace(t, ctx, c, ns)
	t.Cleanup(func() {
		for _, o := range slices.Backward(objects) {
			if o.GetKind() == "CustomResourceDefinition" || o.GetNamespace() == ns {
				continue // shared with other tests; the namespace's go with it
			}
			if resource, err := c.resource(o); err == nil {
				_ = resource.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
			}
		}
		_ = c.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	for _, o := range objects {
		stored, err := c.apply(ctx, o, false)
		if err != nil {
			t.Fatalf("%s refused: %v", objectKey(o), err)
		}
		if o.GetKind() == "CustomResourceDefinition" {
			c.crdEstablished(t, ctx, o.GetName())
		}
		// Stored as rendered: every field the chart sets reads back equal
		// (the API server adds defaults and status, removes nothing).
		sent := pruneNulls(plainJSON(o.Object))
		for _, d := range labelledDiffs("the chart", "the API server", objectKey(o), sent, subsetOf(sent, plainJSON(stored.Object))) {
			t.Errorf("stored differently: %s", d)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	index := byKey(t, "the chart", objects)
	config, extenderArgs := schedulerParts(t, index, release+"-topoalign-scheduler", ns)

	// The chart's identities.
	account := func(name string) string {
		return kubeconfigFor(t, name, c.serviceAccountToken(t, ctx, ns, name))
	}
	extenderKubeconfig := account(release + "-topoalign-extender")
	agentKubeconfig := account(release + "-topoalign-agent")

	// Nodes, published with the agent's account.
	fragmented := "helm-e2e-fragmented"
	nodes := []testNode{{"helm-e2e-a", "examples/nodes/two-numa.yaml"}, {fragmented, "examples/nodes/two-numa-fragmented.yaml"}}
	for _, n := range nodes {
		createNode(t, ctx, c, n.name)
		out := runTopoalign(t, ctx, []string{"KUBECONFIG=" + agentKubeconfig}, "nrt", n.scenario, "--name", n.name, "--publish")
		if out.code != 0 {
			t.Fatalf("publishing %s with the chart's agent account: exit %d: %s", n.name, out.code, out.stderr)
		}
		t.Cleanup(func() { c.deleteNRT(t, context.Background(), n.name) })
	}

	// The extender container, as the Deployment runs it.
	args := make([]string, 0, len(extenderArgs))
	for _, a := range extenderArgs {
		args = append(args, a.(string))
	}
	dir := t.TempDir()
	extender, err := controlplane.StartProcess("helm-e2e-extender", topoalign, args, []string{"KUBECONFIG=" + extenderKubeconfig}, filepath.Join(dir, "extender.log"))
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, extender)
	url := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	// Every stored object, ours and any another test left: the extender
	// must have read ours before the pod is offered.
	stored, err := c.dynamic.Resource(nrtGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	extenderKnows(t, ctx, extender, url, "the chart's extender reads the nodes", func(known int) bool { return known >= len(stored.Items) })

	// kube-scheduler with the ConfigMap's configuration.
	config["clientConnection"] = map[string]any{"kubeconfig": extenderKubeconfig}
	data, err := yaml.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	scheduler, err := cp.StartScheduler(ctx, "helm-e2e-kube-scheduler", bins.Scheduler, configPath)
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, scheduler)

	pod := guaranteedPod(ns, "seven-cpus", 7, "2Gi")
	pod.Spec.SchedulerName = schedulerName
	if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the pod bound by the chart's scheduler and extender", func() (bool, string) {
		p, err := c.kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.NodeName != "", fmt.Sprintf("conditions %+v", p.Status.Conditions)
	})
	p, err := c.kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s bound to %s by the chart's scheduler and extender", pod.Name, p.Spec.NodeName)
	if p.Spec.NodeName != "helm-e2e-a" {
		t.Errorf("bound to %s, want helm-e2e-a (the fragmented node's kubelet would refuse 7 CPUs)", p.Spec.NodeName)
	}
	metrics, err := controlplane.Metrics(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"filter", "bind"} {
		if !extenderCalled(metrics, verb) {
			t.Errorf("the extender's /metrics count no %s call:\n%s", verb, metrics)
		}
	}
	// The lease of the chart's leader election, held.
	lease, err := c.kube.CoordinationV1().Leases(ns).Get(ctx, schedulerName, metav1.GetOptions{})
	if err != nil {
		t.Errorf("the scheduler's lease %s/%s: %v", ns, schedulerName, err)
	} else if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("lease %s/%s held by no one", ns, schedulerName)
	}

	// The follower's account may do what the follower does, and no more.
	follower := "system:serviceaccount:" + ns + ":" + release + "-topoalign-follower"
	for _, check := range []struct {
		verb, group, resource string
		allowed               bool
	}{
		{"watch", "", "pods", true},
		{"create", "topology.node.k8s.io", "noderesourcetopologies", true},
		{"patch", "topology.node.k8s.io", "noderesourcetopologies", true},
		{"delete", "topology.node.k8s.io", "noderesourcetopologies", false},
		{"list", "", "secrets", false},
	} {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               follower,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: check.verb, Group: check.group, Resource: check.resource},
		}}
		answer, err := c.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if answer.Status.Allowed != check.allowed {
			t.Errorf("follower %s %s.%s: allowed %v, want %v (%s)", check.verb, check.resource, check.group, answer.Status.Allowed, check.allowed, answer.Status.Reason)
		}
	}
	for _, kind := range []string{"DaemonSet", "Deployment"} {
		found := false
		for _, o := range objects {
			found = found || o.GetKind() == kind
		}
		if !found {
			t.Errorf("no %s in the release", kind)
		}
	}
	if _, err := c.kube.AppsV1().DaemonSets(ns).Get(ctx, release+"-topoalign-follower", metav1.GetOptions{}); err != nil {
		t.Errorf("the follower DaemonSet: %v", err)
	}
	if _, err := c.kube.AppsV1().Deployments(ns).Get(ctx, release+"-topoalign-scheduler", metav1.GetOptions{}); err != nil {
		t.Errorf("the scheduler Deployment: %v", err)
	}
}

// extenderCalled tells whether the extender's /metrics text counts a
// call of verb.
func extenderCalled(metrics, verb string) bool {
	for _, line := range strings.Split(metrics, "\n") {
		series, value, found := strings.Cut(line, " ")
		if !found || !strings.HasPrefix(series, "topoalign_extender_request_duration_seconds_count{") || !strings.Contains(series, `verb="`+verb+`"`) {
			continue
		}
		if n, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil && n > 0 {
			return true
		}
	}
	return false
}

// crdEstablished waits until the CRD name is Established.
func (c *clients) crdEstablished(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	eventually(t, ctx, name+" Established", func() (bool, string) {
		crd, err := c.extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, condition := range crd.Status.Conditions {
			if condition.Type == apiextensionsv1.Established && condition.Status == apiextensionsv1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %+v", crd.Status.Conditions)
	})
}

// subsetOf is got restricted to the fields want has (a stored object
// carries defaults, metadata and status the manifest does not set).
func subsetOf(want, got any) any {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return got
		}
		out := map[string]any{}
		for k, wv := range w {
			if gv, ok := g[k]; ok {
				out[k] = subsetOf(wv, gv)
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return got
		}
		out := make([]any, len(g))
		for i := range g {
			out[i] = subsetOf(w[i], g[i])
		}
		return out
	default:
		return got
	}
}

// pruneNulls is value without its null map entries (a manifest's
// `creationTimestamp: null` sets nothing).
func pruneNulls(value any) any {
	switch v := value.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if e != nil {
				out[k] = pruneNulls(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = pruneNulls(e)
		}
		return out
	default:
		return value
	}
}
