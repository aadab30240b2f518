//! The `featureGates` map of a KubeletConfiguration, applied the way the
//! kubelet's feature gate (`component-base/featuregate`, v1.32 emulation)
//! applies it: unknown names and locked gates are refused with the
//! kubelet's text, `AllAlpha` / `AllBeta` switch whole maturity levels.
//!
//! Owns: the v1.32 gate names, which of them are locked, and the defaults
//! of the gates topoalign's behaviour depends on ([`FeatureGates`]).
//! Must not touch: what a gate changes (the managers read [`FeatureGates`]).

use std::collections::BTreeMap;

use topoalign_model::FeatureGates;

use crate::go;

/// Maturity of a gate at v1.32, which `AllAlpha` / `AllBeta` act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Maturity {
    Alpha,
    Beta,
    Ga,
    Deprecated,
}

/// What the kubelet's feature gate knows about one gate at v1.32.
#[derive(Clone, Copy, Debug)]
struct Spec {
    default: bool,
    maturity: Maturity,
    /// `LockToDefault`: setting it to anything else is an error.
    locked: bool,
}

const fn spec(default: bool, maturity: Maturity, locked: bool) -> Spec {
    Spec {
        default,
        maturity,
        locked,
    }
}

/// The gates that change alignment, with their v1.32 specs.
const ALIGNMENT_GATES: &[(&str, Spec)] = &[
    ("CPUManager", spec(true, Maturity::Ga, true)),
    ("CPUManagerPolicyAlphaOptions", spec(false, Maturity::Alpha, false)),
    ("CPUManagerPolicyBetaOptions", spec(true, Maturity::Beta, false)),
    ("CPUManagerPolicyOptions", spec(true, Maturity::Beta, false)),
    ("MemoryManager", spec(true, Maturity::Ga, true)),
    // Alpha in 1.32 and 1.33, beta and on from 1.34: its default is the
    // release's (`FeatureGates::pod_level_resources`).
    ("PodLevelResources", spec(false, Maturity::Alpha, false)),
    ("TopologyManagerPolicyAlphaOptions", spec(false, Maturity::Alpha, false)),
    ("TopologyManagerPolicyBetaOptions", spec(true, Maturity::Beta, false)),
    ("TopologyManagerPolicyOptions", spec(true, Maturity::Ga, false)),
    // Read by ValidateKubeletConfiguration.
    ("MemoryQoS", spec(false, Maturity::Alpha, false)),
    ("NodeLogQuery", spec(false, Maturity::Beta, false)),
    ("NodeSwap", spec(true, Maturity::Beta, false)),
    ("RotateKubeletServerCertificate", spec(true, Maturity::Beta, false)),
];

/// Gates locked to their default at v1.32 (other than the ones above).
const LOCKED_GATES: &[(&str, bool)] = &[
    ("AdmissionWebhookMatchConditions", true),
    ("AggregatedDiscoveryEndpoint", true),
    ("AllowServiceLBStatusOnNonLB", false),
    ("AppArmor", true),
    ("AppArmorFields", true),
    ("CronJobsScheduledAnnotation", true),
    ("CustomResourceFieldSelectors", true),
    ("DevicePluginCDIDevices", true),
    ("DisableCloudProviders", true),
    ("DisableKubeletCloudCredentialProviders", true),
    ("ElasticIndexedJob", true),
    ("JobPodFailurePolicy", true),
    ("KubeProxyDrainingTerminatingNodes", true),
    ("LoadBalancerIPMode", true),
    ("LogarithmicScaleDown", true),
    ("PDBUnhealthyPodEvictionPolicy", true),
    ("PersistentVolumeLastPhaseTransitionTime", true),
    ("PodDisruptionConditions", true),
    ("PodIndexLabel", true),
    ("PodSchedulingReadiness", true),
    ("RemainingItemCount", true),
    ("RetryGenerateName", true),
    ("ServiceAccountTokenJTI", true),
    ("ServiceAccountTokenNodeBindingValidation", true),
    ("ServiceAccountTokenPodNodeInfo", true),
    ("SizeMemoryBackedVolumes", true),
    ("StatefulSetAutoDeletePVC", true),
    ("StatefulSetStartOrdinal", true),
    ("StrictCostEnforcementForVAP", true),
    ("StrictCostEnforcementForWebhooks", true),
    ("StructuredAuthorizationConfiguration", true),
];

