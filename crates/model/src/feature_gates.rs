//! [`FeatureGates`]: the kubelet feature gates that change how nodes align
//! resources, with their Kubernetes v1.32 defaults.

use crate::KubeletVersion;

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
    /// `PodLevelResources` as set in the configuration; `None` leaves it at
    /// the release's default (alpha and off in 1.32 and 1.33, beta and on
    /// from 1.34): read it through [`FeatureGates::pod_level_resources`].
    pub pod_level_resources_set: Option<bool>,
    /// `PodLevelResourcesFixDefaulting` as set (1.37+, beta and on): the
    /// pod-level defaulting moved from core/v1 defaulting to the API
    /// server's create step, so the kubelet's own defaulting no longer
    /// touches `spec.resources`. Read it through
    /// [`FeatureGates::pod_level_defaulting_moved`].
    pub pod_level_fix_defaulting_set: Option<bool>,
    /// `PodLevelResourcesFixKubeletQOSClass` as set (1.37+, beta and on):
    /// `spec.resources` without `cpu`, `memory` or huge pages leaves the QoS
    /// class to the containers. Read it through
    /// [`FeatureGates::pod_level_qos_needs_set_resources`].
    pub pod_level_fix_qos_set: Option<bool>,
    /// `PodLevelResourceManagers` as set (1.36 alpha, 1.37 beta, off by
    /// default; unknown before 1.36): the CPU and memory managers give a pod
    /// with pod-level resources a pod-level assignment ("bubble"). Read it
    /// through [`FeatureGates::pod_level_managers`].
    pub pod_level_managers_set: Option<bool>,
    /// `InPlacePodVerticalScaling` as set (alpha and off in 1.32, beta and
    /// on from 1.33, GA and locked from 1.35): whether the kubelet acts on
    /// an in-place resize. Read it through [`FeatureGates::in_place_resize`].
    pub in_place_resize_set: Option<bool>,
    /// `InPlacePodVerticalScalingExclusiveCPUs` (alpha, off): resizes of
    /// Guaranteed pods under the static CPU policy are not refused.
    pub in_place_resize_exclusive_cpus: bool,
    /// `InPlacePodVerticalScalingExclusiveMemory` (1.34+, alpha, off):
    /// resizes of Guaranteed pods under the `Static` memory policy are not
    /// refused.
    pub in_place_resize_exclusive_memory: bool,
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
            pod_level_resources_set: None,
            pod_level_fix_defaulting_set: None,
            pod_level_fix_qos_set: None,
            pod_level_managers_set: None,
            in_place_resize_set: None,
            in_place_resize_exclusive_cpus: false,
            in_place_resize_exclusive_memory: false,
        }
    }
}

impl FeatureGates {
    /// Whether `PodLevelResources` is on for a kubelet of `version`.
    pub fn pod_level_resources(&self, version: KubeletVersion) -> bool {
        self.pod_level_resources_set
            .unwrap_or(version.at_least(KubeletVersion::V1_34))
    }

    /// Whether the kubelet's pod defaulting leaves `spec.resources` as
    /// written (`PodLevelResourcesFixDefaulting`, on by default from 1.37).
    pub fn pod_level_defaulting_moved(&self, version: KubeletVersion) -> bool {
        self.pod_level_fix_defaulting_set
            .unwrap_or(version.at_least(KubeletVersion::V1_37))
    }

    /// Whether pod-level resources decide the QoS class only when one of
    /// `cpu`, `memory` or huge pages is set (`PodLevelResourcesFixKubeletQOSClass`,
    /// on by default from 1.37); before, any `spec.resources` decided.
    pub fn pod_level_qos_needs_set_resources(&self, version: KubeletVersion) -> bool {
        self.pod_level_fix_qos_set
            .unwrap_or(version.at_least(KubeletVersion::V1_37))
    }

    /// Whether the CPU and memory managers manage pods with pod-level
    /// resources at the pod level (`PodLevelResourceManagers`, off by
    /// default, 1.36+; it needs `PodLevelResources`).
    pub fn pod_level_managers(&self, version: KubeletVersion) -> bool {
        self.pod_level_managers_set.unwrap_or(false)
            && version.at_least(KubeletVersion::V1_36)
            && self.pod_level_resources(version)
    }

    /// Whether a kubelet of `version` acts on in-place resizes
    /// (`InPlacePodVerticalScaling`, on by default from 1.33).
    pub fn in_place_resize(&self, version: KubeletVersion) -> bool {
        self.in_place_resize_set
            .unwrap_or(version.at_least(KubeletVersion::V1_33))
    }
}
