//! Issue 29: a YAML scenario reads as Kubernetes reads YAML (YAML 1.1
//! through `sigs.k8s.io/yaml`, as the oracle reads scenarios), so its
//! `kubelet:` block and pods mean what they mean to the kubelet.

use serde_json::Value;
use topoalign_scenario::{Replay, Scenario, replay};

/// `maxPods: 2.0` (the integer 2 once written as JSON), `featureGates:
/// {CPUManagerPolicyAlphaOptions: yes}` (the gate on, so the alpha option
/// is taken) and `cpu: 04` (octal: 4 CPUs). The expected document is what
/// the real kubelet code of v1.32.10 answered (`oracle replay` of this
/// text, unmodified); topoalign used to refuse `2.0` and `yes` as the wrong
/// type.
const SCENARIO: &str = r#"topology:
  numaNodes:
  - {id: 0, memory: 4Gi}
  - {id: 1, memory: 4Gi}
  cpus:
  - {id: 0, core: 0, socket: 0, numa: 0}
  - {id: 1, core: 1, socket: 0, numa: 0}
  - {id: 2, core: 2, socket: 0, numa: 0}
  - {id: 3, core: 3, socket: 0, numa: 0}
  - {id: 4, core: 4, socket: 1, numa: 1}
  - {id: 5, core: 5, socket: 1, numa: 1}
  - {id: 6, core: 6, socket: 1, numa: 1}
  - {id: 7, core: 7, socket: 1, numa: 1}
kubelet:
  kubeletVersion: "1.32"
  cpuManagerPolicy: static
  reservedSystemCPUs: "0"
  maxPods: 2.0
  featureGates: {CPUManagerPolicyAlphaOptions: yes}
  cpuManagerPolicyOptions: {distribute-cpus-across-numa: "true"}
events:
- add:
    metadata: {name: spread}
    spec:
      containers:
      - name: app
        resources:
          limits: {cpu: 04, memory: 1Gi}
- add:
    metadata: {name: second}
    spec:
      containers:
      - name: app
        resources:
          limits: {cpu: 1, memory: 1Gi}
- add:
    metadata: {name: third}
    spec:
      containers:
      - name: app
        resources:
          limits: {cpu: 1, memory: 1Gi}
"#;

const KUBELET_ANSWER: &str = r#"{"final":{"cpuAssignments":{"default/second":{"app":"1"},"default/spread":{"app":"4-7"}},"defaultCpuSet":"0,2-3","memoryAssignments":{}},"results":[{"admitted":true,"containers":[{"cpus":"4-7","init":false,"memoryNuma":null,"name":"app"}],"event":0,"pod":"default/spread"},{"admitted":true,"containers":[{"cpus":"1","init":false,"memoryNuma":null,"name":"app"}],"event":1,"pod":"default/second"},{"admitted":false,"event":2,"message":"Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2","pod":"default/third","reason":"OutOfpods"}]}"#;

#[test]
fn a_yaml_1_1_scenario_replays_as_the_kubelet_answers() {
    let scenario = Scenario::parse(SCENARIO).expect("the kubelet reads it");
    let document = match replay(&scenario).expect("replays") {
        Replay::Completed(document) => serde_json::to_value(document).expect("serialises"),
        Replay::Refused(error) => panic!("refused: {error}"),
    };
    let expected: Value = serde_json::from_str(KUBELET_ANSWER).expect("JSON");
    assert_eq!(document, expected);
}
