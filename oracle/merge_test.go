package main

import (
	"bytes"
	"strings"
	"testing"
)

// The merge stream on cases whose answers follow from the kubelet's merge
// rules by hand (policy.go, policy_*.go), not from the engine: the wire
// format (nil against empty maps and lists, masks as bits, answers in the
// policies' order) reaches Merge as meant.
func TestMergeStream(t *testing.T) {
	const all = `"policies":["best-effort","restricted","single-numa-node"]`
	cases := []struct {
		name, in, want string
	}{
		{
			// Preferred {0} and {1} from both providers: the narrowest
			// (lower bits) preferred candidate wins under every policy.
			name: "two providers agree on single nodes",
			in: `{"id":1,"nodes":[0,1],` + all + `,"providers":[` +
				`{"cpu":[{"mask":1,"preferred":true},{"mask":2,"preferred":true},{"mask":3,"preferred":false}]},` +
				`{"memory":[{"mask":1,"preferred":true},{"mask":2,"preferred":true},{"mask":3,"preferred":false}]}]}`,
			want: `{"id":1,"answers":[{"mask":1,"preferred":true,"admit":true},{"mask":1,"preferred":true,"admit":true},{"mask":1,"preferred":true,"admit":true}]}`,
		},
		{
			// An empty list is "cannot be placed": a non-preferred "any"
			// hint, so every node and not preferred; single-numa-node
			// filters that hint out, falls back to every node and reports
			// it as a nil affinity.
			name: "an empty list",
			in:   `{"id":2,"nodes":[0,1],` + all + `,"providers":[{"example.com/gpu":[]}]}`,
			want: `{"id":2,"answers":[{"mask":3,"preferred":false,"admit":true},{"mask":3,"preferred":false,"admit":false},{"mask":null,"preferred":false,"admit":false}]}`,
		},
		{
			// A nil list, a nil map and an empty map are "no preference".
			name: "nil list, nil map, empty map",
			in:   `{"id":3,"nodes":[0,1],` + all + `,"providers":[{"cpu":null},null,{}]}`,
			want: `{"id":3,"answers":[{"mask":3,"preferred":true,"admit":true},{"mask":3,"preferred":true,"admit":true},{"mask":null,"preferred":true,"admit":true}]}`,
		},
		{
			// {0,1} and {0,2}, both preferred and two nodes wide: the
			// narrower by value is {0,1}; the closer (node 2 at 11, node 1
			// at 30 from node 0) is {0,2}.
			name: "prefer-closest-numa-nodes",
			in: `{"id":4,"nodes":[0,1,2],"closest":true,"maxNodes":8,"policies":["best-effort","restricted"],` +
				`"distances":[[10,30,11],[30,10,30],[11,30,10]],` +
				`"providers":[{"cpu":[{"mask":3,"preferred":true},{"mask":5,"preferred":true}]}]}`,
			want: `{"id":4,"answers":[{"mask":5,"preferred":true,"admit":true},{"mask":5,"preferred":true,"admit":true}]}`,
		},
		{
			name: "the same without the option",
			in: `{"id":5,"nodes":[0,1,2],"policies":["best-effort"],` +
				`"providers":[{"cpu":[{"mask":3,"preferred":true},{"mask":5,"preferred":true}]}]}`,
			want: `{"id":5,"answers":[{"mask":3,"preferred":true,"admit":true}]}`,
		},
		{
			name: "an unknown policy",
			in:   `{"id":6,"nodes":[0],"policies":["none"],"providers":[]}`,
			want: `{"id":6,"error":"unknown policy \"none\""}`,
		},
		{
			name: "closest without distances",
			in:   `{"id":7,"nodes":[0],"closest":true,"policies":["best-effort"],"providers":[]}`,
			want: `{"id":7,"error":"error getting NUMA distances from cadvisor"}`,
		},
	}
	var in strings.Builder
	for _, c := range cases {
		in.WriteString(c.in + "\n")
	}
	var out bytes.Buffer
	if err := mergeStream(strings.NewReader(in.String()), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%d answers to %d cases:\n%s", len(lines), len(cases), out.String())
	}
	for i, c := range cases {
		if lines[i] != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, lines[i], c.want)
		}
	}
}
