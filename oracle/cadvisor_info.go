//go:build !k8s_1_37

package main

// cAdvisor's machine types as the kubelet imports them up to v1.36.

import cadvisorapi "github.com/google/cadvisor/info/v1"

type (
	machineInfoT  = cadvisorapi.MachineInfo
	numaNodeInfo  = cadvisorapi.Node
	coreInfo      = cadvisorapi.Core
	cacheInfo     = cadvisorapi.Cache
	hugePagesInfo = cadvisorapi.HugePagesInfo
)
