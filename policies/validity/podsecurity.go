package validity

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podpatch/podpatch/internal/jsontree"
)

// The Pod Security Standards as the PodSecurity admission plugin enforces them
// (pod-security.kubernetes.io/enforce and enforce-version on the namespace), for the fields a
// policy can set: a policy that adds a hostPath volume, a privileged sidecar or a capability to
// a Pod of a `restricted` namespace would get the Pod refused. Each finding names its control
// and its field, so that what the object already had does not count against a policy.
//
// A port of k8s.io/pod-security-admission/policy (v0.37.2), control by control and version by
// version, read from the JSON tree instead of a decoded corev1.Pod: the library is its oracle in
// podsecurity_oracle_test.go, and docs/validity.md ("Pod Security") says why it is a port.

// PodSecurityEnforceLabel is the namespace label that selects the enforced level.
const PodSecurityEnforceLabel = "pod-security.kubernetes.io/enforce"

// PodSecurityEnforceVersionLabel is the namespace label that selects the version of the
// standards the level is enforced at: "v1.<minor>" or "latest", the default.
const PodSecurityEnforceVersionLabel = "pod-security.kubernetes.io/enforce-version"

// podSecurityLatest is the minor version of the newest controls the port knows (those of
// k8s.io/pod-security-admission v0.37.2): "latest", and any later version, is checked at it.
const podSecurityLatest = 37

// baselineCapabilities may be added under the baseline level.
var baselineCapabilities = []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}

// safeSysctls may be set under the baseline level, each from the version that allowed it.
var safeSysctls = []struct {
	name  string
	since int
}{{"kernel.shm_rmid_forced", 0}, {"net.ipv4.ip_local_port_range", 0}, {"net.ipv4.tcp_syncookies", 0},
	{"net.ipv4.ping_group_range", 0}, {"net.ipv4.ip_unprivileged_port_start", 0}, {"net.ipv4.ip_local_reserved_ports", 27},
	{"net.ipv4.tcp_keepalive_time", 29}, {"net.ipv4.tcp_fin_timeout", 29}, {"net.ipv4.tcp_keepalive_intvl", 29},
	{"net.ipv4.tcp_keepalive_probes", 29}, {"net.ipv4.tcp_rmem", 32}, {"net.ipv4.tcp_wmem", 32},
	{"net.ipv4.tcp_slow_start_after_idle", 37}, {"net.ipv4.tcp_notsent_lowat", 37}}

// restrictedVolumes are the volume sources the restricted level allows.
var restrictedVolumes = []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected", "secret"}

