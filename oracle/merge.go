package main

// oracle merge: the topology manager's hint merge, alone — the real
// policies' Merge (NewBestEffortPolicy, NewRestrictedPolicy,
// NewSingleNumaNodePolicy of pkg/kubelet/cm/topologymanager, with a
// NUMAInfo made by NewNUMAInfo) on hint sets read from stdin, for the
// merge differential of crates/difftest (`difftest merge`). No node, no
// managers, no mount namespace: a case costs what the kubelet's merge
// costs, a few microseconds for small hint sets.
//
// Each line of stdin is one case:
//
//	{"id":7,"nodes":[0,1,2,3],"distances":[[10,20,..],..],"closest":true,
//	 "maxNodes":8,"policies":["best-effort","single-numa-node"],
//	 "providers":[null,{},{"cpu":[{"mask":3,"preferred":true},
//	                             {"mask":null,"preferred":false}],
//	                      "memory":null,"example.com/gpu":[]}]}
//
//   - nodes: the NUMA ids (cAdvisor's topology, in this order);
//   - distances: one row per NUMA id, indexed by NUMA id (node i's row is
//     distances[i]); given to NewNUMAInfo as each node's Distances;
//   - closest, maxNodes: PolicyOptions (prefer-closest-numa-nodes,
//     max-allowable-numa-nodes; the merge reads only the first);
//   - providers: the providersHints argument of Merge, one map per hint
//     provider. null is a nil map, {} an empty one; per resource null is a
//     nil list ("no preference"), [] an empty one ("cannot be placed");
//     mask is the affinity's bits (bit i = NUMA node i), null for a nil
//     affinity ("any NUMA node").
//
// Each answer is one line of stdout, in the order asked, one entry per
// policy in the case's order:
//
//	{"id":7,"answers":[{"mask":1,"preferred":true,"admit":true},...]}
//
// mask null: the merged hint has a nil affinity. A case the harness cannot
// read, or a panic in the kubelet code, answers {"id":7,"error":"..."} and
// the stream goes on. Answers are flushed whenever stdin has nothing more
// buffered, so a caller may wait for an answer before writing the next
// case.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"
)

type mergeHint struct {
	Mask      *uint64 `json:"mask"`
	Preferred bool    `json:"preferred"`
}

type mergeCase struct {
	ID        uint64                   `json:"id"`
	Nodes     []int                    `json:"nodes"`
	Distances [][]uint64               `json:"distances"`
	Closest   bool                     `json:"closest"`
	MaxNodes  int                      `json:"maxNodes"`
	Policies  []string                 `json:"policies"`
	Providers []map[string][]mergeHint `json:"providers"`
}

type mergeAnswer struct {
	mask      *uint64
	preferred bool
	admit     bool
}

func mergeCommand(args []string) int {
	if len(args) != 0 {
		usage()
	}
	// 1.32-1.34 log through klog's global logger (a provider without a
	// preference is logged at every merge).
	klog.SetLogger(logr.Discard())
	if err := mergeStream(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "oracle merge:", err)
		return 1
	}
	return 0
}

// mergeStream answers every case of in on out.
func mergeStream(in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriterSize(out, 1<<16)
	var reply []byte
	for {
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			reply = answerMergeLine(reply[:0], line)
			if _, werr := w.Write(reply); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return w.Flush()
		}
		if err != nil {
			return err
		}
	}
}

