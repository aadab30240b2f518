package main

import (
	"fmt"
	"sort"

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
// kubelet runs with): name, default, locked to the default, maturity. One
// gate a line, tab-separated, sorted by name. topoalign keeps this table
// per release (crates/k8s/src/feature_gates/) to refuse what the kubelet
// refuses and to know each gate's default.
func printGates() {
	all := utilfeature.DefaultMutableFeatureGate.GetAll()
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		spec := all[featuregate.Feature(name)]
		maturity := string(spec.PreRelease)
		if spec.PreRelease == featuregate.GA {
			maturity = "GA"
		}
		fmt.Printf("%s\t%t\t%t\t%s\n", name, spec.Default, spec.LockToDefault, maturity)
	}
}