// seLinuxTypes are the SELinux types the baseline level allows; container_engine_t from v1.31.
var seLinuxTypes = []string{"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}

// The controls, named as the library's checks (policy.Check.ID), for the oracle test.
const (
	psHostNamespaces, psPrivileged, psHostPorts, psHostProbes = "hostNamespaces", "privileged", "hostPorts", "hostProbesAndHostLifecycle"
	psCapabilities, psCapabilitiesRestricted                  = "capabilities_baseline", "capabilities_restricted"
	psHostPathVolumes, psRestrictedVolumes                    = "hostPathVolumes", "restrictedVolumes"
	psSeccomp, psSeccompRestricted, psProcMount               = "seccompProfile_baseline", "seccompProfile_restricted", "procMount"
	psSELinux, psAppArmor, psSysctls, psHostProcess           = "seLinuxOptions", "appArmorProfile", "sysctls", "windowsHostProcess"
	psPrivilegeEscalation, psRunAsNonRoot, psRunAsUser        = "allowPrivilegeEscalation", "runAsNonRoot", "runAsUser"
)

// podSecurityPolicy is the level and version a namespace enforces.
type podSecurityPolicy struct {
	restricted bool
	minor      int    // of version 1.minor; podSecurityLatest for "latest" and later
	version    string // as the label pins it ("v1.24"), "" for latest
}

// podSecurityPolicyOf reads a namespace's labels as the PodSecurity plugin does
// (api.PolicyToEvaluate): false when it enforces nothing (no label, or privileged). An
// unparsable level is restricted and an unparsable version latest: the plugin fails closed
// (it refuses such labels on a namespace created or changed with it enabled).
func podSecurityPolicyOf(labels map[string]string) (podSecurityPolicy, bool) {
	level, ok := labels[PodSecurityEnforceLabel]
	if !ok || level == "privileged" {
		return podSecurityPolicy{}, false
	}
	p := podSecurityPolicy{restricted: level != "baseline", minor: podSecurityLatest}
	v := labels[PodSecurityEnforceVersionLabel]
	if rest, ok := strings.CutPrefix(v, "v1."); ok && rest != "" && (len(rest) == 1 || rest[0] != '0') &&
		strings.Trim(rest, "0123456789") == "" {
		if minor, err := strconv.Atoi(rest); err == nil {
			p.minor, p.version = min(minor, podSecurityLatest), v
		}
	}
	return p, true
}

// String names the policy as the messages do: the level, and the version when one is pinned.
func (p podSecurityPolicy) String() string {
	s := "baseline"
	if p.restricted {
		s = "restricted"
	}
	if p.version != "" {
		s += ":" + p.version
	}
	return s
}

func (c *checker) podSecurity(obj, spec, volumes map[string]any, containers []container) {
	p, ok := podSecurityPolicyOf(c.env.NamespaceLabels)
	if !ok {
		return
	}
	p.check(obj, spec, volumes, containers, func(_, fld, msg string) {
		c.add(RulePodSecurity, fld, "violates PodSecurity "+strconv.Quote(p.String())+": "+msg)
	})
}

// check calls bad with the control, the field and the message of every finding.
func (p podSecurityPolicy) check(obj, spec, volumes map[string]any, containers []container, bad func(control, fld, msg string)) {
	for _, k := range []string{"hostNetwork", "hostPID", "hostIPC"} {
		if boolOf(spec[k]) {
			bad(psHostNamespaces, "spec."+k, "host namespaces are not allowed")
		}
	}
	// From v1.25 the restricted controls of Linux kernel features spare a Windows Pod; from
	// v1.35 the root controls spare a Pod in a user namespace (hostUsers: false), and so does
	// baseline's procMount.
	windows := p.restricted && p.minor >= 25 && strOf(mapOf(spec["os"])["name"]) == string(corev1.Windows)
	userNS := false
	if p.minor >= 35 {
		hostUsers, set := optBool(spec["hostUsers"])
		userNS = set && !hostUsers
	}
	seccompFields := p.minor >= 19 && !windows // before v1.19 seccomp is read from annotations
	psc := mapOf(spec["securityContext"])
	for _, s := range listOf(psc["sysctls"]) {
		if name := strOf(mapOf(s)["name"]); !p.safeSysctl(name) {
			bad(psSysctls, item("spec.securityContext.sysctls", name), "only safe sysctls are allowed")
		}
	}
	podSeccomp := strOf(mapOf(psc["seccompProfile"])["type"])
	if seccompFields {
		p.seccompType(psc, "spec.securityContext", bad)
	}
	podNonRoot, podNonRootSet := optBool(psc["runAsNonRoot"])
	if p.restricted && !userNS && podNonRootSet && !podNonRoot {
		bad(psRunAsNonRoot, "spec.securityContext.runAsNonRoot", "must not be false")
	}
	p.commonSecurity("spec.securityContext", psc, userNS, bad)
	if boolOf(mapOf(psc["windowsOptions"])["hostProcess"]) {
		bad(psHostProcess, "spec.securityContext.windowsOptions.hostProcess", "host processes are not allowed")
	}
	p.annotations(obj, containers, bad)
	for name, v := range volumes {
		for src, x := range mapOf(v) {
			switch {
			case src == "name" || x == nil:
			case src == "hostPath" && !p.restricted:
				bad(psHostPathVolumes, item("spec.volumes", name), "hostPath volumes are not allowed")
			case src == "hostPath":
				bad(psRestrictedVolumes, item("spec.volumes", name), "hostPath volumes are not allowed")
			case p.restricted && !slices.Contains(restrictedVolumes, src):
				bad(psRestrictedVolumes, item("spec.volumes", name), src+" volumes are not allowed")
			}
		}
	}
	pod := podLevel{nonRoot: podNonRoot, seccomp: podSeccomp, windows: windows, userNS: userNS, seccompFields: seccompFields}
	for _, ct := range containers {
		p.container(ct, pod, bad)
	}
}

// podLevel is what a Pod's spec decides for the controls of each of its containers: the pod's
// runAsNonRoot and seccomp profile type, which a container may leave to it, and which controls
// spare the Pod at the policy's version.
type podLevel struct {
	nonRoot       bool   // the pod's runAsNonRoot
	seccomp       string // the pod's seccompProfile type
	windows       bool   // a Windows Pod: the restricted controls of Linux kernel features spare it (v1.25+)
	userNS        bool   // in a user namespace (hostUsers: false): the root controls spare it (v1.35+)
	seccompFields bool   // seccomp is read from the fields, not from annotations (v1.19+)
}

// container checks one container's fields, with what its Pod decides for it (pod).
func (p podSecurityPolicy) container(ct container, pod podLevel, bad func(control, fld, msg string)) {
	sc := mapOf(ct.m["securityContext"])
	path := ct.at(".securityContext")
	if boolOf(sc["privileged"]) {
		bad(psPrivileged, path+".privileged", "privileged containers are not allowed")
	}
	if pm := strOf(sc["procMount"]); pm != "" && pm != string(corev1.DefaultProcMount) && (p.restricted || !pod.userNS) {
		bad(psProcMount, path+".procMount", "only the Default procMount is allowed")
	}
	if boolOf(mapOf(sc["windowsOptions"])["hostProcess"]) {
		bad(psHostProcess, path+".windowsOptions.hostProcess", "host processes are not allowed")
	}
	for _, port := range listOf(ct.m["ports"]) {
		if hp, _ := numOf(mapOf(port)["hostPort"]); hp != 0 {
			bad(psHostPorts, ct.at(".ports"), "host ports are not allowed")
			break
		}
	}
	if p.minor >= 34 {
		for _, probe := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
			if handlerHost(ct.m[probe]) {
				bad(psHostProbes, ct.at("."+probe), "probes may not set a host")
			}
		}
		lifecycle := mapOf(ct.m["lifecycle"])
		for _, hook := range []string{"postStart", "preStop"} {
			if handlerHost(lifecycle[hook]) {
				bad(psHostProbes, ct.at(".lifecycle."+hook), "lifecycle handlers may not set a host")
			}
		}
	}
	if pod.seccompFields {
		p.seccompType(sc, path, bad)
	}
	p.commonSecurity(path, sc, pod.userNS, bad)
	caps := mapOf(sc["capabilities"])
	restrictedCaps := p.restricted && p.minor >= 22
	if !restrictedCaps || !pod.windows {
		for _, a := range listOf(caps["add"]) {
			switch name := strOf(a); { // compared as written: CAP_CHOWN is not CHOWN to the plugin
			case restrictedCaps && name != "NET_BIND_SERVICE":
				bad(psCapabilitiesRestricted, path+".capabilities.add", "capability "+name+" is not allowed")
			case !restrictedCaps && !slices.Contains(baselineCapabilities, name):
				bad(psCapabilities, path+".capabilities.add", "capability "+name+" is not allowed")
			}
		}
	}
	if !p.restricted {
		return
	}
	if ape, ok := optBool(sc["allowPrivilegeEscalation"]); (!ok || ape) && p.minor >= 8 && !pod.windows {
		bad(psPrivilegeEscalation, path+".allowPrivilegeEscalation", "must be false")
	}
	if nonRoot, ok := optBool(sc["runAsNonRoot"]); ((ok && !nonRoot) || (!ok && !pod.nonRoot)) && !pod.userNS {
		bad(psRunAsNonRoot, path+".runAsNonRoot", "must be true (on the container or the pod)")
	}
	if seccomp := strOf(mapOf(sc["seccompProfile"])["type"]); pod.seccompFields && seccomp == "" &&
		pod.seccomp != string(corev1.SeccompProfileTypeRuntimeDefault) && pod.seccomp != string(corev1.SeccompProfileTypeLocalhost) {
		bad(psSeccompRestricted, path+".seccompProfile.type", "must be RuntimeDefault or Localhost (on the container or the pod)")
	}
	if restrictedCaps && !pod.windows && !slices.ContainsFunc(listOf(caps["drop"]), func(d any) bool { return strOf(d) == "ALL" }) {
		bad(psCapabilitiesRestricted, path+".capabilities.drop", "must drop ALL")
	}
}

