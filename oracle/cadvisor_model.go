//go:build k8s_1_37

package main

// cAdvisor's machine types as the kubelet imports them from v1.37
// (github.com/google/cadvisor/lib/model).

import cadvisorapi "github.com/google/cadvisor/lib/model"

type (
	machineInfoT  = cadvisorapi.MachineInfo
	numaNodeInfo  = cadvisorapi.Node
	coreInfo      = cadvisorapi.Core
	cacheInfo     = cadvisorapi.Cache
	hugePagesInfo = cadvisorapi.HugePagesInfo
)
