// Command podfingerprint-vectors prints test vectors of the pod-set
// fingerprint NodeResourceTopology objects carry, computed by the library
// scheduler-plugins' cache checks them with
// (github.com/k8stopologyawareschedwg/podfingerprint, at the version this
// module pins), as JSON: crates/nrt/tests/data/podfingerprint-v001.json.
//
//	cd e2e/scheduler-plugins && go run ./podfingerprint-vectors > ../../crates/nrt/tests/data/podfingerprint-v001.json
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/k8stopologyawareschedwg/podfingerprint"
)

type vector struct {
	// Pods as [namespace, name] pairs, in the order they are added.
	Pods        [][2]string `json:"pods"`
	Fingerprint string      `json:"fingerprint"`
}

func main() {
	sets := [][][2]string{
		{},
		{{"default", "web-0"}},
		{{"default", "web-0"}, {"default", "web-1"}},
		{{"default", "web-1"}, {"default", "web-0"}},
		{{"kube-system", "web-0"}},
		{{"", ""}},
		{{"tenant-a", "trainer-7f9c4d-x2x9z"}, {"tenant-b", "trainer-7f9c4d-x2x9z"}, {"monitoring", "node-exporter-abcde"}},
		{{"ünïcode", "pod-é"}, {"ns", "a-name-of-sixty-three-characters-which-is-the-longest-a-label-may"}},
		{{"default", "same"}, {"default", "same"}},
	}
	// A node full of pods, as the benchmark's fleet holds them.
	var many [][2]string
	for i := range 110 {
		many = append(many, [2]string{fmt.Sprintf("bench-%d", i%3), fmt.Sprintf("pod-%d", i)})
	}
	sets = append(sets, many)

	vectors := make([]vector, 0, len(sets))
	for _, set := range sets {
		fp := podfingerprint.NewFingerprint(len(set))
		for _, pod := range set {
			if err := fp.Add(pod[0], pod[1]); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		vectors = append(vectors, vector{Pods: set, Fingerprint: fp.Sign()})
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	if err := out.Encode(vectors); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
