package controlplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"time"
)

// StartScheduler starts the kube-scheduler at binary with the
// KubeSchedulerConfiguration at config (whose clientConnection names a
// kubeconfig for this API server), serving its health endpoints on a free
// port (Process.URL; /metrics readable there without credentials, for the
// benchmark), and waits until it reports ready. name tells its files apart.
func (cp *ControlPlane) StartScheduler(ctx context.Context, name, binary, config string) (*Process, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(cp.Dir, name+".kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig, "system:kube-scheduler", cp.SchedulerToken); err != nil {
		return nil, err
	}
	p, err := StartProcess(name, binary, []string{
		"--config=" + config,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		"--cert-dir=" + filepath.Join(cp.Dir, name+"-certs"),
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
		"--v=2",
	}, nil, filepath.Join(cp.Dir, name+".log"))
	if err != nil {
		return nil, err
	}
	p.URL = fmt.Sprintf("https://127.0.0.1:%d", ports[0])
	url := p.URL + "/readyz"
	// The scheduler serves a self-signed certificate it made itself; only
	// its readiness is read here.
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // local readiness probe
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if exited, err := p.Exited(); exited {
			return nil, fmt.Errorf("%s exited during start-up (%v); log: %s\n%s", name, err, p.Log, Tail(p.Log, 30))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("%s not ready within a minute; log: %s\n%s", name, p.Log, Tail(p.Log, 30))
		}
		select {
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// SchedulerKubeconfig is the kubeconfig StartScheduler writes for name,
// to be named in that scheduler's clientConnection.
func (cp *ControlPlane) SchedulerKubeconfig(name string) string {
	return filepath.Join(cp.Dir, name+".kubeconfig")
}

// Metrics reads the Prometheus text a component started by the tests
// serves at base + "/metrics" (a certificate is not checked: a local
// read).
func Metrics(ctx context.Context, base string) (string, error) {
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // local read
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s/metrics: %w", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("%s/metrics: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s/metrics: %s: %s", base, resp.Status, body)
	}
	return string(body), nil
}