// safeSysctl reports whether the baseline level allows a sysctl at the policy's version.
func (p podSecurityPolicy) safeSysctl(name string) bool {
	for _, s := range safeSysctls {
		if s.name == name {
			return s.since <= p.minor
		}
	}
	return false
}

// seccompType checks the seccomp profile a pod or container security context sets (v1.19+):
// RuntimeDefault or Localhost, and (restricted) one of them on the container or the pod.
func (p podSecurityPolicy) seccompType(sc map[string]any, path string, bad func(control, fld, msg string)) {
	profile := mapOf(sc["seccompProfile"])
	if profile == nil {
		return
	}
	control := psSeccomp
	if p.restricted {
		control = psSeccompRestricted
	}
	switch t := strOf(profile["type"]); corev1.SeccompProfileType(t) {
	case corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeLocalhost:
	case corev1.SeccompProfileTypeUnconfined:
		bad(control, path+".seccompProfile.type", "Unconfined is not allowed")
	default:
		bad(control, path+".seccompProfile.type", "type "+strconv.Quote(t)+" is not allowed")
	}
}

// commonSecurity checks what pod and container security contexts share: SELinux options,
// AppArmor, and (restricted, v1.23+) a non-zero runAsUser.
func (p podSecurityPolicy) commonSecurity(path string, sc map[string]any, userNS bool, bad func(control, fld, msg string)) {
	se := mapOf(sc["seLinuxOptions"])
	if t := strOf(se["type"]); !slices.Contains(seLinuxTypes, t) || (t == "container_engine_t" && p.minor < 31) {
		bad(psSELinux, path+".seLinuxOptions.type", "SELinux type "+t+" is not allowed")
	}
	if strOf(se["user"]) != "" || strOf(se["role"]) != "" {
		bad(psSELinux, path+".seLinuxOptions", "SELinux user and role may not be set")
	}
	if profile := mapOf(sc["appArmorProfile"]); profile != nil {
		switch t := strOf(profile["type"]); corev1.AppArmorProfileType(t) {
		case corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeLocalhost:
		case corev1.AppArmorProfileTypeUnconfined:
			bad(psAppArmor, path+".appArmorProfile.type", "Unconfined is not allowed")
		default:
			bad(psAppArmor, path+".appArmorProfile.type", "type "+strconv.Quote(t)+" is not allowed")
		}
	}
	if p.restricted && p.minor >= 23 && !userNS {
		if u, ok := numOf(sc["runAsUser"]); ok && u == 0 {
			bad(psRunAsUser, path+".runAsUser", "must not be 0")
		}
	}
}

