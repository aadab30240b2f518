package main

// Reading and checking a scenario file (format v1, see the repository's
// scenario documentation). Everything here is harness code: it only turns the
// file into the inputs the kubelet code takes and refuses files that are
// malformed, before any kubelet code runs.

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// scenario is the parsed file. Pods and the kubelet section stay raw: the
// kubelet's own decoders read them.
type scenario struct {
	Topology topologySpec               `json:"topology"`
	Kubelet  map[string]json.RawMessage `json:"kubelet"`
	Events   []event                    `json:"events"`
}

type topologySpec struct {
	NUMANodes []map[string]json.RawMessage `json:"numaNodes"`
	CPUs      []cpu                        `json:"cpus"`
	Devices   map[string][]device          `json:"devices"`
}

type cpu struct {
	ID          *int `json:"id"`
	Core        *int `json:"core"`
	Socket      *int `json:"socket"`
	NUMA        *int `json:"numa"`
	UncoreCache *int `json:"uncoreCache"`
}

type device struct {
	ID   string `json:"id"`
	NUMA []int  `json:"numa"`
}

type event struct {
	Add     json.RawMessage `json:"add"`
	Delete  *string         `json:"delete"`
	Resize  *resizeEvent    `json:"resize"`
	Restart *restartEvent   `json:"restart"`
}

// restartEvent restarts the kubelet: `kubelet` fields replace the
// scenario's (null removes one) for the new process.
type restartEvent struct {
	Kubelet map[string]json.RawMessage `json:"kubelet"`
}

// numaNode is one checked entry of topology.numaNodes.
type numaNode struct {
	ID        int
	Memory    int64
	HugePages map[int64]int64 // page size in bytes -> total bytes
	Distances []uint64
}

// invalidScenario is a malformed scenario: not a kubelet decision.
type invalidScenario struct{ msg string }

func (e *invalidScenario) Error() string { return "invalid scenario: " + e.msg }

func invalidf(format string, args ...any) error {
	return &invalidScenario{fmt.Sprintf(format, args...)}
}

var hugePageKey = regexp.MustCompile(`^hugepages-(.+)$`)

func readScenario(path string) (*scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, invalidf("%s: %v", path, err)
	}
	// YAML is a superset of JSON; the conversion keeps JSON input as it is.
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, invalidf("%s: %v", path, err)
	}
	var s scenario
	if err := json.Unmarshal(js, &s); err != nil {
		return nil, invalidf("%s: %v", path, err)
	}
	if len(s.Topology.NUMANodes) == 0 {
		return nil, invalidf("%s: topology.numaNodes: at least one NUMA node is required", path)
	}
	if len(s.Topology.CPUs) == 0 {
		return nil, invalidf("%s: topology.cpus: at least one CPU is required", path)
	}
	return &s, nil
}

