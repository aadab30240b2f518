//! The follower's proof of placement: every verify interval, each running
//! container of the known state judged as `topoalign verify --containers`
//! judges it (`topoalign_observe::verify_containers`: its processes found
//! by their cgroup, read through `topoalign-host`, judged by
//! `topoalign-verify` against what the kubelet decided), exported as
//! metrics ([`crate::metrics`]), on `GET /v1/verdicts`, and — with
//! `--events` — as a Kubernetes Event on the pod when a container's verdict
//! turns drifted, misaligned or memory-spilled ([`notices`]).
//!
//! Reading `/proc` happens on a blocking thread, never in the loop that
//! gathers the kubelet's sources; a state that is not known is not
//! verified (nothing is exported about it but that).
//!
//! Must not touch: the judgement (`topoalign-verify`'s), how processes are
//! found and read (`topoalign-observe`'s and `topoalign-host`'s).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::watch;
use topoalign_host::Host;
use topoalign_observe::{RunningContainer, Verified};
use topoalign_verify::{Report, Subject, Verdict};

use crate::api::Published;
use crate::follower::State;
use crate::metrics::Metrics;

/// What the verifier reads and how often.
#[derive(Clone, Debug)]
pub struct VerifyConfig {
    /// The host whose processes are read (`/`, or a captured tree).
    pub host: Host,
    /// Time between two verifications.
    pub interval: Duration,
}

/// The latest verification: its reports and the containers not found.
#[derive(Clone, Debug, Default)]
pub struct Verdicts {
    /// The status generation the verification judged.
    pub generation: u64,
    pub verified: Option<Arc<Verified>>,
    /// Why the last verification could not read the host.
    pub error: Option<String>,
}

/// One event to post on a pod: a container's verdict changed to a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    /// `PlacementDrifted`, `PlacementMisaligned`, `MemorySpilled`.
    pub reason: &'static str,
    /// The container and what the judge found.
    pub note: String,
}

/// A container's key in the verdicts remembered between verifications.
type Key = (String, String, String);

fn key_of(report: &Report) -> Option<Key> {
    match &report.subject {
        Subject::Container {
            namespace,
            pod,
            container,
            ..
        } => Some((namespace.clone(), pod.clone(), container.clone())),
        Subject::Process { .. } => None,
    }
}

/// The Event reason of a failure verdict.
fn reason_of(verdict: Verdict) -> Option<&'static str> {
    match verdict {
        Verdict::Drifted => Some("PlacementDrifted"),
        Verdict::Misaligned => Some("PlacementMisaligned"),
        Verdict::MemorySpilled => Some("MemorySpilled"),
        Verdict::Aligned | Verdict::NotPlaced => None,
    }
}

/// The events `verified` calls for, given the verdicts of the last
/// verification (`last`, replaced by this one's): one per container whose
/// verdict is a failure and was not that failure last time (a container
/// seen for the first time with a failure is one too). `containers` gives
/// each pod's UID.
pub fn notices(last: &mut HashMap<Key, Verdict>, verified: &Verified, containers: &[RunningContainer]) -> Vec<Notice> {
    let uids: HashMap<(&str, &str), &str> = containers
        .iter()
        .map(|c| ((c.namespace.as_str(), c.pod.as_str()), c.uid.as_str()))
        .collect();
    let mut now = HashMap::with_capacity(verified.reports.len());
    let mut notices = Vec::new();
    for report in &verified.reports {
        let Some(key) = key_of(report) else { continue };
        if let Some(reason) = reason_of(report.verdict)
            && last.get(&key) != Some(&report.verdict)
        {
            // Each finding starts with its verdict's word ("misaligned:
            // devices on NUMA 1, ..."): the note does not say it twice.
            let findings: Vec<String> = report.findings.iter().map(ToString::to_string).collect();
            let what = if findings.is_empty() {
                report.verdict.as_str().to_string()
            } else {
                findings.join("; ")
            };
            notices.push(Notice {
                namespace: key.0.clone(),
                pod: key.1.clone(),
                uid: uids
                    .get(&(key.0.as_str(), key.1.as_str()))
                    .map(|uid| (*uid).to_string())
                    .unwrap_or_default(),
                reason,
                note: format!("container {}: {what}", key.2),
            });
        }
        now.insert(key, report.verdict);
    }
    *last = now;
    notices
}

/// Where events go: the Events API through kube-rs's recorder.
pub struct EventSink {
    recorder: Recorder,
}

impl EventSink {
    /// Events reported by `topoalign-follower` on node `node_name`.
    pub fn new(client: kube::Client, node_name: &str) -> EventSink {
        let reporter = Reporter {
            controller: "topoalign-follower".to_string(),
            instance: Some(node_name.to_string()),
        };
        EventSink {
            recorder: Recorder::new(client, reporter),
        }
    }