/// Every other gate name a v1.32 kubelet knows (Kubernetes, apiserver,
/// component-base and client-go gates); setting them changes nothing here.
const OTHER_GATES: &[&str] = &[
    "APIResponseCompression",
    "APIServerIdentity",
    "APIServerTracing",
    "APIServingWithRoutine",
    "AllowDNSOnlyNodeCSR",
    "AllowInsecureKubeletCertificateSigningRequests",
    "AllowOverwriteTerminationGracePeriodSeconds",
    "AllowUnsafeMalformedObjectDeletion",
    "AnonymousAuthConfigurableEndpoints",
    "AnyVolumeDataSource",
    "AuthorizeNodeWithSelectors",
    "AuthorizeWithSelectors",
    "BtreeWatchCache",
    "CBORServingAndStorage",
    "CPUCFSQuotaPeriod",
    "CRDValidationRatcheting",
    "CSIMigrationPortworx",
    "CSIVolumeHealth",
    "ClientsAllowCBOR",
    "ClientsPreferCBOR",
    "CloudControllerManagerWebhook",
    "ClusterTrustBundle",
    "ClusterTrustBundleProjection",
    "ComponentFlagz",
    "ComponentSLIs",
    "ComponentStatusz",
    "ConcurrentWatchObjectDecode",
    "ConsistentListFromCache",
    "ContainerCheckpoint",
    "ContextualLogging",
    "CoordinatedLeaderElection",
    "CrossNamespaceVolumeDataSource",
    "DRAAdminAccess",
    "DRAResourceClaimDeviceStatus",
    "DeploymentPodReplacementPolicy",
    "DisableAllocatorDualWrite",
    "DisableNodeKubeProxyVersion",
    "DynamicResourceAllocation",
    "EventedPLEG",
    "ExecProbeTimeout",
    "ExternalServiceAccountTokenSigner",
    "GracefulNodeShutdown",
    "GracefulNodeShutdownBasedOnPodPriority",
    "HPAScaleToZero",
    "HonorPVReclaimPolicy",
    "ImageMaximumGCAge",
    "ImageVolume",
    "InPlacePodVerticalScaling",
    "InPlacePodVerticalScalingAllocatedStatus",
    "InPlacePodVerticalScalingExclusiveCPUs",
    "InTreePluginPortworxUnregister",
    "InformerResourceVersion",
    "JobBackoffLimitPerIndex",
    "JobManagedBy",
    "JobPodReplacementPolicy",
    "JobSuccessPolicy",
    "KMSv1",
    "KubeletCgroupDriverFromCRI",
    "KubeletCrashLoopBackOffMax",
    "KubeletFineGrainedAuthz",
    "KubeletInUserNamespace",
    "KubeletPodResourcesDynamicResources",
    "KubeletPodResourcesGet",
    "KubeletRegistrationGetOnExistsOnly",
    "KubeletSeparateDiskGC",
    "KubeletTracing",
    "LocalStorageCapacityIsolationFSQuotaMonitoring",
    "LoggingAlphaOptions",
    "LoggingBetaOptions",
    "MatchLabelKeysInPodAffinity",
    "MatchLabelKeysInPodTopologySpread",
    "MaxUnavailableStatefulSet",
    "MultiCIDRServiceAllocator",
    "MutatingAdmissionPolicy",
    "NFTablesProxyMode",
    "NodeInclusionPolicyInPodTopologySpread",
    "OpenAPIEnums",
    "PodAndContainerStatsFromCRI",
    "PodDeletionCost",
    "PodLifecycleSleepAction",
    "PodLifecycleSleepActionAllowZero",
    "PodLogsQuerySplitStreams",
    "PodReadyToStartContainersCondition",
    "PortForwardWebsockets",
    "ProcMountType",
    "QOSReserved",
    "RecoverVolumeExpansionFailure",
    "RecursiveReadOnlyMounts",
    "RelaxedDNSSearchValidation",
    "RelaxedEnvironmentVariableValidation",
    "ReloadKubeletServerCertificateFile",
    "RemoteRequestHeaderUID",
    "ResilientWatchCacheInitialization",
    "ResourceHealthStatus",
    "RuntimeClassInImageCriAPI",
    "SELinuxChangePolicy",
    "SELinuxMount",
    "SELinuxMountReadWriteOncePod",
    "SchedulerAsyncPreemption",
    "SchedulerQueueingHints",
    "SeparateCacheWatchRPC",
    "SeparateTaintEvictionController",
    "ServiceAccountNodeAudienceRestriction",
    "ServiceAccountTokenNodeBinding",
    "ServiceTrafficDistribution",
    "SidecarContainers",
    "StorageNamespaceIndex",
    "StorageVersionAPI",
    "StorageVersionHash",
    "StorageVersionMigrator",
    "StructuredAuthenticationConfiguration",
    "SupplementalGroupsPolicy",
    "SystemdWatchdog",
    "TopologyAwareHints",
    "TranslateStreamCloseWebsocketRequests",
    "UnauthenticatedHTTP2DOSMitigation",
    "UnknownVersionInteroperabilityProxy",
    "UserNamespacesPodSecurityStandards",
    "UserNamespacesSupport",
    "VolumeAttributesClass",
    "VolumeCapacityPriority",
    "WatchCacheInitializationPostStartHook",
    "WatchFromStorageWithoutResourceVersion",
    "WatchList",
    "WatchListClient",
    "WinDSR",
    "WinOverlay",
    "WindowsCPUAndMemoryAffinity",
    "WindowsGracefulNodeShutdown",
    "WindowsHostNetwork",
];

