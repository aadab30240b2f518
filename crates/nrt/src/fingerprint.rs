//! The pod-set fingerprint a NodeResourceTopology object carries
//! (`nodeTopologyPodsFingerprint`, format `pfp0v001…` of
//! github.com/k8stopologyawareschedwg/podfingerprint, as the
//! resource-topology-exporter and NFD's topology-updater publish it): a
//! digest of the namespace/name pairs of the pods the node's kubelet holds
//! when the object was built. The scheduler-plugins NodeResourceTopologyMatch
//! cache (`cacheResyncPeriodSeconds`) over-reserves on a node it bound pods
//! to and trusts the node's object again only once this fingerprint equals
//! the one it computes over the Running pods bound there; without it the
//! node stays over-reserved for the scheduler's lifetime.
//!
//! Must not touch: which pods a node holds (the engine's).

use xxhash_rust::xxh64::{Xxh64, xxh64};

/// Attribute holding the fingerprint.
pub const FINGERPRINT_ATTRIBUTE: &str = "nodeTopologyPodsFingerprint";
/// Attribute naming which pods the fingerprint covers.
pub const FINGERPRINT_METHOD_ATTRIBUTE: &str = "nodeTopologyPodsFingerprintMethod";
/// The method of [`pods_fingerprint`]: every pod the node holds (the other
/// method, `with-exclusive-resources`, leaves out pods without exclusive
/// CPUs or devices).
pub const FINGERPRINT_METHOD_ALL: &str = "all";

/// The format's prefix and version, before the digest's hex.
const PREFIX_AND_VERSION: &str = "pfp0v001";

/// The fingerprint of a set of pods given as (namespace, name): the same
/// for any order. Each pod is hashed alone (XXH64 of its name, seeded with
/// XXH64 of its namespace), the hashes sorted and hashed together as
/// little-endian words; the digest is written big-endian in hex.
pub fn pods_fingerprint<'a>(pods: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut hashes: Vec<u64> = pods
        .into_iter()
        .map(|(namespace, name)| xxh64(name.as_bytes(), xxh64(namespace.as_bytes(), 0)))
        .collect();
    hashes.sort_unstable();
    let mut digest = Xxh64::new(0);
    for hash in hashes {
        digest.update(&hash.to_le_bytes());
    }
    format!("{PREFIX_AND_VERSION}{:016x}", digest.digest())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_does_not_matter() {
        let forward = pods_fingerprint([("a", "x"), ("b", "y"), ("a", "z")]);
        let backward = pods_fingerprint([("a", "z"), ("b", "y"), ("a", "x")]);
        assert_eq!(forward, backward);
        assert_ne!(forward, pods_fingerprint([("a", "x"), ("b", "y")]));
        // The namespace seeds the name's hash: moving a pod changes it.
        assert_ne!(pods_fingerprint([("a", "x")]), pods_fingerprint([("b", "x")]));
    }
}