// answerMergeLine appends the answer line to one case line.
func answerMergeLine(buf, line []byte) []byte {
	var c mergeCase
	if err := json.Unmarshal(line, &c); err != nil {
		return appendMergeError(buf, c.ID, fmt.Sprintf("invalid case: %v", err))
	}
	answers, err := mergeCaseAnswers(&c)
	if err != nil {
		return appendMergeError(buf, c.ID, err.Error())
	}
	buf = append(buf, `{"id":`...)
	buf = strconv.AppendUint(buf, c.ID, 10)
	buf = append(buf, `,"answers":[`...)
	for i, a := range answers {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"mask":`...)
		if a.mask == nil {
			buf = append(buf, "null"...)
		} else {
			buf = strconv.AppendUint(buf, *a.mask, 10)
		}
		buf = append(buf, `,"preferred":`...)
		buf = strconv.AppendBool(buf, a.preferred)
		buf = append(buf, `,"admit":`...)
		buf = strconv.AppendBool(buf, a.admit)
		buf = append(buf, '}')
	}
	return append(buf, "]}\n"...)
}

func appendMergeError(buf []byte, id uint64, text string) []byte {
	quoted, _ := json.Marshal(text)
	buf = append(buf, `{"id":`...)
	buf = strconv.AppendUint(buf, id, 10)
	buf = append(buf, `,"error":`...)
	buf = append(buf, quoted...)
	return append(buf, "}\n"...)
}

// mergeCaseAnswers runs the case's policies; a panic in the kubelet code
// becomes an error.
func mergeCaseAnswers(c *mergeCase) (answers []mergeAnswer, err error) {
	defer func() {
		if p := recover(); p != nil {
			answers, err = nil, fmt.Errorf("panic in the kubelet code: %v", p)
		}
	}()
	opts := topologymanager.PolicyOptions{
		PreferClosestNUMA:     c.Closest,
		MaxAllowableNUMANodes: c.MaxNodes,
	}
	topology := make([]numaNodeInfo, len(c.Nodes))
	for i, id := range c.Nodes {
		topology[i].Id = id
		if c.Distances != nil {
			if id < 0 || id >= len(c.Distances) {
				return nil, fmt.Errorf("no distance row for NUMA node %d", id)
			}
			topology[i].Distances = c.Distances[id]
		}
	}
	numaInfo, err := topologymanager.NewNUMAInfo(topology, opts)
	if err != nil {
		return nil, err
	}
	// One conversion for every policy: Merge reads the lists and never
	// writes them.
	hints, err := kubeletHints(c.Providers)
	if err != nil {
		return nil, err
	}
	answers = make([]mergeAnswer, 0, len(c.Policies))
	for _, name := range c.Policies {
		var policy topologymanager.Policy
		switch name {
		case topologymanager.PolicyBestEffort:
			policy = topologymanager.NewBestEffortPolicy(numaInfo, opts)
		case topologymanager.PolicyRestricted:
			policy = topologymanager.NewRestrictedPolicy(numaInfo, opts)
		case topologymanager.PolicySingleNumaNode:
			policy = topologymanager.NewSingleNumaNodePolicy(numaInfo, opts)
		default:
			return nil, fmt.Errorf("unknown policy %q", name)
		}
		best, admit := policyMerge(policy, hints)
		a := mergeAnswer{preferred: best.Preferred, admit: admit}
		if best.NUMANodeAffinity != nil {
			var bits uint64
			for _, b := range best.NUMANodeAffinity.GetBits() {
				bits |= 1 << uint(b)
			}
			a.mask = &bits
		}
		answers = append(answers, a)
	}
	return answers, nil
}

// kubeletHints turns the case's providers into Merge's argument, keeping
// nil maps and lists nil and empty ones empty.
func kubeletHints(providers []map[string][]mergeHint) ([]map[string][]topologymanager.TopologyHint, error) {
	out := make([]map[string][]topologymanager.TopologyHint, len(providers))
	for i, p := range providers {
		if p == nil {
			continue
		}
		m := make(map[string][]topologymanager.TopologyHint, len(p))
		for resource, hints := range p {
			if hints == nil {
				m[resource] = nil
				continue
			}
			list := make([]topologymanager.TopologyHint, len(hints))
			for j, h := range hints {
				list[j].Preferred = h.Preferred
				if h.Mask != nil {
					mask, err := maskOf(*h.Mask)
					if err != nil {
						return nil, err
					}
					list[j].NUMANodeAffinity = mask
				}
			}
			m[resource] = list
		}
		out[i] = m
	}
	return out, nil
}

func maskOf(bits uint64) (bitmask.BitMask, error) {
	var nodes []int
	for i := 0; i < 64; i++ {
		if bits&(1<<uint(i)) != 0 {
			nodes = append(nodes, i)
		}
	}
	return bitmask.NewBitMask(nodes...)
}
