//go:build k8s_1_34 || k8s_1_35 || k8s_1_36 || k8s_1_37

package main

// decide runs one case through the release's real allocator the way the
// kube-scheduler's DynamicResources plugin does (pkg/scheduler/framework/
// plugins/dynamicresources of the release):
//
//   - The API server's defaulting of every object (applyDefaults).
//   - PreFilter's per-request checks, before any allocator exists: a
//     request naming no class is an error ("request R: unsupported request
//     type"), a class that does not exist makes the pod unschedulable
//     ("request R: device class C does not exist"), subrequests
//     (firstAvailable) with DRAPrioritizedList off and a request with
//     neither exactly nor firstAvailable likewise (checkRequests).
//   - The allocated state from the claims that hold devices, as the
//     plugin's claim tracker keeps it (allocatedStateOf).
//   - structured.NewAllocator with the release's Features (filled from the
//     release's default feature gates exactly as the plugin fills them), the
//     allocated state, a DeviceClass lister of client-go over the case's
//     classes, every ResourceSlice of the case, and a cel.Cache built as the
//     plugin builds it (10 entries, the release's cel.Features).
//   - Filter's Allocate(ctx, node, claims) and its reading of the answer
//     (classify, per release).
//
// Slice order. The plugin passes the slices in the order its informer's
// cache lists them, which is a Go map's order: any order. From v1.36 the
// allocator sorts pools by driver and pool name and a pool's slices by name,
// so the order does not matter; v1.34 and v1.35 walk pools in Go map order
// and a pool's slices in the order given, so when the devices that could
// serve a request lie in several pools (or slices), which one a v1.34/v1.35
// scheduler takes is a matter of chance. decide runs the allocator on the
// case's order, then on random orders of the slices until
// orderRunsWithoutNews runs in a row gave no outcome not seen before (at
// most maxOrderRuns runs); every distinct outcome is an answer the release
// can give. The one printed is the first in the order of their JSON text,
// the others are its alternatives.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	kubefeatures "k8s.io/kubernetes/pkg/features"
)

const (
	orderRunsWithoutNews = 32
	maxOrderRuns         = 400
	// allocateTimeLimit bounds one Allocate call of the harness. The
	// scheduler's own limit (DRASchedulerFilterTimeout, filterTimeout 10 s
	// by default) depends on the machine's speed and is not applied.
	allocateTimeLimit = 60 * time.Second
)

// celCache is the plugin's: one per scheduler profile, reused across
// scheduling cycles, 10 compiled expressions.
var celCache = cel.NewCache(10, celFeatures())

func decide(c *allocationCase) (out outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = oracleError(fmt.Sprintf("panic: %v\n%s", r, debug.Stack()))
		}
	}()
	if c.Release != release {
		return invalidCase(fmt.Errorf("release %q: this oracle runs the v%s allocator", c.Release, release))
	}
	if err := checkNames(c); err != nil {
		return invalidCase(err)
	}
	if c.Pod != nil {
		if answer, handled := decidePod(c); handled {
			return answer
		}
	}
	applyDefaults(c)
	features := allocatorFeatures()
	classLister, err := deviceClassLister(c.DeviceClasses)
	if err != nil {
		return oracleError(err.Error())
	}
	if answer := checkRequests(c, features, classLister); answer != nil {
		return *answer
	}
	if len(c.Claims) == 0 {
		// The plugin skips a pod without claims.
		return allocated(nil)
	}
	claims := make([]*resourceapi.ResourceClaim, len(c.Claims))
	for i := range c.Claims {
		claims[i] = &c.Claims[i]
	}
	slices := make([]*resourceapi.ResourceSlice, len(c.ResourceSlices))
	for i := range c.ResourceSlices {
		slices[i] = &c.ResourceSlices[i]
	}

	seen := map[string]outcome{}
	// run reports whether the outcome is new, or the harness's failure.
	run := func(order []*resourceapi.ResourceSlice) (news bool, failure *outcome) {
		answer, ok := allocateOnce(c, features, classLister, order, claims)
		if !ok {
			return false, &answer
		}
		key, err := json.Marshal(answer)
		if err != nil {
			failure := oracleError(fmt.Sprintf("encoding the outcome: %v", err))
			return false, &failure
		}
		if _, known := seen[string(key)]; known {
			return false, nil
		}
		seen[string(key)] = answer
		return true, nil
	}
	if _, failure := run(slices); failure != nil {
		return *failure
	}
	if len(slices) > 1 {
		rng := rand.New(rand.NewPCG(0x5eed, uint64(len(slices))))
		order := append([]*resourceapi.ResourceSlice(nil), slices...)
		for runs, quiet := 1, 0; runs < maxOrderRuns && quiet < orderRunsWithoutNews; runs++ {
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			news, failure := run(order)
			if failure != nil {
				return *failure
			}
			if news {
				quiet = 0
			} else {
				quiet++
			}
		}
	}
	keys := make([]string, 0, len(seen))
	for key := range seen {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	out = seen[keys[0]]
	for _, key := range keys[1:] {
		out.Alternatives = append(out.Alternatives, seen[key])
	}
	return out
}

