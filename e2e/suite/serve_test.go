package suite

// `topoalign serve` against the real API server, run as
// deploy/topoalign-serve.yaml runs it: with the token of its
// ServiceAccount (that file's RBAC, applied), its page names the
// simulated nodes and, on a node's page, the running pod with its
// exclusive CPUs; with the token of an account that has no role, the
// page and the log say the API server's refusal instead of showing an
// empty cluster.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"topoalign/e2e/controlplane"
)

// startServe starts `topoalign serve` with kubeconfig, reading the API
// server every 0.2 s, and returns its base URL and process.
func startServe(t *testing.T, name, kubeconfig string) (string, *controlplane.Process) {
	t.Helper()
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	listen := "127.0.0.1:" + strconv.Itoa(ports[0])
	args := []string{"serve", "--kubeconfig", kubeconfig, "--poll", "0.2", "--listen", listen}
	p, err := controlplane.StartProcess(name, topoalign, args, nil, filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, p)
	return "http://" + listen, p
}

// getPage GETs url; an error (the server not listening yet) is an answer
// that holds nothing.
func getPage(ctx context.Context, url string) (int, string, error) {
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		return 0, "", err
	}
	defer response.Body.Close()
	body, err := io.ReadAll(response.Body)
	return response.StatusCode, string(body), err
}

// cpuCount is the number of CPUs of a Linux CPU list ("1-2,9").
func cpuCount(list string) (int, error) {
	count := 0
	for part := range strings.SplitSeq(list, ",") {
		low, high, isRange := strings.Cut(part, "-")
		if !isRange {
			high = low
		}
		a, err := strconv.Atoi(low)
		if err != nil {
			return 0, fmt.Errorf("CPU list %q: %v", list, err)
		}
		b, err := strconv.Atoi(high)
		if err != nil || b < a {
			return 0, fmt.Errorf("CPU list %q: bad range %q", list, part)
		}
		count += b - a + 1
	}
	return count, nil
}

func TestServe(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c := admin(t)
	names := simulatedNodes(t, ctx, c, "e2e/testdata/serve-fleet.yaml", "e2e-serve", 2)
	first := names[0]
	ns := "e2e-serve"
	namespace(t, ctx, c, ns)

	// A 2-CPU Guaranteed pod running on the first node, held in its
	// published exact state.
	pod := guaranteedPod(ns, "pinned", 2, "1Gi")
	pod.Spec.NodeName = first
	if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := podsUntil(t, ctx, c, ns, "pinned decided", func(pods map[string]*corev1.Pod) bool {
		return pods["pinned"] != nil && podOutcome(pods["pinned"]) != "Pending"
	})
	if pods["pinned"].Status.Phase != corev1.PodRunning {
		t.Fatalf("pinned: %s, want Running", podOutcomeOrNil(pods["pinned"]))
	}
	eventually(t, ctx, first+"'s NRT object holds the pod", func() (bool, string) {
		held, err := nrtPods(ctx, c, first)
		return err == nil && len(held) == 1, fmt.Sprintf("%v %v", held, err)
	})

	t.Run("with deploy/'s RBAC", func(t *testing.T) {
		c.applyFile(t, ctx, "topoalign-serve.yaml")
		kubeconfig := kubeconfigFor(t, "topoalign-serve", c.serviceAccountToken(t, ctx, "kube-system", "topoalign-serve"))
		url, p := startServe(t, "topoalign-serve", kubeconfig)

		var fleet string
		eventually(t, ctx, "the fleet page names both nodes", func() (bool, string) {
			if exited, err := p.Exited(); exited {
				t.Fatalf("topoalign serve exited (%v):\n%s", err, controlplane.Tail(p.Log, 30))
			}
			code, body, err := getPage(ctx, url+"/")
			if err != nil || code != http.StatusOK {
				return false, fmt.Sprintf("%d %v", code, err)
			}
			fleet = body
			for _, name := range names {
				if !strings.Contains(body, `data-node="`+name+`"`) {
					return false, name + " not on the page"
				}
			}
			return true, ""
		})
		if strings.Contains(fleet, `class="notice"`) {
			t.Errorf("the page carries a notice with the serve account's RBAC:\n%s", fleet)
		}

		row := regexp.MustCompile(`<tr class="pod" data-pod="` + regexp.QuoteMeta(ns+"/pinned") + `"[^>]*data-cpus="([^"]*)"`)
		var cpus string
		eventually(t, ctx, first+"'s page shows the pod with its CPUs", func() (bool, string) {
			code, body, err := getPage(ctx, url+"/node/"+first)
			if err != nil || code != http.StatusOK {
				return false, fmt.Sprintf("%d %v", code, err)
			}
			m := row.FindStringSubmatch(body)
			if m == nil || m[1] == "" {
				return false, "no row of " + ns + "/pinned with CPUs"
			}
			cpus = m[1]
			return true, ""
		})
		// The pod asks for 2 CPUs (Guaranteed, integral): the CPU
		// manager's static policy gives it 2 exclusive CPUs.
		if n, err := cpuCount(cpus); err != nil || n != 2 {
			t.Errorf("%s/pinned's CPUs %q: %d CPUs (%v), want 2", ns, cpus, n, err)
		}
		t.Logf("%s/pinned on %s: CPUs %s", ns, first, cpus)
	})

	t.Run("without RBAC", func(t *testing.T) {
		const account = "topoalign-serve-no-role"
		kubeconfig := kubeconfigFor(t, account, c.serviceAccountToken(t, ctx, ns, account))
		url, p := startServe(t, "topoalign-serve-no-role", kubeconfig)
		var page string
		eventually(t, ctx, "the page says the API server's refusal", func() (bool, string) {
			if exited, err := p.Exited(); exited {
				t.Fatalf("topoalign serve exited (%v):\n%s", err, controlplane.Tail(p.Log, 30))
			}
			code, body, err := getPage(ctx, url+"/")
			if err != nil || code != http.StatusOK {
				return false, fmt.Sprintf("%d %v", code, err)
			}
			page = body
			return strings.Contains(body, `class="notice"`), "no notice on the page"
		})
		notice := regexp.MustCompile(`<p class="notice"[^>]*>([^<]*)</p>`).FindStringSubmatch(page)
		if notice == nil {
			t.Fatalf("no notice paragraph:\n%s", page)
		}
		t.Logf("notice: %s", notice[1])
		for _, want := range []string{"forbidden", account, "nodes"} {
			if !strings.Contains(notice[1], want) {
				t.Errorf("notice %q does not say %q", notice[1], want)
			}
		}
		if strings.Contains(page, `data-node="`) {
			t.Errorf("the page shows nodes it may not read:\n%s", page)
		}
		log, err := os.ReadFile(p.Log)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), "forbidden") {
			t.Errorf("the log does not say the refusal:\n%s", log)
		}
	})
}
