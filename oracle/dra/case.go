//go:build k8s_1_34 || k8s_1_35 || k8s_1_36 || k8s_1_37

package main

// The allocation case and its outcome, as crates/dra/src/case.rs defines
// them.

import (
	"encoding/json"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// allocationCase is one node, the cluster's DRA objects and one pod's
// claims.
type allocationCase struct {
	Release         string
	Node            v1.Node
	DeviceClasses   []resourceapi.DeviceClass
	ResourceSlices  []resourceapi.ResourceSlice
	AllocatedClaims []resourceapi.ResourceClaim
	Claims          []resourceapi.ResourceClaim
	// Pod, when set, is the pod the claims belong to; its plain
	// extended-resource requests may be served by DRA (extended.go).
	Pod *v1.Pod
}

// parseCase reads a case. The top level is strict (exactly the fields of
// crates/dra's AllocationCase; release and node required); the Kubernetes
// objects inside are decoded as the API server decodes them
// (sigs.k8s.io/json: case-sensitive names, integers kept exact), so a field
// this release's API types do not have is dropped, as an API server of the
// release drops it.
func parseCase(data []byte, yamlText bool) (*allocationCase, error) {
	if yamlText {
		var err error
		data, err = yaml.YAMLToJSON(data)
		if err != nil {
			return nil, fmt.Errorf("YAML: %w", err)
		}
	}
	var top map[string]json.RawMessage
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &top); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if top == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	c := &allocationCase{}
	fields := map[string]any{
		"release":         &c.Release,
		"node":            &c.Node,
		"deviceClasses":   &c.DeviceClasses,
		"resourceSlices":  &c.ResourceSlices,
		"allocatedClaims": &c.AllocatedClaims,
		"claims":          &c.Claims,
		"pod":             &c.Pod,
	}
	names := make([]string, 0, len(top))
	for name := range top {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		target, known := fields[name]
		if !known {
			return nil, fmt.Errorf("unknown field %q", name)
		}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(top[name], target); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	for _, required := range []string{"release", "node"} {
		if _, ok := top[required]; !ok {
			return nil, fmt.Errorf("missing field %q", required)
		}
	}
	return c, nil
}

// outcome is crates/dra's Outcome: {"result": "allocated", "allocations":
// [...]} | {"result": "unschedulable", "message": "..."} | {"result":
// "error", "message": "..."}.
//
// alternatives lists the other outcomes the same release gives for the same
// case when its informer cache hands the ResourceSlices over in another
// order (see decide); it is absent when every order gives the same outcome.
type outcome struct {
	Result      string                          `json:"result"`
	Allocations *[]resourceapi.AllocationResult `json:"allocations,omitempty"`
	Message     string                          `json:"message,omitempty"`
	// ExtendedResourceClaim: the special claim the plugin built for the
	// pod's DRA-backed extended resources on the node, and its allocation
	// (cases with a pod only).
	ExtendedResourceClaim *extendedResourceClaim `json:"extendedResourceClaim,omitempty"`
	Alternatives          []outcome              `json:"alternatives,omitempty"`

	// invalid: the case itself could not be used (not an answer of the
	// allocator); allocate exits 2.
	invalid bool
}

func allocated(results []resourceapi.AllocationResult) outcome {
	if results == nil {
		results = []resourceapi.AllocationResult{}
	}
	return outcome{Result: "allocated", Allocations: &results}
}

func unschedulable(message string) outcome {
	return outcome{Result: "unschedulable", Message: message}
}

func schedulingError(message string) outcome {
	return outcome{Result: "error", Message: message}
}

// invalidCase: the input is not a case this oracle can run. The message
// starts with "invalid case: ".
func invalidCase(err error) outcome {
	out := schedulingError("invalid case: " + err.Error())
	out.invalid = true
	return out
}

// oracleError: the harness could not get an answer (a panic in the
// allocator, a time limit). The message starts with "oracle: ".
func oracleError(message string) outcome {
	return schedulingError("oracle: " + message)
}

// normalizeShareIDs replaces the random share IDs the allocator gives
// devices allocated with allowMultipleAllocations (uuid.NewUUID) by stable
// ones, in order of appearance over the allocations and their results:
// 00000000-0000-0000-0000-000000000001, ...02, and so on; the same random ID
// twice gets the same stable one.
func normalizeShareIDs(results []resourceapi.AllocationResult) {
	stable := map[types.UID]types.UID{}
	for i := range results {
		devices := results[i].Devices.Results
		for j := range devices {
			if devices[j].ShareID == nil {
				continue
			}
			id, seen := stable[*devices[j].ShareID]
			if !seen {
				id = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", len(stable)+1))
				stable[*devices[j].ShareID] = id
			}
			devices[j].ShareID = &id
		}
	}
}