/// The state of the gates after a configuration's `featureGates` map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateSet {
    /// Gates explicitly enabled or disabled (including by `AllAlpha` /
    /// `AllBeta`); others are at their default.
    enabled: BTreeMap<&'static str, bool>,
}

impl GateSet {
    /// The v1.32 defaults with `overrides` applied, like
    /// `featureGate.SetFromMap`.
    ///
    /// # Errors
    /// The kubelet's text: `unrecognized feature gate: X` (which stops at
    /// once), `cannot set feature gate X to Y, feature is locked to Z`
    /// (collected); several errors are aggregated as Go does.
    pub fn from_overrides(overrides: &BTreeMap<String, bool>) -> Result<GateSet, String> {
        let mut enabled = BTreeMap::new();
        let mut errors = Vec::new();
        // Explicit settings win over AllAlpha/AllBeta whatever Go's map
        // order: apply the maturity switches first.
        let (switches, explicit): (Vec<_>, Vec<_>) = overrides
            .iter()
            .partition(|(name, _)| matches!(name.as_str(), "AllAlpha" | "AllBeta"));
        for (name, &value) in switches {
            let maturity = if name == "AllAlpha" {
                Maturity::Alpha
            } else {
                Maturity::Beta
            };
            for &(gate, spec) in ALIGNMENT_GATES {
                if spec.maturity == maturity {
                    enabled.insert(gate, value);
                }
            }
        }
        for (name, &value) in explicit {
            let Some((known, spec)) = lookup(name) else {
                errors.push(format!("unrecognized feature gate: {name}"));
                break;
            };
            if spec.locked && spec.default != value {
                errors.push(format!(
                    "cannot set feature gate {name} to {value}, feature is locked to {}",
                    spec.default
                ));
                continue;
            }
            enabled.insert(known, value);
        }
        match go::aggregate(&errors) {
            Some(text) => Err(text),
            None => Ok(GateSet { enabled }),
        }
    }