// numaNodes checks topology.numaNodes and returns them sorted by id.
func (s *scenario) numaNodes() ([]numaNode, error) {
	var nodes []numaNode
	seen := map[int]bool{}
	for i, raw := range s.Topology.NUMANodes {
		field := fmt.Sprintf("topology.numaNodes[%d]", i)
		n := numaNode{HugePages: map[int64]int64{}}
		idRaw, ok := raw["id"]
		if !ok {
			return nil, invalidf("%s.id: missing", field)
		}
		if err := json.Unmarshal(idRaw, &n.ID); err != nil || n.ID < 0 {
			return nil, invalidf("%s.id: not a NUMA node id: %s", field, idRaw)
		}
		if seen[n.ID] {
			return nil, invalidf("%s.id: NUMA node %d listed twice", field, n.ID)
		}
		seen[n.ID] = true
		keys := make([]string, 0, len(raw))
		for k := range raw {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := raw[k]
			switch {
			case k == "id":
			case k == "memory":
				q, err := quantity(v)
				if err != nil {
					return nil, invalidf("%s.memory: %v", field, err)
				}
				n.Memory = q.Value()
			case k == "distances":
				if err := json.Unmarshal(v, &n.Distances); err != nil {
					return nil, invalidf("%s.distances: %v", field, err)
				}
			case hugePageKey.MatchString(k):
				size, err := resource.ParseQuantity(hugePageKey.FindStringSubmatch(k)[1])
				if err != nil || size.Value() <= 0 || size.Value()%1024 != 0 {
					return nil, invalidf("%s.%s: not a huge page size", field, k)
				}
				total, err := quantity(v)
				if err != nil {
					return nil, invalidf("%s.%s: %v", field, k, err)
				}
				if total.Value()%size.Value() != 0 {
					return nil, invalidf("%s.%s: %s is not a whole number of pages", field, k, total.String())
				}
				n.HugePages[size.Value()] = total.Value()
			default:
				return nil, invalidf("%s.%s: unknown field", field, k)
			}
		}
		if n.Memory <= 0 {
			return nil, invalidf("%s.memory: missing or not positive", field)
		}
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	for i, n := range nodes {
		if n.Distances != nil && len(n.Distances) != len(nodes) {
			return nil, invalidf("topology.numaNodes[%d].distances: %d entries for %d NUMA nodes", i, len(n.Distances), len(nodes))
		}
	}
	return nodes, nil
}

func quantity(raw json.RawMessage) (resource.Quantity, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		// A bare number is a quantity too.
		var f json.Number
		if err2 := json.Unmarshal(raw, &f); err2 != nil {
			return resource.Quantity{}, fmt.Errorf("not a quantity: %s", raw)
		}
		s = f.String()
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("not a quantity %q: %v", s, err)
	}
	if q.Sign() < 0 {
		return resource.Quantity{}, fmt.Errorf("negative quantity %q", s)
	}
	return q, nil
}

// checkCPUs checks topology.cpus against the NUMA nodes.
func (s *scenario) checkCPUs(nodes []numaNode) error {
	known := map[int]bool{}
	for _, n := range nodes {
		known[n.ID] = true
	}
	seen := map[int]bool{}
	coreSocket := map[int]int{}
	for i, c := range s.Topology.CPUs {
		field := fmt.Sprintf("topology.cpus[%d]", i)
		switch {
		case c.ID == nil || *c.ID < 0:
			return invalidf("%s.id: missing or negative", field)
		case c.Core == nil || *c.Core < 0:
			return invalidf("%s.core: missing or negative", field)
		case c.Socket == nil || *c.Socket < 0:
			return invalidf("%s.socket: missing or negative", field)
		case c.NUMA == nil:
			return invalidf("%s.numa: missing", field)
		case !known[*c.NUMA]:
			return invalidf("%s.numa: NUMA node %d is not in topology.numaNodes", field, *c.NUMA)
		case seen[*c.ID]:
			return invalidf("%s.id: CPU %d listed twice", field, *c.ID)
		}
		seen[*c.ID] = true
		if sock, ok := coreSocket[*c.Core]; ok && sock != *c.Socket {
			return invalidf("%s: core %d is on socket %d and %d", field, *c.Core, sock, *c.Socket)
		}
		coreSocket[*c.Core] = *c.Socket
	}
	for res, devs := range s.Topology.Devices {
		ids := map[string]bool{}
		if !strings.Contains(res, "/") {
			return invalidf("topology.devices.%s: a device plugin resource name has a domain (vendor.com/name)", res)
		}
		for i, d := range devs {
			field := fmt.Sprintf("topology.devices.%s[%d]", res, i)
			if d.ID == "" || ids[d.ID] {
				return invalidf("%s.id: missing or duplicate", field)
			}
			ids[d.ID] = true
			for _, n := range d.NUMA {
				if !known[n] {
					return invalidf("%s.numa: NUMA node %d is not in topology.numaNodes", field, n)
				}
			}
		}
	}
	return nil
}
