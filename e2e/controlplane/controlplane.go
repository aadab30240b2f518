// Package controlplane starts a real Kubernetes control plane for the
// end-to-end tests: etcd and kube-apiserver (and, on request,
// kube-scheduler) built from their Go modules by build-tools.sh, on
// 127.0.0.1 and free ports, with generated certificates, static tokens,
// RBAC authorization and a service-account signing key (so TokenRequest
// works). No kubelet, no controller manager, no container runtime.
//
// Every process is stopped by Stop, on SIGINT/SIGTERM (StopOnSignal), and
// by the kernel if the test binary dies (Pdeathsig).
package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// serviceIP is the first address of the service range: the in-cluster
// "kubernetes" service, which the serving certificate also names.
const serviceIP = "10.0.0.1"

// Binaries are the executables of the control plane, from the
// environment build-tools.sh prints (run.sh exports it).
type Binaries struct {
	Etcd      string
	APIServer string
	Scheduler string
	// SchedulerPlugins is the scheduler-plugins scheduler.
	SchedulerPlugins string
}

// BinariesFromEnv finds the binaries; an error names every one that is
// missing and how to build it.
func BinariesFromEnv() (Binaries, error) {
	b := Binaries{
		Etcd:             os.Getenv("TOPOALIGN_E2E_ETCD"),
		APIServer:        os.Getenv("TOPOALIGN_E2E_KUBE_APISERVER"),
		Scheduler:        os.Getenv("TOPOALIGN_E2E_KUBE_SCHEDULER"),
		SchedulerPlugins: os.Getenv("TOPOALIGN_E2E_SCHEDULER_PLUGINS"),
	}
	var missing []string
	for variable, path := range map[string]string{
		"TOPOALIGN_E2E_ETCD":              b.Etcd,
		"TOPOALIGN_E2E_KUBE_APISERVER":    b.APIServer,
		"TOPOALIGN_E2E_KUBE_SCHEDULER":    b.Scheduler,
		"TOPOALIGN_E2E_SCHEDULER_PLUGINS": b.SchedulerPlugins,
	} {
		if path == "" {
			missing = append(missing, "$"+variable+" is not set")
		} else if _, err := os.Stat(path); err != nil {
			missing = append(missing, "$"+variable+": "+err.Error())
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return b, fmt.Errorf("control-plane binaries missing (run e2e/run.sh, or e2e/build-tools.sh and export what it prints): %s", strings.Join(missing, "; "))
	}
	return b, nil
}

// ControlPlane is a running etcd + kube-apiserver.
type ControlPlane struct {
	// Dir holds certificates, kubeconfigs, data and logs.
	Dir string
	// URL of the API server (https://127.0.0.1:PORT).
	URL string
	// CAPEM is the certificate authority of the API server's certificate.
	CAPEM []byte
	// AdminToken authenticates as a member of system:masters.
	AdminToken string
	// SchedulerToken authenticates as system:kube-scheduler.
	SchedulerToken string
	// AdminKubeconfig is a kubeconfig file for AdminToken.
	AdminKubeconfig string
	// EtcdURL is etcd's client URL (http://127.0.0.1:PORT): what the API
	// server stored, read without it.
	EtcdURL string

	bins      Binaries
	etcd      *Process
	apiserver *Process
	// apiserverArgs start the API server again (RestartAPIServer) on
	// the same port, certificates and etcd.
	apiserverArgs []string
}

// Start brings up etcd and kube-apiserver under dir and waits until the
// API server is ready (at most two minutes).
func Start(ctx context.Context, bins Binaries, dir string) (*ControlPlane, error) {
	cp := &ControlPlane{Dir: dir, bins: bins}
	ok := false
	defer func() {
		if !ok {
			cp.Stop()
		}
	}()
	creds, err := newCredentials(dir)
	if err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	cp.CAPEM, cp.AdminToken, cp.SchedulerToken = creds.caPEM, creds.adminToken, creds.schedulerToken

	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	cp.EtcdURL = etcdClient
	etcdPeer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	cp.etcd, err = StartProcess("etcd", bins.Etcd, []string{
		"--name=e2e",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdClient,
		"--advertise-client-urls=" + etcdClient,
		"--listen-peer-urls=" + etcdPeer,
		"--initial-advertise-peer-urls=" + etcdPeer,
		"--initial-cluster=e2e=" + etcdPeer,
		// A throwaway store: durability buys nothing here and fsyncs
		// dominate on small disks.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}, nil, filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, err
	}

	cp.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	cp.apiserverArgs = []string{
		"--etcd-servers=" + etcdClient,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file=" + creds.certFile,
		"--tls-private-key-file=" + creds.keyFile,
		"--client-ca-file=" + creds.caFile,
		"--token-auth-file=" + creds.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + creds.saKeyFile,
		"--service-account-signing-key-file=" + creds.saKeyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		// The "kubernetes" service's endpoints may not be a loopback
		// address, and nothing in-cluster needs them.
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}
	cp.apiserver, err = cp.startAPIServer()
	if err != nil {
		return nil, err
	}

	cp.AdminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := cp.WriteKubeconfig(cp.AdminKubeconfig, "admin", cp.AdminToken); err != nil {
		return nil, err
	}
	if err := cp.waitReady(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	ok = true
	return cp, nil
}

func (cp *ControlPlane) startAPIServer() (*Process, error) {
	return StartProcess("kube-apiserver", cp.bins.APIServer, cp.apiserverArgs, nil, filepath.Join(cp.Dir, "kube-apiserver.log"))
}

// KillAPIServer kills the API server with SIGKILL (no graceful shutdown:
// open watches and connections just break) and waits until it is gone;
// etcd keeps running.
func (cp *ControlPlane) KillAPIServer() {
	cp.apiserver.Kill()
}

// RestartAPIServer starts the API server again after KillAPIServer, with
// the same arguments (port, certificates, tokens, etcd: every client's
// configuration stays valid), and waits until it is ready.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	if exited, _ := cp.apiserver.Exited(); !exited {
		return errors.New("kube-apiserver is still running: kill it first")
	}
	p, err := cp.startAPIServer()
	if err != nil {
		return err
	}
	cp.apiserver = p
	return cp.waitReady(ctx, 2*time.Minute)
}

// waitReady polls /readyz until it answers 200, failing early when etcd
// or the API server exits.
func (cp *ControlPlane) waitReady(ctx context.Context, limit time.Duration) error {
	client := cp.httpClient()
	deadline := time.Now().Add(limit)
	last := "no answer yet"
	for {
		for _, p := range []*Process{cp.etcd, cp.apiserver} {
			if exited, err := p.Exited(); exited {
				return fmt.Errorf("%s exited during start-up (%v); log: %s\n%s", p.Name, err, p.Log, Tail(p.Log, 30))
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+cp.AdminToken)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready within %v (last: %s); log: %s\n%s", limit, last, cp.apiserver.Log, Tail(cp.apiserver.Log, 30))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (cp *ControlPlane) httpClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.CAPEM)
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
}

// RESTConfig is a client configuration authenticating with token.
func (cp *ControlPlane) RESTConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            cp.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.CAPEM},
		QPS:             200,
		Burst:           400,
	}
}

// WriteKubeconfig writes a kubeconfig for this API server, authenticating
// as user with token.
func (cp *ControlPlane) WriteKubeconfig(path, user, token string) error {
	config := clientcmdapi.NewConfig()
	config.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.CAPEM}
	config.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	config.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: user}
	config.CurrentContext = "e2e"
	return clientcmd.WriteToFile(*config, path)
}

// Stop stops the API server, then etcd.
func (cp *ControlPlane) Stop() error {
	var errs []error
	for _, p := range []*Process{cp.apiserver, cp.etcd} {
		if p != nil {
			errs = append(errs, p.Stop())
		}
	}
	return errors.Join(errs...)
}

// FreePorts returns n distinct ports free on 127.0.0.1 at the time of the
// call (the listeners are closed before the ports are handed out).
func FreePorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("no free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Tail is the last n lines of the file at path (for failure reports).
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
