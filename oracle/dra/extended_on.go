//go:build k8s_1_36 || k8s_1_37

package main

// v1.36 (beta) and v1.37 (GA): DRAExtendedResource is on by default. A case
// with a pod is run through the release's real DynamicResources plugin: New,
// PreFilter and Filter for the case's node, with
//
//   - a SharedDRAManager of the harness: the claims tracker lists the pod's
//     claims and the allocated ones and gives the allocated state as
//     allocatedStateOf computes it; the slice lister gives the case's
//     slices (no DeviceTaintRules); the class lister is deviceClassLister's;
//     the DeviceClassResolver is the real
//     dynamic-resource-allocation/deviceclass/extendedresourcecache, fed the
//     classes through its informer handler (OnAdd) in the API server's list
//     order, by name;
//   - a Handle giving only that manager, an unstarted informer factory (New
//     adds an indexer to its pod informer) and no client (PreFilter and
//     Filter do not write to the API);
//   - the pod with one spec.resourceClaims entry per case claim, naming it
//     (resourceClaimName), in order, and the API server's defaulting (a
//     container's limits become its requests where none are given).
//
// Filter keeps what it prepared for the node in the plugin's cycle state
// (stateData.nodeAllocations[node]: the allocation results, the node's
// special claim and the container → request mappings), which Reserve and
// PreBind read; the harness reads it there too, by reflection (the fields
// are unexported), instead of running Reserve and PreBind against an API
// server.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"unsafe"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
)

func decidePod(c *allocationCase) (outcome, bool) {
	fts := schedulerFeatures()
	if !fts.EnableDRAExtendedResource {
		return outcome{}, false
	}
	applyDefaults(c)
	pod := c.Pod.DeepCopy()
	legacyscheme.Scheme.Default(pod)
	pod.Spec.ResourceClaims = nil
	for i := range c.Claims {
		name := c.Claims[i].Name
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, v1.PodResourceClaim{
			Name:              fmt.Sprintf("claim-%d", i),
			ResourceClaimName: &name,
		})
	}

	classes, err := deviceClassLister(c.DeviceClasses)
	if err != nil {
		return oracleError(err.Error()), true
	}
	resolver := extendedresourcecache.NewExtendedResourceCache(logr.Discard())
	byName := make([]*resourceapi.DeviceClass, len(c.DeviceClasses))
	for i := range c.DeviceClasses {
		byName[i] = &c.DeviceClasses[i]
	}
	sort.Slice(byName, func(i, j int) bool { return byName[i].Name < byName[j].Name })
	for _, class := range byName {
		resolver.OnAdd(class, true)
	}
	tracker := &claimTracker{}
	for i := range c.Claims {
		tracker.claims = append(tracker.claims, &c.Claims[i])
	}
	for i := range c.AllocatedClaims {
		tracker.claims = append(tracker.claims, &c.AllocatedClaims[i])
	}
	tracker.allocated = c.AllocatedClaims
	manager := &draManager{claims: tracker, classes: classes, resolver: resolver}
	for i := range c.ResourceSlices {
		manager.slices = append(manager.slices, &c.ResourceSlices[i])
	}

	ctx, cancel := context.WithTimeout(context.Background(), allocateTimeLimit)
	defer cancel()
	h := &handle{dra: manager, informers: informers.NewSharedInformerFactory(nil, 0)}
	plugin, err := dynamicresources.New(ctx, &config.DynamicResourcesArgs{}, h, fts)
	if err != nil {
		return oracleError(fmt.Sprintf("dynamicresources.New: %v", err)), true
	}
	pl := plugin.(*dynamicresources.DynamicResources)

	nodeInfo := framework.NewNodeInfo()
	nodeInfo.SetNode(&c.Node)
	state := framework.NewCycleState()
	if _, status := pl.PreFilter(ctx, state, pod, []fwk.NodeInfo{nodeInfo}); !status.IsSuccess() {
		if status.Code() == fwk.Skip {
			return allocated(nil), true
		}
		return fromStatus(status), true
	}
	status := pl.Filter(ctx, state, pod, nodeInfo)
	if ctx.Err() != nil {
		return oracleError(fmt.Sprintf("Filter did not finish within %v", allocateTimeLimit)), true
	}
	if !status.IsSuccess() {
		return fromStatus(status), true
	}
	prepared, err := nodeAllocationOf(state, c.Node.Name)
	if err != nil {
		return oracleError(err.Error()), true
	}
	if prepared == nil {
		// Filter had nothing to allocate on this node.
		return allocated(nil), true
	}
	results := prepared.results
	if len(results) < len(c.Claims) {
		return oracleError(fmt.Sprintf("Filter prepared %d allocations for %d claims", len(results), len(c.Claims))), true
	}
	out := allocated(append([]resourceapi.AllocationResult(nil), results[:len(c.Claims)]...))
	if prepared.claim != nil && len(results) > len(c.Claims) {
		// No request or mapping prints as [] (nil would be null).
		out.ExtendedResourceClaim = &extendedResourceClaim{
			Requests:        append([]resourceapi.DeviceRequest{}, prepared.claim.Spec.Devices.Requests...),
			RequestMappings: append([]v1.ContainerExtendedResourceRequest{}, prepared.mappings...),
			Allocation:      results[len(c.Claims)],
		}
	}
	all := append([]resourceapi.AllocationResult(nil), *out.Allocations...)
	if out.ExtendedResourceClaim != nil {
		all = append(all, out.ExtendedResourceClaim.Allocation)
		normalizeShareIDs(all)
		out.ExtendedResourceClaim.Allocation = all[len(all)-1]
		copy(*out.Allocations, all[:len(all)-1])
	} else {
		normalizeShareIDs(*out.Allocations)
	}
	return out, true
}