    async fn post(&self, notice: &Notice) {
        let reference = ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("Pod".to_string()),
            name: Some(notice.pod.clone()),
            namespace: Some(notice.namespace.clone()),
            uid: (!notice.uid.is_empty()).then(|| notice.uid.clone()),
            ..ObjectReference::default()
        };
        // At most 1 kB of note (the Events API's limit).
        let mut note = notice.note.clone();
        if note.len() > 1024 {
            let mut end = 1021;
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
            note.push_str("...");
        }
        let event = Event {
            type_: EventType::Warning,
            reason: notice.reason.to_string(),
            note: Some(note),
            action: "VerifyPlacement".to_string(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(pod = %format!("{}/{}", notice.namespace, notice.pod), %error, "cannot post the event");
        }
    }
}

/// Verifies the published known state every `config.interval` until the
/// task is dropped, reporting on `verdicts` and `metrics`, posting events
/// to `events` when given.
pub async fn verify_loop(
    status: watch::Receiver<Published>,
    config: VerifyConfig,
    metrics: Arc<Metrics>,
    verdicts: watch::Sender<Verdicts>,
    events: Option<EventSink>,
) {
    let mut last: HashMap<Key, Verdict> = HashMap::new();
    let mut ticks = tokio::time::interval(config.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let (generation, node, containers) = {
            let published = status.borrow();
            match &published.status.state {
                State::Known { node, containers, .. } => {
                    (published.status.generation, node.clone(), containers.clone())
                }
                State::Starting | State::Unknown(_) => continue,
            }
        };
        let host = config.host.clone();
        let judged = {
            let containers = containers.clone();
            tokio::task::spawn_blocking(move || topoalign_observe::verify_containers(&node, &containers, &host)).await
        };
        match judged {
            Ok(Ok(verified)) => {
                metrics.verified(&verified);
                let notices = notices(&mut last, &verified, &containers);
                if let Some(sink) = &events {
                    for notice in &notices {
                        sink.post(notice).await;
                    }
                }
                for notice in &notices {
                    tracing::warn!(pod = %format!("{}/{}", notice.namespace, notice.pod), reason = notice.reason, note = %notice.note, "placement not kept");
                }
                verdicts.send_replace(Verdicts {
                    generation,
                    verified: Some(Arc::new(verified)),
                    error: None,
                });
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "cannot verify the containers' placement");
                metrics.verify_failed();
                verdicts.send_replace(Verdicts {
                    generation,
                    verified: None,
                    error: Some(error.to_string()),
                });
            }
            Err(error) => tracing::error!(%error, "the verification task failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_model::CpuSet;
    use topoalign_verify::{Applied, AppliedDevices, NumaLayout, judge};

    fn report(container: &str, cpus: &str, decided_cpus: &str) -> Report {
        let layout = NumaLayout::new([
            (0, CpuSet::parse("0-3").expect("cpus")),
            (1, CpuSet::parse("4-7").expect("cpus")),
        ]);
        let cpus = CpuSet::parse(cpus).expect("cpus");
        let applied = Applied {
            cgroup: None,
            cpus: cpus.clone(),
            mems_allowed: [0, 1].into(),
            memory_bind: None,
            memory: None,
            devices: AppliedDevices::Unknown,
        };
        let decided = topoalign_verify::Decided {
            by: "kubelet checkpoints".to_string(),
            cpus: topoalign_verify::DecidedCpus::Exclusive {
                cpus: CpuSet::parse(decided_cpus).expect("cpus"),
            },
            memory_nodes: None,
            devices: Vec::new(),
            cgroup: None,
            policy: Some(topoalign_engine::TopologyPolicyName::SingleNumaNode),
            not_enforced: false,
        };
        let subject = Subject::Container {
            namespace: "default".to_string(),
            pod: "p".to_string(),
            container: container.to_string(),
            pids: vec![1],
        };
        judge(subject, &layout, applied, Some(decided))
    }

    #[test]
    fn an_event_when_a_verdict_turns_to_a_failure_and_not_again_while_it_lasts() {
        let containers = [RunningContainer {
            namespace: "default".to_string(),
            pod: "p".to_string(),
            uid: "u-1".to_string(),
            container: "a".to_string(),
            id: Some("abc".to_string()),
        }];
        let mut last = HashMap::new();
        let aligned = Verified {
            reports: vec![report("a", "0-1", "0-1")],
            not_found: Vec::new(),
        };
        assert_eq!(aligned.reports[0].verdict, Verdict::Aligned);
        assert!(notices(&mut last, &aligned, &containers).is_empty());
        let drifted = Verified {
            reports: vec![report("a", "0-1,4", "0-1")],
            not_found: Vec::new(),
        };
        let failure = drifted.reports[0].verdict;
        assert!(failure.is_failure(), "{failure:?}");
        let posted = notices(&mut last, &drifted, &containers);
        assert_eq!(posted.len(), 1, "{posted:?}");
        assert_eq!(posted[0].uid, "u-1");
        assert_eq!(Some(posted[0].reason), reason_of(failure));
        assert!(
            posted[0].note.starts_with("container a: drifted: "),
            "{}",
            posted[0].note
        );
        // The same failure again: no second event; back to aligned and
        // drifted again: one more.
        assert!(notices(&mut last, &drifted, &containers).is_empty());
        assert!(notices(&mut last, &aligned, &containers).is_empty());
        assert_eq!(notices(&mut last, &drifted, &containers).len(), 1);
    }
}
