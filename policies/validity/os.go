package validity

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Cross-field rules of a Pod that policies from different layers can break together (property
// findings 19 and 20): what spec.os.name forbids, host processes, and fields that exclude each
// other. As the API server's validation (pkg/apis/core/validation: validateLinux,
// validateWindows, validateWindowsHostProcessPod, validateShareProcessNamespace, the
// schedulingGates and hostnameOverride rules).

// isIPCSysctl reports whether a sysctl belongs to the IPC namespace.
func isIPCSysctl(name string) bool {
	switch {
	case name == "kernel.sem", strings.HasPrefix(name, "kernel.shm"), strings.HasPrefix(name, "kernel.msg"), strings.HasPrefix(name, "fs.mqueue."):
		return true
	}
	return false
}

// windowsForbiddenPod and windowsForbiddenContainer are the security-context members a windows
// Pod may not set, in the pod's and in each container's.
var (
	windowsForbiddenPod = []string{"appArmorProfile", "seLinuxOptions", "seccompProfile", "fsGroup", "fsGroupChangePolicy",
		"sysctls", "runAsUser", "runAsGroup", "supplementalGroups", "supplementalGroupsPolicy", "seLinuxChangePolicy"}
	windowsForbiddenContainer = []string{"appArmorProfile", "seLinuxOptions", "seccompProfile", "capabilities",
		"readOnlyRootFilesystem", "privileged", "allowPrivilegeEscalation", "procMount", "runAsUser", "runAsGroup"}
)

// podOS checks the rules that tie fields of a Pod together.
func (c *checker) podOS(spec map[string]any, containers []container) {
	psc := mapOf(spec["securityContext"])
	switch strOf(mapOf(spec["os"])["name"]) {
	case "linux":
		c.linuxOS(psc, containers)
	case "windows":
		c.windowsOS(spec, psc, containers)
	}
	c.hostProcess(spec, psc, containers)
	c.exclusiveFields(spec, psc)
	c.resizeRestarts(spec, containers)
	c.privilegeEscalation(containers)
	if hu, set := optBool(spec["hostUsers"]); set && !hu {
		for _, k := range []string{"hostPID", "hostIPC", "hostNetwork"} {
			if boolOf(spec[k]) {
				c.add(RulePodFieldConflict, "spec."+k, "may not be true when hostUsers is false")
			}
		}
	}
}

// linuxOS checks a Pod whose spec.os.name is linux: neither the pod nor a container may set
// windows options.
func (c *checker) linuxOS(psc map[string]any, containers []container) {
	if psc["windowsOptions"] != nil {
		c.add(RulePodOS, "spec.securityContext.windowsOptions", "windows options cannot be set for a linux pod")
	}
	for _, ct := range containers {
		if mapOf(ct.m["securityContext"])["windowsOptions"] != nil {
			c.add(RulePodOS, ct.at(".securityContext.windowsOptions"), "windows options cannot be set for a linux pod")
		}
	}
}

// windowsOS checks a Pod whose spec.os.name is windows: the security-context members, the
// pod-level resources and the host namespaces a windows Pod may not set (validateWindows).
func (c *checker) windowsOS(spec, psc map[string]any, containers []container) {
	for _, k := range windowsForbiddenPod {
		if psc[k] != nil {
			c.add(RulePodOS, "spec.securityContext."+k, "cannot be set for a windows pod")
		}
	}
	if spec["resources"] != nil { // pod-level resources (validateWindows)
		c.own(RulePodOS, "spec.resources", "may not be set for a windows pod", func() string { return "spec.resources" })
	}
	for _, k := range []string{"hostUsers", "hostPID", "hostIPC", "shareProcessNamespace"} {
		if spec[k] != nil {
			c.add(RulePodOS, "spec."+k, "cannot be set for a windows pod")
		}
	}
	for _, ct := range containers {
		sc := mapOf(ct.m["securityContext"])
		for _, k := range windowsForbiddenContainer {
			if sc[k] != nil {
				c.add(RulePodOS, ct.at(".securityContext."+k), "cannot be set for a windows pod")
			}
		}
	}
}

// hostProcess checks the Pod's host processes (validateWindowsHostProcessPod): all containers
// or none, each as the pod says when both say, and with hostNetwork.
func (c *checker) hostProcess(spec, psc map[string]any, containers []container) {
	podHP, podSet := optBool(mapOf(psc["windowsOptions"])["hostProcess"])
	hp := 0
	for _, ct := range containers {
		v, set := optBool(mapOf(mapOf(ct.m["securityContext"])["windowsOptions"])["hostProcess"])
		if set && podSet && v != podHP {
			c.add(RulePodOS, ct.at(".securityContext.windowsOptions.hostProcess"), "must equal the pod's hostProcess")
		}
		if (set && v) || (!set && podSet && podHP) {
			hp++
		}
	}
	if hp > 0 {
		if hp != len(containers) {
			c.add(RulePodOS, "spec.securityContext.windowsOptions.hostProcess", "if any container is a hostProcess container, all must be")
		}
		if !boolOf(spec["hostNetwork"]) {
			c.add(RulePodOS, "spec.hostNetwork", "must be true if the pod has hostProcess containers")
		}
	}
}

// exclusiveFields checks the pod fields that exclude each other, and the sysctls of a
// namespace the Pod shares with its host (validateSysctls), which its host namespace forbids.
func (c *checker) exclusiveFields(spec, psc map[string]any) {
	if boolOf(spec["shareProcessNamespace"]) && boolOf(spec["hostPID"]) {
		c.add(RulePodFieldConflict, "spec.shareProcessNamespace", "shareProcessNamespace and hostPID cannot both be enabled")
	}
	if strOf(spec["nodeName"]) != "" && len(listOf(spec["schedulingGates"])) > 0 {
		c.add(RulePodFieldConflict, "spec.nodeName", "cannot be set until all schedulingGates have been cleared")
	}
	if spec["hostnameOverride"] != nil {
		if boolOf(spec["setHostnameAsFQDN"]) {
			c.add(RulePodFieldConflict, "spec.hostnameOverride", "may not be set when setHostnameAsFQDN is true")
		}
		if boolOf(spec["hostNetwork"]) {
			c.add(RulePodFieldConflict, "spec.hostnameOverride", "may not be set when hostNetwork is true")
		}
	}
	for _, sc := range listOf(psc["sysctls"]) {
		name := strOf(mapOf(sc)["name"])
		switch {
		case boolOf(spec["hostNetwork"]) && strings.HasPrefix(name, "net."):
			c.add(RulePodFieldConflict, item("spec.securityContext.sysctls", name), "may not be set when hostNetwork is true")
		case boolOf(spec["hostIPC"]) && isIPCSysctl(name):
			c.add(RulePodFieldConflict, item("spec.securityContext.sysctls", name), "may not be set when hostIPC is true")
		}
	}
}

// resizeRestarts checks the containers' resize policies that need a restart the Pod will not
// do: RestartContainer on a regular init container, or under the pod's restartPolicy Never.
func (c *checker) resizeRestarts(spec map[string]any, containers []container) {
	never := strOf(spec["restartPolicy"]) == string(corev1.RestartPolicyNever)
	for _, ct := range containers {
		sidecar := ct.list == "initContainers" && strOf(ct.m["restartPolicy"]) == string(corev1.ContainerRestartPolicyAlways)
		for _, rp := range listOf(ct.m["resizePolicy"]) {
			if strOf(mapOf(rp)["restartPolicy"]) != string(corev1.RestartContainer) {
				continue
			}
			switch {
			case ct.list == "initContainers" && !sidecar:
				c.add(RulePodFieldConflict, ct.at(".resizePolicy"), "RestartContainer is for sidecar init containers only")
			case never && (ct.list == "containers" || sidecar): // a sidecar is checked against the pod's policy too
				c.add(RulePodFieldConflict, ct.at(".resizePolicy"), "must be NotRequired when the pod's restartPolicy is Never")
			}
		}
	}
}

// privilegeEscalation checks that a container that may not escalate is neither privileged nor
// holds CAP_SYS_ADMIN (validateSecurityContext): a platform's allowPrivilegeEscalation: false
// meets a user's privileged container.
func (c *checker) privilegeEscalation(containers []container) {
	for _, ct := range containers {
		sc := mapOf(ct.m["securityContext"])
		if ape, set := optBool(sc["allowPrivilegeEscalation"]); !set || ape {
			continue
		}
		if boolOf(sc["privileged"]) {
			c.add(RulePodFieldConflict, ct.at(".securityContext"), "cannot set `allowPrivilegeEscalation` to false and `privileged` to true")
		}
		for _, capability := range listOf(mapOf(sc["capabilities"])["add"]) {
			if strOf(capability) == "CAP_SYS_ADMIN" {
				c.add(RulePodFieldConflict, ct.at(".securityContext"), "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN")
			}
		}
	}
}