    /// Whether `gate` is on.
    pub fn enabled(&self, gate: &str) -> bool {
        self.enabled
            .get(gate)
            .copied()
            .or_else(|| lookup(gate).map(|(_, spec)| spec.default))
            .unwrap_or(false)
    }

    /// The gates the managers read.
    pub fn alignment(&self) -> FeatureGates {
        FeatureGates {
            cpu_manager_policy_options: self.enabled("CPUManagerPolicyOptions"),
            cpu_manager_policy_beta_options: self.enabled("CPUManagerPolicyBetaOptions"),
            cpu_manager_policy_alpha_options: self.enabled("CPUManagerPolicyAlphaOptions"),
            topology_manager_policy_options: self.enabled("TopologyManagerPolicyOptions"),
            topology_manager_policy_beta_options: self.enabled("TopologyManagerPolicyBetaOptions"),
            topology_manager_policy_alpha_options: self.enabled("TopologyManagerPolicyAlphaOptions"),
            memory_manager: self.enabled("MemoryManager"),
            pod_level_resources_set: self.enabled.get("PodLevelResources").copied(),
        }
    }
}

/// The canonical name and spec of a known gate.
fn lookup(name: &str) -> Option<(&'static str, Spec)> {
    if let Some(&(known, spec)) = ALIGNMENT_GATES.iter().find(|(gate, _)| *gate == name) {
        return Some((known, spec));
    }
    if let Some(&(known, default)) = LOCKED_GATES.iter().find(|(gate, _)| *gate == name) {
        return Some((known, spec(default, Maturity::Ga, true)));
    }
    if let Some(&known) = OTHER_GATES.iter().find(|gate| **gate == name) {
        // Unlocked; the maturity and default are not needed for anything.
        return Some((known, spec(false, Maturity::Deprecated, false)));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(pairs: &[(&str, bool)]) -> Result<GateSet, String> {
        GateSet::from_overrides(&pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect())
    }

    #[test]
    fn defaults_are_the_v1_32_ones() {
        let set = gates(&[]).unwrap();
        assert_eq!(set.alignment(), FeatureGates::default());
    }

    #[test]
    fn overrides_and_maturity_switches() {
        let set = gates(&[("CPUManagerPolicyAlphaOptions", true)]).unwrap();
        assert!(set.alignment().cpu_manager_policy_alpha_options);

        let set = gates(&[("AllAlpha", true)]).unwrap();
        assert!(set.alignment().cpu_manager_policy_alpha_options);
        assert!(set.alignment().topology_manager_policy_alpha_options);

        // An explicit setting beats the switch.
        let set = gates(&[("AllBeta", false), ("CPUManagerPolicyOptions", true)]).unwrap();
        assert!(set.alignment().cpu_manager_policy_options);
        assert!(!set.alignment().cpu_manager_policy_beta_options);

        let set = gates(&[("SidecarContainers", false)]).unwrap();
        assert_eq!(set.alignment(), FeatureGates::default());
    }

    #[test]
    fn refusals_use_the_kubelet_text() {
        assert_eq!(
            gates(&[("NoSuchGate", true)]),
            Err("unrecognized feature gate: NoSuchGate".into())
        );
        assert_eq!(
            gates(&[("MemoryManager", false)]),
            Err("cannot set feature gate MemoryManager to false, feature is locked to true".into())
        );
        assert_eq!(
            gates(&[("CPUManager", false), ("MemoryManager", false)]),
            Err(
                "[cannot set feature gate CPUManager to false, feature is locked to true, \
                 cannot set feature gate MemoryManager to false, feature is locked to true]"
                    .into()
            )
        );
        assert!(gates(&[("MemoryManager", true)]).is_ok());
    }

    #[test]
    fn gate_tables_have_no_duplicates() {
        let mut names: Vec<&str> = ALIGNMENT_GATES.iter().map(|(n, _)| *n).collect();
        names.extend(LOCKED_GATES.iter().map(|(n, _)| *n));
        names.extend(OTHER_GATES.iter().copied());
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count);
    }
}