// annotations checks the deprecated annotations the plugin still reads: AppArmor profiles, and
// before v1.19 seccomp profiles.
func (p podSecurityPolicy) annotations(obj map[string]any, containers []container, bad func(control, fld, msg string)) {
	check := func(key, value string) {
		if rest, ok := strings.CutPrefix(key, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix); ok {
			if value != "" && value != corev1.DeprecatedAppArmorBetaProfileRuntimeDefault &&
				!strings.HasPrefix(value, corev1.DeprecatedAppArmorBetaProfileNamePrefix) {
				bad(psAppArmor, item("metadata.annotations", key), "AppArmor profile "+value+" is not allowed (container "+rest+")")
			}
			return
		}
		if p.minor >= 19 || value == corev1.SeccompProfileRuntimeDefault || value == corev1.DeprecatedSeccompProfileDockerDefault ||
			strings.HasPrefix(value, corev1.SeccompLocalhostProfileNamePrefix) {
			return
		}
		if key == corev1.SeccompPodAnnotationKey || slices.ContainsFunc(containers, func(ct container) bool {
			return key == corev1.SeccompContainerAnnotationKeyPrefix+ct.name
		}) {
			bad(psSeccomp, item("metadata.annotations", key), "seccomp profile "+value+" is not allowed")
		}
	}
	switch ann := annotationsOf(obj).(type) {
	case json.RawMessage:
		jsontree.AllMembers(ann, func(key string, value jsontree.Scalar) { check(key, value.Text) })
	case map[string]any:
		for key, value := range ann {
			check(key, strOf(value))
		}
	}
}

// annotationsOf returns an object's annotations, raw when the tree holds them raw.
func annotationsOf(obj map[string]any) any {
	if raw, ok := obj["metadata"].(json.RawMessage); ok {
		ann, _ := jsontree.Member(raw, "annotations")
		return ann
	}
	return mapOf(obj["metadata"])["annotations"]
}

// handlerHost reports whether a probe or lifecycle handler sends its check to another host.
func handlerHost(v any) bool {
	h := mapOf(v)
	return strOf(mapOf(h["httpGet"])["host"]) != "" || strOf(mapOf(h["tcpSocket"])["host"]) != ""
}
