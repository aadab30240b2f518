package main

import (
	"fmt"
	"sort"
	"strings"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// The kubelet's command registers the logging gates beside the ones
// k8s.io/kubernetes/pkg/features registers (cmd/kubelet/app/server.go).
func init() {
	utilruntime.Must(logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate))
}

// printGates prints every feature gate the kubelet of this build knows,
// as its feature gate sees it at its own version (the emulation version a
// kubelet runs with): name, default, locked to the default, maturity, and
// the gates it depends on (comma-separated, sorted; empty when none or
// before v1.35, gatedeps_*.go). One gate a line, tab-separated, sorted by
// name. topoalign keeps this table
// per release (crates/k8s/src/feature_gates/) to refuse what the kubelet
// refuses and to know each gate's default.
func printGates() {
	all := utilfeature.DefaultMutableFeatureGate.GetAll()
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, string(name))
	}
	sort.Strings(names)
	deps := gateDependencies(utilfeature.DefaultMutableFeatureGate)
	for _, name := range names {
		spec := all[featuregate.Feature(name)]
		maturity := string(spec.PreRelease)
		if spec.PreRelease == featuregate.GA {
			maturity = "GA"
		}
		on := make([]string, 0, len(deps[featuregate.Feature(name)]))
		for _, dep := range deps[featuregate.Feature(name)] {
			on = append(on, string(dep))
		}
		sort.Strings(on)
		fmt.Printf("%s\t%t\t%t\t%s\t%s\n", name, spec.Default, spec.LockToDefault, maturity, strings.Join(on, ","))
	}
}
