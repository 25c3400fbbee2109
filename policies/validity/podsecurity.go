package validity

import (
	"slices"
	"strconv"
)

// The Pod Security Standards as the PodSecurity admission plugin enforces them
// (pod-security.kubernetes.io/enforce on the namespace), for the fields a policy can set: a
// policy that adds a hostPath volume, a privileged sidecar or a capability to a Pod of a
// `restricted` namespace would get the Pod refused. Each finding names its control and its
// field, so that what the object already had does not count against a policy.

// PodSecurityEnforceLabel is the namespace label that selects the enforced level.
const PodSecurityEnforceLabel = "pod-security.kubernetes.io/enforce"

// baselineCapabilities may be added under the baseline level.
var baselineCapabilities = []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}

// safeSysctls may be set under the baseline level.
var safeSysctls = []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}

// restrictedVolumes are the volume sources the restricted level allows.
var restrictedVolumes = []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected", "secret"}

// seLinuxTypes are the SELinux types the baseline level allows.
var seLinuxTypes = []string{"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}

func (c *checker) podSecurity(spec map[string]any, volumes map[string]any, containers []container) {
	level := c.env.NamespaceLabels[PodSecurityEnforceLabel]
	if level != "baseline" && level != "restricted" {
		return
	}
	restricted := level == "restricted"
	bad := func(fld, msg string) {
		c.add(RulePodSecurity, fld, "violates PodSecurity "+strconv.Quote(level)+": "+msg)
	}
	for _, k := range []string{"hostNetwork", "hostPID", "hostIPC"} {
		if boolOf(spec[k]) {
			bad("spec."+k, "host namespaces are not allowed")
		}
	}
	psc := mapOf(spec["securityContext"])
	for _, s := range listOf(psc["sysctls"]) {
		if name := strOf(mapOf(s)["name"]); !slices.Contains(safeSysctls, name) {
			bad(item("spec.securityContext.sysctls", name), "only safe sysctls are allowed")
		}
	}
	podSeccomp := strOf(mapOf(psc["seccompProfile"])["type"])
	if podSeccomp == "Unconfined" {
		bad("spec.securityContext.seccompProfile.type", "Unconfined is not allowed")
	}
	podNonRoot := boolOf(psc["runAsNonRoot"])
	c.commonSecurity("spec.securityContext", psc, bad)
	for name, v := range volumes {
		for src := range mapOf(v) {
			switch {
			case src == "name":
			case src == "hostPath":
				bad(item("spec.volumes", name), "hostPath volumes are not allowed")
			case restricted && !slices.Contains(restrictedVolumes, src):
				bad(item("spec.volumes", name), src+" volumes are not allowed")
			}
		}
	}
	for _, ct := range containers {
		sc := mapOf(ct.m["securityContext"])
		path := ct.at(".securityContext")
		if boolOf(sc["privileged"]) {
			bad(path+".privileged", "privileged containers are not allowed")
		}
		if pm := strOf(sc["procMount"]); pm != "" && pm != "Default" {
			bad(path+".procMount", "only the Default procMount is allowed")
		}
		if boolOf(mapOf(sc["windowsOptions"])["hostProcess"]) {
			bad(path+".windowsOptions.hostProcess", "host processes are not allowed")
		}
		for _, p := range listOf(ct.m["ports"]) {
			if hp, _ := numOf(mapOf(p)["hostPort"]); hp != 0 {
				bad(ct.at(".ports"), "host ports are not allowed")
				break
			}
		}
		for _, probe := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
			if handlerHost(ct.m[probe]) {
				bad(ct.at("."+probe), "probes may not set a host")
			}
		}
		lifecycle := mapOf(ct.m["lifecycle"])
		for _, hook := range []string{"postStart", "preStop"} {
			if handlerHost(lifecycle[hook]) {
				bad(ct.at(".lifecycle."+hook), "lifecycle handlers may not set a host")
			}
		}
		seccomp := strOf(mapOf(sc["seccompProfile"])["type"])
		if seccomp == "Unconfined" {
			bad(path+".seccompProfile.type", "Unconfined is not allowed")
		}
		c.commonSecurity(path, sc, bad)
		caps := mapOf(sc["capabilities"])
		for _, a := range listOf(caps["add"]) {
			name := strOf(a) // compared as written: CAP_CHOWN is not CHOWN to the plugin
			if (restricted && name != "NET_BIND_SERVICE") || !slices.Contains(baselineCapabilities, name) {
				bad(path+".capabilities.add", "capability "+strOf(a)+" is not allowed")
			}
		}
		if !restricted {
			continue
		}
		if ape, ok := optBool(sc["allowPrivilegeEscalation"]); !ok || ape {
			bad(path+".allowPrivilegeEscalation", "must be false")
		}
		if nonRoot, ok := optBool(sc["runAsNonRoot"]); (ok && !nonRoot) || (!ok && !podNonRoot) {
			bad(path+".runAsNonRoot", "must be true (on the container or the pod)")
		}
		if seccomp == "" {
			seccomp = podSeccomp
		}
		if seccomp != "RuntimeDefault" && seccomp != "Localhost" {
			bad(path+".seccompProfile.type", "must be RuntimeDefault or Localhost (on the container or the pod)")
		}
		dropsAll := false
		for _, d := range listOf(caps["drop"]) {
			dropsAll = dropsAll || strOf(d) == "ALL"
		}
		if !dropsAll {
			bad(path+".capabilities.drop", "must drop ALL")
		}
	}
}

// commonSecurity checks what pod and container security contexts share: SELinux options,
// AppArmor, and (restricted) a non-zero runAsUser.
func (c *checker) commonSecurity(path string, sc map[string]any, bad func(fld, msg string)) {
	se := mapOf(sc["seLinuxOptions"])
	if t := strOf(se["type"]); !slices.Contains(seLinuxTypes, t) {
		bad(path+".seLinuxOptions.type", "SELinux type "+t+" is not allowed")
	}
	if strOf(se["user"]) != "" || strOf(se["role"]) != "" {
		bad(path+".seLinuxOptions", "SELinux user and role may not be set")
	}
	if strOf(mapOf(sc["appArmorProfile"])["type"]) == "Unconfined" {
		bad(path+".appArmorProfile.type", "Unconfined is not allowed")
	}
	if c.env.NamespaceLabels[PodSecurityEnforceLabel] == "restricted" {
		if u, ok := numOf(sc["runAsUser"]); ok && u == 0 {
			bad(path+".runAsUser", "must not be 0")
		}
	}
}

// handlerHost reports whether a probe or lifecycle handler sends its check to another host.
func handlerHost(v any) bool {
	h := mapOf(v)
	return strOf(mapOf(h["httpGet"])["host"]) != "" || strOf(mapOf(h["tcpSocket"])["host"]) != ""
}
