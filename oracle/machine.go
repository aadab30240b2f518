package main

// The scenario's topology as cAdvisor's MachineInfo, the kubelet's only view
// of the machine. Harness code: how each field is filled is the
// "Interpretations" section of the conformance README.

import (
	"sort"
	"strconv"
)

const (
	pageSize2Mi = 2 << 20
	pageSize1Gi = 1 << 30
)

func machineInfo(s *scenario, nodes []numaNode) *machineInfoT {
	// Like cAdvisor on x86-64, every NUMA node reports the 2Mi and the 1Gi
	// pool (and any other size the scenario uses), empty where the scenario
	// gives none.
	sizes := map[int64]bool{pageSize2Mi: true, pageSize1Gi: true}
	for _, n := range nodes {
		for size := range n.HugePages {
			sizes[size] = true
		}
	}
	sizeList := make([]int64, 0, len(sizes))
	for size := range sizes {
		sizeList = append(sizeList, size)
	}
	// cAdvisor lists the pools in directory order of
	// /sys/kernel/mm/hugepages ("hugepages-1048576kB" < "hugepages-2048kB").
	sort.Slice(sizeList, func(i, j int) bool {
		return kbName(sizeList[i]) < kbName(sizeList[j])
	})

	m := &machineInfoT{NumCores: len(s.Topology.CPUs)}
	machinePages := map[int64]uint64{}
	sockets := map[int]bool{}
	physical := map[int]bool{}
	for _, n := range nodes {
		node := numaNodeInfo{Id: n.ID, Memory: uint64(n.Memory), Distances: n.Distances}
		for _, size := range sizeList {
			pages := uint64(n.HugePages[size] / size)
			node.HugePages = append(node.HugePages, hugePagesInfo{PageSize: uint64(size / 1024), NumPages: pages})
			machinePages[size] += pages
		}
		cores := map[int]*coreInfo{}
		var coreIDs []int
		for _, c := range s.Topology.CPUs {
			if *c.NUMA != n.ID {
				continue
			}
			sockets[*c.Socket] = true
			physical[*c.Core] = true
			core, ok := cores[*c.Core]
			if !ok {
				core = &coreInfo{Id: *c.Core, SocketID: *c.Socket}
				if c.UncoreCache != nil {
					core.UncoreCaches = []cacheInfo{{Id: *c.UncoreCache, Level: 3, Type: "Unified"}}
				}
				cores[*c.Core] = core
				coreIDs = append(coreIDs, *c.Core)
			}
			core.Threads = append(core.Threads, *c.ID)
		}
		sort.Ints(coreIDs)
		for _, id := range coreIDs {
			sort.Ints(cores[id].Threads)
			node.Cores = append(node.Cores, *cores[id])
		}
		m.Topology = append(m.Topology, node)
		m.MemoryCapacity += uint64(n.Memory)
	}
	for _, size := range sizeList {
		m.HugePages = append(m.HugePages, hugePagesInfo{PageSize: uint64(size / 1024), NumPages: machinePages[size]})
	}
	m.NumSockets = len(sockets)
	m.NumPhysicalCores = len(physical)
	return m
}

func kbName(size int64) string {
	return "hugepages-" + strconv.FormatInt(size/1024, 10) + "kB"
}
