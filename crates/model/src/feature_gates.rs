//! [`FeatureGates`]: the kubelet feature gates that change how nodes align
//! resources, with their Kubernetes v1.32 defaults.

/// Feature gates relevant to topology alignment (Kubernetes v1.32 defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    /// `CPUManagerPolicyOptions` (GA in 1.33, beta and on in 1.32).
    pub cpu_manager_policy_options: bool,
    /// `CPUManagerPolicyBetaOptions` (beta, on).
    pub cpu_manager_policy_beta_options: bool,
    /// `CPUManagerPolicyAlphaOptions` (alpha, off).
    pub cpu_manager_policy_alpha_options: bool,
    /// `TopologyManagerPolicyOptions` (GA, on).
    pub topology_manager_policy_options: bool,
    /// `TopologyManagerPolicyBetaOptions` (beta, on).
    pub topology_manager_policy_beta_options: bool,
    /// `TopologyManagerPolicyAlphaOptions` (alpha, off).
    pub topology_manager_policy_alpha_options: bool,
    /// `MemoryManager` (beta, on).
    pub memory_manager: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        FeatureGates {
            cpu_manager_policy_options: true,
            cpu_manager_policy_beta_options: true,
            cpu_manager_policy_alpha_options: false,
            topology_manager_policy_options: true,
            topology_manager_policy_beta_options: true,
            topology_manager_policy_alpha_options: false,
            memory_manager: true,
        }
    }
}
