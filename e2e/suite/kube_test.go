package suite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"topoalign/e2e/controlplane"
)

// clients of the admin identity.
type clients struct {
	kube       kubernetes.Interface
	dynamic    dynamic.Interface
	extensions apiextensions.Interface
	mapper     *restmapper.DeferredDiscoveryRESTMapper
}

func admin(t *testing.T) *clients {
	t.Helper()
	config := cp.RESTConfig(cp.AdminToken)
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	ext, err := apiextensions.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return &clients{kube, dyn, ext, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))}
}

func testContext(t *testing.T, limit time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	return ctx
}

// readManifests decodes the YAML documents of path (empty ones skipped).
func readManifests(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	decoder := yamlutil.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objects []*unstructured.Unstructured
	for {
		var object map[string]any
		if err := decoder.Decode(&object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(object) == 0 {
			continue
		}
		objects = append(objects, &unstructured.Unstructured{Object: object})
	}
	return objects
}

// resource finds the REST resource of object's kind (discovery, refreshed
// once when the kind is new, e.g. a CRD just installed).
func (c *clients) resource(object *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := object.GroupVersionKind()
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.mapper.Reset()
		mapping, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, err
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dynamic.Resource(mapping.Resource).Namespace(object.GetNamespace()), nil
	}
	return c.dynamic.Resource(mapping.Resource), nil
}

// apply server-side applies object as field manager "e2e" (only
// validated and admitted, not stored, when dryRun).
func (c *clients) apply(ctx context.Context, object *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	resource, err := c.resource(object)
	if err != nil {
		return nil, err
	}
	options := metav1.ApplyOptions{FieldManager: "e2e", Force: true}
	if dryRun {
		options.DryRun = []string{metav1.DryRunAll}
	}
	return resource.Apply(ctx, object.GetName(), object, options)
}

// applyFile applies every object of a file in deploy/.
func (c *clients) applyFile(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	for _, object := range readManifests(t, filepath.Join(repo, "deploy", name)) {
		if _, err := c.apply(ctx, object, false); err != nil {
			t.Fatalf("deploy/%s: %s %s: %v", name, object.GetKind(), object.GetName(), err)
		}
	}
}

var nrtGVR = schema.GroupVersionResource{Group: "topology.node.k8s.io", Version: "v1alpha2", Resource: "noderesourcetopologies"}

const nrtCRD = "noderesourcetopologies.topology.node.k8s.io"

// installCRD applies deploy/'s NRT CRD and waits until it is Established.
func (c *clients) installCRD(t *testing.T, ctx context.Context) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	c.applyFile(t, ctx, "noderesourcetopology-crd.yaml")
	var crd *apiextensionsv1.CustomResourceDefinition
	eventually(t, ctx, "the NRT CRD Established", func() (bool, string) {
		var err error
		crd, err = c.extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, nrtCRD, metav1.GetOptions{})
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
	return crd
}

// serviceAccountToken creates namespace/name (if missing) and returns a
// token for it from the TokenRequest API, as the kubelet would mount.
func (c *clients) serviceAccountToken(t *testing.T, ctx context.Context, namespace, name string) string {
	t.Helper()
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := c.kube.CoreV1().ServiceAccounts(namespace).Create(ctx, account, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	expiry := int64(3600)
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	token, err := c.kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, request, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", namespace, name, err)
	}
	return token.Status.Token
}

// kubeconfigFor writes a kubeconfig authenticating with token into the
// test's directory.
func kubeconfigFor(t *testing.T, user, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(path, user, token); err != nil {
		t.Fatal(err)
	}
	return path
}

// getNRT reads the NodeResourceTopology name.
func (c *clients) getNRT(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	return c.dynamic.Resource(nrtGVR).Get(ctx, name, metav1.GetOptions{})
}

// deleteNRT removes the object name if it exists.
func (c *clients) deleteNRT(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	err := c.dynamic.Resource(nrtGVR).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// result of one topoalign run.
type result struct {
	stdout, stderr string
	code           int
}

// runTopoalign runs the binary under test with args and extra environment.
func runTopoalign(t *testing.T, ctx context.Context, env []string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(ctx, topoalign, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = repo
	controlplane.DieWithParent(cmd)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("topoalign %s: %v", strings.Join(args, " "), err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// eventually polls probe every 100 ms until it holds, failing the test
// with probe's last explanation when ctx ends first.
func eventually(t *testing.T, ctx context.Context, what string, probe func() (bool, string)) {
	t.Helper()
	for {
		ok, why := probe()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not reached (%v); last: %s", what, ctx.Err(), why)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stopAtEnd stops p when the test ends, showing the end of its log if the
// test failed.
func stopAtEnd(t *testing.T, p *controlplane.Process) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log:\n%s", p.Name, controlplane.Tail(p.Log, 40))
		}
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	})
}