// allocateOnce: NewAllocator and Allocate as PreFilter and Filter call them.
// ok is false when the harness got no answer (the time limit).
func allocateOnce(c *allocationCase, features structured.Features, classLister structured.DeviceClassLister, slices []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim) (answer outcome, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), allocateTimeLimit)
	defer cancel()
	state := allocatedStateOf(c.AllocatedClaims)
	allocator, err := structured.NewAllocator(ctx, features, state, classLister, slices, celCache)
	if err != nil {
		// PreFilter: statusError.
		return schedulingError(err.Error()), true
	}
	// Allocate works on the claims as given; a copy keeps one run from
	// seeing another's changes, should there be any.
	copies := make([]*resourceapi.ResourceClaim, len(claims))
	for i, claim := range claims {
		copies[i] = claim.DeepCopy()
	}
	results, err := allocator.Allocate(ctx, &c.Node, copies)
	if ctx.Err() != nil {
		return oracleError(fmt.Sprintf("Allocate did not finish within %v", allocateTimeLimit)), false
	}
	answer = classify(results, err, len(claims))
	if answer.Allocations != nil {
		normalizeShareIDs(*answer.Allocations)
	}
	return answer, true
}

// applyDefaults runs the API server's defaulting of the release on every
// object (what the scheduler's informers receive): a request's
// allocationMode ExactCount and count 1, a toleration's operator Equal, a
// taint's timeAdded (now; no result shows it), core/v1's Node defaults.
func applyDefaults(c *allocationCase) {
	legacyscheme.Scheme.Default(&c.Node)
	for i := range c.DeviceClasses {
		legacyscheme.Scheme.Default(&c.DeviceClasses[i])
	}
	for i := range c.ResourceSlices {
		legacyscheme.Scheme.Default(&c.ResourceSlices[i])
	}
	for i := range c.AllocatedClaims {
		legacyscheme.Scheme.Default(&c.AllocatedClaims[i])
	}
	for i := range c.Claims {
		legacyscheme.Scheme.Default(&c.Claims[i])
	}
}

// checkNames refuses what an API server would never serve: two objects of
// one kind with the same name (the informer would keep one of them).
func checkNames(c *allocationCase) error {
	classes := sets.New[string]()
	for _, class := range c.DeviceClasses {
		if classes.Has(class.Name) {
			return fmt.Errorf("deviceClasses: two classes named %q", class.Name)
		}
		classes.Insert(class.Name)
	}
	slices := sets.New[string]()
	for _, slice := range c.ResourceSlices {
		if slices.Has(slice.Name) {
			return fmt.Errorf("resourceSlices: two slices named %q", slice.Name)
		}
		slices.Insert(slice.Name)
	}
	for i, claim := range c.Claims {
		if claim.Status.Allocation != nil {
			return fmt.Errorf("claims[%d] (%s): already allocated; the pod's claims to allocate have no status.allocation (claims holding devices go in allocatedClaims)", i, klog.KObj(&claim))
		}
	}
	return nil
}