// fromStatus: an Error status stops scheduling (error outcome), any other
// failure leaves the pod unschedulable on the node; the text is the
// status's reasons.
func fromStatus(status *fwk.Status) outcome {
	if status.Code() == fwk.Error {
		return schedulingError(status.Message())
	}
	return unschedulable(status.Message())
}

// prepared is the plugin's nodeAllocation for the node.
type prepared struct {
	results  []resourceapi.AllocationResult
	claim    *resourceapi.ResourceClaim
	mappings []v1.ContainerExtendedResourceRequest
}

// nodeAllocationOf reads stateData.nodeAllocations[node] from the plugin's
// cycle state; nil when Filter stored nothing for the node.
func nodeAllocationOf(state fwk.CycleState, node string) (*prepared, error) {
	data, err := state.Read(fwk.StateKey(dynamicresources.Name))
	if err != nil {
		return nil, fmt.Errorf("the plugin's cycle state: %w", err)
	}
	s := reflect.ValueOf(data)
	if s.Kind() != reflect.Pointer || s.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("the plugin's cycle state is a %T", data)
	}
	field := s.Elem().FieldByName("nodeAllocations")
	if !field.IsValid() || field.Kind() != reflect.Map {
		return nil, errors.New("the plugin's state has no nodeAllocations map")
	}
	allocations := exported(field)
	entry := allocations.MapIndex(reflect.ValueOf(node))
	if !entry.IsValid() {
		return nil, nil
	}
	copied := reflect.New(entry.Type()).Elem()
	copied.Set(entry)
	var out prepared
	for name, target := range map[string]any{
		"allocationResults":                &out.results,
		"extendedResourceClaim":            &out.claim,
		"containerResourceRequestMappings": &out.mappings,
	} {
		f := copied.FieldByName(name)
		if !f.IsValid() {
			return nil, fmt.Errorf("the plugin's nodeAllocation has no field %s", name)
		}
		value := exported(f)
		into := reflect.ValueOf(target).Elem()
		if value.Type() != into.Type() {
			return nil, fmt.Errorf("the plugin's nodeAllocation.%s is a %s", name, value.Type())
		}
		into.Set(value)
	}
	return &out, nil
}

// exported gives an addressable unexported field as a value that may be
// read as any other (reflect refuses Interface and Set on it otherwise).
func exported(field reflect.Value) reflect.Value {
	return reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem()
}

// handle is the part of the scheduler's framework handle the plugin's New
// uses; any other method panics (the embedded interface is nil), which the
// harness reports.
type handle struct {
	fwk.Handle
	dra       fwk.SharedDRAManager
	informers informers.SharedInformerFactory
}

func (h *handle) ClientSet() kubernetes.Interface                        { return nil }
func (h *handle) SharedDRAManager() fwk.SharedDRAManager                 { return h.dra }
func (h *handle) SharedInformerFactory() informers.SharedInformerFactory { return h.informers }
func (h *handle) ProfileName() string                                    { return "default-scheduler" }

// draManager is the plugin's view of the cluster's DRA objects.
type draManager struct {
	claims   *claimTracker
	slices   []*resourceapi.ResourceSlice
	classes  structured.DeviceClassLister
	resolver *extendedresourcecache.ExtendedResourceCache
}

func (m *draManager) ResourceClaims() fwk.ResourceClaimTracker     { return m.claims }
func (m *draManager) ResourceSlices() fwk.ResourceSliceLister      { return sliceLister(m.slices) }
func (m *draManager) DeviceClasses() fwk.DeviceClassLister         { return m.classes }
func (m *draManager) DeviceClassResolver() fwk.DeviceClassResolver { return m.resolver }

type sliceLister []*resourceapi.ResourceSlice

func (l sliceLister) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return l, nil
}

// claimTracker: the pod's claims and the allocated ones; nothing in flight.
type claimTracker struct {
	claims    []*resourceapi.ResourceClaim
	allocated []resourceapi.ResourceClaim
}

func (t *claimTracker) List() ([]*resourceapi.ResourceClaim, error) { return t.claims, nil }

func (t *claimTracker) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	for _, claim := range t.claims {
		if claim.Name == name {
			return claim, nil
		}
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
}

func (t *claimTracker) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	return allocatedStateOf(t.allocated).AllocatedDevices, nil
}

func (t *claimTracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	state := allocatedStateOf(t.allocated)
	return &state, nil
}

func (t *claimTracker) SignalClaimPendingAllocation(types.UID, *resourceapi.ResourceClaim) error {
	return nil
}

func (t *claimTracker) GetPendingAllocation(types.UID) *resourceapi.AllocationResult { return nil }

func (t *claimTracker) MaybeRemoveClaimPendingAllocation(types.UID, bool) bool { return false }

func (t *claimTracker) AssumeClaimAfterAPICall(*resourceapi.ResourceClaim) error { return nil }

func (t *claimTracker) AssumedClaimRestore(string, string) {}
