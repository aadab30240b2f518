//! The flags of every command that reads a kubelet (`diagnose`, `agent
//! --follow-kubelet`, `verify`): one spelling, one default, resolved into
//! a `topoalign_observe::KubeletDir`.

use std::path::PathBuf;

use topoalign_observe::{DEFAULT_ROOT, KubeletDir};

/// Where a kubelet keeps its state.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct KubeletDirArgs {
    /// The kubelet's root directory (its --root-dir), or a copy of it:
    /// cpu_manager_state, memory_manager_state,
    /// device-plugins/kubelet_internal_checkpoint, and config.yaml (else
    /// kubelet-config.yaml), the default --kubelet-config. Default:
    /// /var/lib/kubelet.
    #[arg(long, value_name = "DIR", alias = "kubelet-root-dir")]
    pub kubelet_dir: Option<PathBuf>,
    /// The kubelet's PodResources API socket. Default:
    /// DIR/pod-resources/kubelet.sock.
    #[arg(long, value_name = "SOCKET", alias = "pod-resources-socket")]
    pub pod_resources: Option<PathBuf>,
    /// The node's pods (a v1 List or Pod documents: `kubectl get pods -o
    /// yaml --field-selector spec.nodeName=NODE`), naming the pods behind
    /// the state's UIDs. Default: DIR/pods.yaml when it exists (diagnose,
    /// verify); the follower watches the API server.
    #[arg(long, value_name = "FILE", alias = "pods-file")]
    pub pods: Option<PathBuf>,
}

impl KubeletDirArgs {
    /// The directory and socket named (or their defaults).
    pub fn dir(&self) -> KubeletDir {
        KubeletDir::new(
            self.kubelet_dir.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT)),
            self.pod_resources.clone(),
        )
    }

    /// Whether any of the flags was given.
    pub fn any_given(&self) -> bool {
        self.kubelet_dir.is_some() || self.pod_resources.is_some() || self.pods.is_some()
    }
}