// checkRequests is PreFilter's loop over the requests of every claim to
// allocate (identical in v1.34–v1.37). A nil answer: go on.
func checkRequests(c *allocationCase, features structured.Features, classLister structured.DeviceClassLister) *outcome {
	validateDeviceClass := func(className, requestName string) *outcome {
		if className == "" {
			answer := schedulingError(fmt.Sprintf("request %s: unsupported request type", requestName))
			return &answer
		}
		if _, err := classLister.Get(className); err != nil && apierrors.IsNotFound(err) {
			answer := unschedulable(fmt.Sprintf("request %s: device class %s does not exist", requestName, className))
			return &answer
		}
		return nil
	}
	for i := range c.Claims {
		claim := &c.Claims[i]
		for _, request := range claim.Spec.Devices.Requests {
			switch {
			case request.Exactly != nil:
				if answer := validateDeviceClass(request.Exactly.DeviceClassName, request.Name); answer != nil {
					return answer
				}
			case len(request.FirstAvailable) > 0:
				// The plugin asks the DRAPrioritizedList gate, which is
				// what Features.PrioritizedList is filled from.
				if !features.PrioritizedList {
					answer := unschedulable(fmt.Sprintf("resource claim %s, request %s: has subrequests, but the DRAPrioritizedList feature is disabled", klog.KObj(claim), request.Name))
					return &answer
				}
				for _, subRequest := range request.FirstAvailable {
					qualRequestName := strings.Join([]string{request.Name, subRequest.Name}, "/")
					if answer := validateDeviceClass(subRequest.DeviceClassName, qualRequestName); answer != nil {
						return answer
					}
				}
			default:
				answer := unschedulable(fmt.Sprintf("resource claim %s, request %s: unknown request type", klog.KObj(claim), request.Name))
				return &answer
			}
		}
	}
	return nil
}

// allocatedStateOf is what the plugin's claim tracker holds for the
// claims in its cache (allocateddevices.go foreachAllocatedDevice; the
// tracker is built with DRAConsumableCapacity from the default gates, and
// PreFilter takes GatherAllocatedState with the gate on,
// ListAllAllocatedDevices with it off): results with adminAccess hold
// nothing; with the gate on, a result with a shareID is a shared device ID
// (and its consumedCapacity counts), any other result a device in use;
// with the gate off every result is a device in use.
func allocatedStateOf(claims []resourceapi.ResourceClaim) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	consumable := utilfeature.DefaultFeatureGate.Enabled(kubefeatures.DRAConsumableCapacity)
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			if ptr.Deref(result.AdminAccess, false) {
				continue
			}
			id := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
			if consumable && result.ShareID != nil {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, result.ShareID))
				if result.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, result.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(id)
		}
	}
	return state
}

// deviceClassLister is client-go's DeviceClass lister over an indexer
// holding the case's classes, as the plugin's informer-backed one (Get
// answers a missing class with the API's NotFound error).
func deviceClassLister(classes []resourceapi.DeviceClass) (structured.DeviceClassLister, error) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := range classes {
		if err := indexer.Add(&classes[i]); err != nil {
			return nil, fmt.Errorf("device class %s: %w", classes[i].Name, err)
		}
	}
	return classLister{resourcelisters.NewDeviceClassLister(indexer)}, nil
}

// classLister is the plugin's deviceClassLister (dra_manager.go): Get and
// List(labels.Everything()) of the informer's lister.
type classLister struct {
	lister resourcelisters.DeviceClassLister
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	return l.lister.Get(name)
}

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	return l.lister.List(labels.Everything())
}
