package validity

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/internal/jsontree"
)

// The port of the Pod Security Standards (podsecurity.go) against its oracle,
// k8s.io/pod-security-admission, the code of the API server's PodSecurity plugin: generated Pods,
// each control's allowed and forbidden values alone and combined, at both levels and every
// version, must get the same verdict and fail the same controls.

// psReasons is the ForbiddenReason of each of the library's checks, the port's control names:
// how the oracle tells which controls failed (the library's results do not carry the check's id).
var psReasons = map[string]string{
	psHostNamespaces: "host namespaces", psPrivileged: "privileged", psHostPorts: "hostPort",
	psHostProbes: "probe or lifecycle host", psCapabilities: "non-default capabilities",
	psCapabilitiesRestricted: "unrestricted capabilities", psHostPathVolumes: "hostPath volumes",
	psRestrictedVolumes: "restricted volume types", psSeccomp: "seccompProfile", psSeccompRestricted: "seccompProfile",
	psProcMount: "procMount", "procMount_restricted": "procMount", psSELinux: "seLinuxOptions",
	psAppArmor: "forbidden AppArmor profile", psSysctls: "forbidden sysctls", psHostProcess: "hostProcess",
	psPrivilegeEscalation: "allowPrivilegeEscalation != false", psRunAsNonRoot: "runAsNonRoot != true", psRunAsUser: "runAsUser=0",
}

// TestPodSecurityControls: the port knows every check of the library and its newest version, so
// that a library upgrade with a new control or version fails here before it passes unported.
func TestPodSecurityControls(t *testing.T) {
	newest := 0
	for _, c := range psapolicy.DefaultChecks() {
		require.Contains(t, psReasons, string(c.ID), "a control of the library the port does not know")
		last := c.Versions[len(c.Versions)-1].MinimumVersion
		newest = max(newest, last.Minor())
	}
	require.Equal(t, newest, podSecurityLatest, "the library's newest version is the port's latest")
	require.Empty(t, psapolicy.ExperimentalChecks(), "experimental checks are not ported")
}

// TestPodSecurityLabels: the port reads the namespace's labels as the plugin does
// (api.PolicyToEvaluate with its default policy, privileged:latest): the level and version
// enforced, an unparsable level as restricted and an unparsable version as latest.
func TestPodSecurityLabels(t *testing.T) {
	defaults := psaapi.Policy{Enforce: psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()}}
	for _, level := range []string{"-", "", "privileged", "baseline", "restricted", "Restricted", "baseline ", "strict"} {
		for _, version := range []string{"-", "", "latest", "Latest", "v1.0", "v1.8", "v1.24", "v1.024", "v1.37", "v1.38", "v1.99",
			"v2.0", "1.24", "v1.24.0", "v1.", "v1.-1", "v1.+2", "v1.99999999999999999999", " v1.24"} {
			labels := map[string]string{}
			if level != "-" {
				labels[PodSecurityEnforceLabel] = level
			}
			if version != "-" {
				labels[PodSecurityEnforceVersionLabel] = version
			}
			want, _ := psaapi.PolicyToEvaluate(labels, defaults)
			p, ok := podSecurityPolicyOf(labels)
			name := fmt.Sprintf("level %q version %q", level, version)
			require.Equal(t, want.Enforce.Level != psaapi.LevelPrivileged, ok, name)
			if !ok {
				continue
			}
			require.Equal(t, want.Enforce.Level == psaapi.LevelRestricted, p.restricted, name)
			wantMinor := podSecurityLatest
			if !want.Enforce.Version.Latest() {
				wantMinor = min(want.Enforce.Version.Minor(), podSecurityLatest)
			}
			require.Equal(t, wantMinor, p.minor, name)
			if p.version == "" {
				require.Equal(t, want.Enforce.String(), p.String()+":latest", name)
			} else {
				require.Equal(t, want.Enforce.String(), p.String(), name)
			}
		}
	}
}

// TestPodSecurityVersion: a namespace pinned to a version is checked by that version's controls,
// and the message names the version.
func TestPodSecurityVersion(t *testing.T) {
	for _, c := range []struct {
		name, level, version, spec string
		want                       []string // the messages
	}{
		{"a probe to another host, latest", "baseline", "", "{containers: [{name: a, image: x, livenessProbe: {httpGet: {host: 10.0.0.1, port: 80}}}]}",
			[]string{`violates PodSecurity "baseline": probes may not set a host`}},
		{"a probe to another host, v1.33", "baseline", "v1.33", "{containers: [{name: a, image: x, livenessProbe: {httpGet: {host: 10.0.0.1, port: 80}}}]}", nil},
		{"a host port, v1.24", "baseline", "v1.24", "{containers: [{name: a, image: x, ports: [{containerPort: 80, hostPort: 80}]}]}",
			[]string{`violates PodSecurity "baseline:v1.24": host ports are not allowed`}},
		{"a sysctl allowed from v1.32, v1.31", "baseline", "v1.31", "{securityContext: {sysctls: [{name: net.ipv4.tcp_rmem, value: '4096 87380 6291456'}]}, containers: [{name: a, image: x}]}",
			[]string{`violates PodSecurity "baseline:v1.31": only safe sysctls are allowed`}},
		{"a sysctl allowed from v1.32, v1.32", "baseline", "v1.32", "{securityContext: {sysctls: [{name: net.ipv4.tcp_rmem, value: '4096 87380 6291456'}]}, containers: [{name: a, image: x}]}", nil},
		{"a sysctl allowed from v1.37, latest", "baseline", "latest", "{securityContext: {sysctls: [{name: net.ipv4.tcp_notsent_lowat, value: '16384'}]}, containers: [{name: a, image: x}]}", nil},
		{"no drop ALL before v1.22", "restricted", "v1.21", "{securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}, containers: [{name: a, image: x, securityContext: {allowPrivilegeEscalation: false}}]}", nil},
		{"drop ALL from v1.22", "restricted", "v1.22", "{securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}, containers: [{name: a, image: x, securityContext: {allowPrivilegeEscalation: false}}]}",
			[]string{`violates PodSecurity "restricted:v1.22": must drop ALL`}},
		{"runAsUser 0 before v1.23", "restricted", "v1.22", "{securityContext: {runAsNonRoot: true, runAsUser: 0, seccompProfile: {type: RuntimeDefault}}, containers: [{name: a, image: x, " + psHardened + "}]}", nil},
		{"runAsUser 0 in a user namespace, v1.35", "restricted", "v1.35", "{hostUsers: false, securityContext: {runAsUser: 0, seccompProfile: {type: RuntimeDefault}}, containers: [{name: a, image: x, " + psHardened + "}]}", nil},
		{"runAsUser 0 in a user namespace, v1.34", "restricted", "v1.34", "{hostUsers: false, securityContext: {runAsNonRoot: true, runAsUser: 0, seccompProfile: {type: RuntimeDefault}}, containers: [{name: a, image: x, " + psHardened + "}]}",
			[]string{`violates PodSecurity "restricted:v1.34": must not be 0`}},
		{"a future version is the latest", "restricted", "v1.99", "{securityContext: {runAsNonRoot: false, seccompProfile: {type: RuntimeDefault}}, containers: [{name: a, image: x, securityContext: {runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}}]}",
			[]string{`violates PodSecurity "restricted:v1.99": must not be false`}},
		{"an unparsable version is the latest", "baseline", "1.24", "{containers: [{name: a, image: x, livenessProbe: {tcpSocket: {host: 10.0.0.1, port: 80}}}]}",
			[]string{`violates PodSecurity "baseline": probes may not set a host`}},
		{"an unparsable level is restricted", "Baseline", "", "{containers: [{name: a, image: x, " + psHardened + "}]}",
			[]string{`violates PodSecurity "restricted": must be true (on the container or the pod)`, `violates PodSecurity "restricted": must be RuntimeDefault or Localhost (on the container or the pod)`}},
		{"privileged", "privileged", "v1.24", "{hostNetwork: true, containers: [{name: a, image: x}]}", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			js, err := yaml.YAMLToJSON([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: " + c.spec))
			require.NoError(t, err)
			labels := map[string]string{PodSecurityEnforceLabel: c.level}
			if c.version != "" {
				labels[PodSecurityEnforceVersionLabel] = c.version
			}
			vs, complete := (&Env{NamespaceLabels: labels}).CheckGiven(js)
			require.True(t, complete)
			var got []string
			for _, v := range vs {
				if v.Rule == RulePodSecurity {
					got = append(got, v.Message)
				}
			}
			require.Equal(t, c.want, got)
		})
	}
}

const psHardened = "securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}"

// TestPodSecurityOracle: the port's verdict on generated Pods — allowed or not, and which
// controls fail — is the library's, at both levels, at every version where one of the library's
// controls changes and the one before it, one past the newest, and latest.
func TestPodSecurityOracle(t *testing.T) {
	ev, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	require.NoError(t, err)
	minors := []int{0, podSecurityLatest + 1}
	for _, c := range psapolicy.DefaultChecks() {
		for _, v := range c.Versions {
			minors = append(minors, v.MinimumVersion.Minor()-1, v.MinimumVersion.Minor())
		}
	}
	slices.Sort(minors)
	versions := []string{"latest"}
	for _, minor := range slices.Compact(minors) {
		versions = append(versions, "v1."+strconv.Itoa(max(minor, 0)))
	}
	versions = slices.Compact(versions)
	pods := oraclePods()
	failures, checked := 0, 0
	for _, pod := range pods {
		js, err := json.Marshal(&pod.pod)
		require.NoError(t, err)
		in := portInputs(js)
		for _, level := range []string{"baseline", "restricted"} {
			for _, version := range versions {
				labels := map[string]string{PodSecurityEnforceLabel: level, PodSecurityEnforceVersionLabel: version}
				lib, errs := psaapi.PolicyToEvaluate(labels, psaapi.Policy{})
				require.Empty(t, errs)
				p, ok := podSecurityPolicyOf(labels)
				require.True(t, ok)
				want := libraryReasons(t, ev, lib.Enforce, &pod.pod)
				controls := in.controls(p)
				got := make([]string, 0, len(controls))
				for _, c := range controls {
					got = append(got, psReasons[c])
				}
				slices.Sort(got)
				got = slices.Compact(got)
				checked++
				if !slices.Equal(want, got) && failures < 20 {
					failures++
					t.Errorf("%s:%s, %s:\n  library: %q\n  port:    %q", level, version, pod.name, want, got)
				}
				if version != "latest" {
					continue
				}
				// The port as the checker runs it finds as much.
				vs, _ := (&Env{NamespaceLabels: labels}).CheckGiven(js)
				n := 0
				for _, v := range vs {
					if v.Rule == RulePodSecurity {
						n++
					}
				}
				require.Equal(t, len(controls), n, "%s:%s, %s", level, version, pod.name)
			}
		}
	}
	t.Logf("%d Pods × %d versions (%s) × 2 levels: %d verdicts compared", len(pods), len(versions), strings.Join(versions, " "), checked)
}

// libraryReasons is what the library finds: the reasons of the controls a Pod fails, sorted.
func libraryReasons(t *testing.T, ev psapolicy.Evaluator, lv psaapi.LevelVersion, pod *corev1.Pod) []string {
	t.Helper()
	res := psapolicy.AggregateCheckResults(ev.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec))
	out := []string{}
	for _, r := range res.ForbiddenReasons {
		if r == "forbidden AppArmor profiles" { // for several
			r = "forbidden AppArmor profile"
		}
		require.True(t, slices.ContainsFunc(slices.Collect(maps.Values(psReasons)), func(v string) bool { return v == r }),
			"a reason of the library the port does not name: %q", r)
		out = append(out, r)
	}
	slices.Sort(out)
	require.Equal(t, !res.Allowed, len(out) > 0)
	return slices.Compact(out)
}

// portCase is a Pod as the checker gives it to the port (rules.go's pod): its tree, its spec, its
// volumes by name and its containers.
type portCase struct {
	obj, spec, volumes map[string]any
	containers         []container
}

func portInputs(js []byte) portCase {
	obj := jsontree.Expand(json.RawMessage(js)).(map[string]any)
	in := portCase{obj: obj, spec: mapOf(obj["spec"]), volumes: map[string]any{}}
	for _, v := range listOf(in.spec["volumes"]) {
		in.volumes[strOf(mapOf(v)["name"])] = v
	}
	for _, list := range []string{"initContainers", "containers"} {
		for _, it := range listOf(in.spec[list]) {
			cm := mapOf(it)
			in.containers = append(in.containers, container{list: list, name: strOf(cm["name"]), m: cm})
		}
	}
	return in
}

// controls is the port's verdict: the controls of its findings.
func (in portCase) controls(p podSecurityPolicy) []string {
	var out []string
	p.check(in.obj, in.spec, in.volumes, in.containers, func(control, _, _ string) { out = append(out, control) })
	return out
}

// oracleCase is a generated Pod.
type oracleCase struct {
	name string
	pod  corev1.Pod
}

// A mutation sets one value of one control's field.
type mutation struct {
	name string
	f    func(*corev1.Pod)
}

// oraclePods are the generated Pods: three bases (bare; hardened at the pod; hardened in every
// container), each with every mutation alone and with random combinations of 2 to 5 mutations
// and modifiers (a fixed seed); the one hardened at the pod, which passes restricted, also with
// every mutation after each modifier that turns a version's exemptions on (Windows, a user
// namespace) or sets what the containers otherwise inherit from the pod.
func oraclePods() []oracleCase {
	bases := []oracleCase{{"bare", basePod(false, false)}, {"hardened pod", basePod(true, false)}, {"hardened containers", basePod(false, true)}}
	muts := mutations()
	modifiers := []mutation{
		{"windows", func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Windows} }},
		{"linux", func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Linux} }},
		{"hostUsers false", func(p *corev1.Pod) { p.Spec.HostUsers = new(false) }},
		{"hostUsers true", func(p *corev1.Pod) { p.Spec.HostUsers = new(true) }},
		{"pod runAsNonRoot true", func(p *corev1.Pod) { podSC(p).RunAsNonRoot = new(true) }},
		{"pod seccomp RuntimeDefault", func(p *corev1.Pod) {
			podSC(p).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		}},
	}
	var out []oracleCase
	add := func(base oracleCase, ms ...mutation) {
		c := oracleCase{name: base.name, pod: *base.pod.DeepCopy()}
		for _, m := range ms {
			c.name += " + " + m.name
			m.f(&c.pod)
		}
		out = append(out, c)
	}
	rng := rand.New(rand.NewPCG(32, 37))
	all := append(slices.Clone(muts), modifiers...)
	for i, base := range bases {
		add(base)
		for _, m := range muts {
			add(base, m)
			if i != 1 {
				continue
			}
			for _, mod := range modifiers { // on the Pod that passes restricted
				add(base, mod, m)
			}
		}
		for range 150 {
			ms := make([]mutation, 2+rng.IntN(4))
			for i := range ms {
				ms[i] = all[rng.IntN(len(all))]
			}
			add(base, ms...)
		}
	}
	return out
}

// basePod is a Pod with an init container and two containers, hardened for the restricted level
// at the pod (runAsNonRoot, seccomp) and in every container (no privilege escalation, drop ALL),
// or in the containers alone.
func basePod(hardenedPod, hardenedContainers bool) corev1.Pod {
	p := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"example.com/a": "b"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "x"}},
			Containers:     []corev1.Container{{Name: "app", Image: "x"}, {Name: "sidecar", Image: "x"}},
			Volumes:        []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	if hardenedPod {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: new(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	}
	for _, c := range allContainers(&p) {
		c.SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: new(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		if hardenedContainers {
			c.SecurityContext.RunAsNonRoot = new(true)
			c.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: new("p.json")}
		}
	}
	return p
}

func allContainers(p *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for i := range p.Spec.InitContainers {
		out = append(out, &p.Spec.InitContainers[i])
	}
	for i := range p.Spec.Containers {
		out = append(out, &p.Spec.Containers[i])
	}
	return out
}

func podSC(p *corev1.Pod) *corev1.PodSecurityContext {
	if p.Spec.SecurityContext == nil {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	return p.Spec.SecurityContext
}

// onContainer makes mutations of a container's security context, one on the app container and
// one on the init container.
func onContainer(name string, f func(*corev1.Container)) []mutation {
	sc := func(c *corev1.Container) {
		if c.SecurityContext == nil {
			c.SecurityContext = &corev1.SecurityContext{}
		}
		f(c)
	}
	return []mutation{
		{"app " + name, func(p *corev1.Pod) { sc(&p.Spec.Containers[0]) }},
		{"init " + name, func(p *corev1.Pod) { sc(&p.Spec.InitContainers[0]) }},
	}
}

func annotate(key, value string) mutation {
	return mutation{"annotation " + key + "=" + value, func(p *corev1.Pod) { p.Annotations[key] = value }}
}

// mutations are every control's allowed and forbidden values.
func mutations() []mutation {
	var ms []mutation
	pod := func(name string, f func(*corev1.Pod)) { ms = append(ms, mutation{name, f}) }
	ctr := func(name string, f func(*corev1.Container)) { ms = append(ms, onContainer(name, f)...) }
	// host namespaces
	pod("hostNetwork", func(p *corev1.Pod) { p.Spec.HostNetwork = true })
	pod("hostPID", func(p *corev1.Pod) { p.Spec.HostPID = true })
	pod("hostIPC", func(p *corev1.Pod) { p.Spec.HostIPC = true })
	// privileged
	ctr("privileged", func(c *corev1.Container) { c.SecurityContext.Privileged = new(true) })
	ctr("not privileged", func(c *corev1.Container) { c.SecurityContext.Privileged = new(false) })
	// capabilities
	for _, capability := range append(slices.Clone(baselineCapabilities), "NET_RAW", "SYS_ADMIN", "CAP_CHOWN", "ALL", "chown") {
		ctr("add "+capability, func(c *corev1.Container) {
			if c.SecurityContext.Capabilities == nil {
				c.SecurityContext.Capabilities = &corev1.Capabilities{}
			}
			c.SecurityContext.Capabilities.Add = append(c.SecurityContext.Capabilities.Add, corev1.Capability(capability))
		})
	}
	for _, drop := range [][]corev1.Capability{nil, {"NET_RAW"}, {"ALL", "NET_RAW"}, {"all"}, {"ALL"}} {
		ctr(fmt.Sprint("drop ", drop), func(c *corev1.Container) {
			if c.SecurityContext.Capabilities == nil {
				c.SecurityContext.Capabilities = &corev1.Capabilities{}
			}
			c.SecurityContext.Capabilities.Drop = drop
		})
	}
	ctr("no capabilities", func(c *corev1.Container) { c.SecurityContext.Capabilities = nil })
	// volumes
	for _, v := range []corev1.VolumeSource{
		{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}, {EmptyDir: &corev1.EmptyDirVolumeSource{}},
		{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}},
		{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}, {CSI: &corev1.CSIVolumeSource{Driver: "d"}},
		{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}, {Projected: &corev1.ProjectedVolumeSource{}},
		{Ephemeral: &corev1.EphemeralVolumeSource{}}, {Image: &corev1.ImageVolumeSource{Reference: "x"}},
		{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}},
		{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/"}}, {GitRepo: &corev1.GitRepoVolumeSource{Repository: "r"}},
		{ISCSI: &corev1.ISCSIVolumeSource{}}, {Glusterfs: &corev1.GlusterfsVolumeSource{}}, {RBD: &corev1.RBDVolumeSource{}},
		{FlexVolume: &corev1.FlexVolumeSource{Driver: "d"}}, {Cinder: &corev1.CinderVolumeSource{}}, {CephFS: &corev1.CephFSVolumeSource{}},
		{Flocker: &corev1.FlockerVolumeSource{}}, {FC: &corev1.FCVolumeSource{}}, {AzureFile: &corev1.AzureFileVolumeSource{}},
		{VsphereVolume: &corev1.VsphereVirtualDiskVolumeSource{}}, {Quobyte: &corev1.QuobyteVolumeSource{}},
		{AzureDisk: &corev1.AzureDiskVolumeSource{}}, {PhotonPersistentDisk: &corev1.PhotonPersistentDiskVolumeSource{}},
		{PortworxVolume: &corev1.PortworxVolumeSource{}}, {ScaleIO: &corev1.ScaleIOVolumeSource{}},
		{StorageOS: &corev1.StorageOSVolumeSource{}}, {GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{}},
		{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{}},
	} {
		js, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		pod("volume "+string(js), func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v" + strconv.Itoa(len(p.Spec.Volumes)), VolumeSource: v})
		})
	}
	// host ports
	for _, hp := range []int32{0, 8080} {
		ctr("hostPort "+strconv.Itoa(int(hp)), func(c *corev1.Container) {
			c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: 80, HostPort: hp})
		})
	}
	// probe and lifecycle hosts
	for _, host := range []string{"", "10.0.0.1"} {
		http := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: host}}
		tcp := corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: host}}
		ctr("livenessProbe httpGet host "+host, func(c *corev1.Container) { c.LivenessProbe = &corev1.Probe{ProbeHandler: http} })
		ctr("readinessProbe tcpSocket host "+host, func(c *corev1.Container) { c.ReadinessProbe = &corev1.Probe{ProbeHandler: tcp} })
		ctr("startupProbe httpGet host "+host, func(c *corev1.Container) { c.StartupProbe = &corev1.Probe{ProbeHandler: http} })
		ctr("postStart httpGet host "+host, func(c *corev1.Container) {
			c.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Host: host}}}
		})
		ctr("preStop tcpSocket host "+host, func(c *corev1.Container) {
			c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Host: host}}}
		})
	}
	// SELinux
	for _, o := range []corev1.SELinuxOptions{{Type: "container_t"}, {Type: "container_init_t"}, {Type: "container_kvm_t"},
		{Type: "container_engine_t"}, {Type: "spc_t"}, {User: "u"}, {Role: "r"}, {Level: "s0:c1,c2"}, {}} {
		pod(fmt.Sprintf("pod seLinuxOptions %+v", o), func(p *corev1.Pod) { podSC(p).SELinuxOptions = &o })
		ctr(fmt.Sprintf("seLinuxOptions %+v", o), func(c *corev1.Container) { c.SecurityContext.SELinuxOptions = &o })
	}
	// procMount
	for _, pm := range []corev1.ProcMountType{corev1.DefaultProcMount, corev1.UnmaskedProcMount} {
		ctr("procMount "+string(pm), func(c *corev1.Container) { c.SecurityContext.ProcMount = &pm })
	}
	// seccomp
	for _, t := range []corev1.SeccompProfileType{corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeLocalhost, corev1.SeccompProfileTypeUnconfined} {
		profile := &corev1.SeccompProfile{Type: t}
		if t == corev1.SeccompProfileTypeLocalhost {
			profile.LocalhostProfile = new("p.json")
		}
		pod("pod seccomp "+string(t), func(p *corev1.Pod) { podSC(p).SeccompProfile = profile })
		ctr("seccomp "+string(t), func(c *corev1.Container) { c.SecurityContext.SeccompProfile = profile })
	}
	pod("no pod seccomp", func(p *corev1.Pod) { podSC(p).SeccompProfile = nil })
	ctr("no seccomp", func(c *corev1.Container) { c.SecurityContext.SeccompProfile = nil })
	for _, v := range []string{"unconfined", "runtime/default", "docker/default", "localhost/p.json", ""} {
		ms = append(ms, annotate(corev1.SeccompPodAnnotationKey, v), annotate(corev1.SeccompContainerAnnotationKeyPrefix+"app", v),
			annotate(corev1.SeccompContainerAnnotationKeyPrefix+"init", v), annotate(corev1.SeccompContainerAnnotationKeyPrefix+"nobody", v))
	}
	// AppArmor
	for _, t := range []corev1.AppArmorProfileType{corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeLocalhost, corev1.AppArmorProfileTypeUnconfined} {
		profile := &corev1.AppArmorProfile{Type: t}
		if t == corev1.AppArmorProfileTypeLocalhost {
			profile.LocalhostProfile = new("p")
		}
		pod("pod appArmor "+string(t), func(p *corev1.Pod) { podSC(p).AppArmorProfile = profile })
		ctr("appArmor "+string(t), func(c *corev1.Container) { c.SecurityContext.AppArmorProfile = profile })
	}
	for _, v := range []string{"unconfined", "runtime/default", "localhost/p", ""} {
		ms = append(ms, annotate(corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+"app", v),
			annotate(corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+"nobody", v))
	}
	// sysctls
	for _, s := range append(slices.Collect(func(yield func(string) bool) {
		for _, s := range safeSysctls {
			if !yield(s.name) {
				return
			}
		}
	}), "kernel.msgmax", "net.core.somaxconn", "net.ipv4.tcp_rmem.x") {
		pod("sysctl "+s, func(p *corev1.Pod) { podSC(p).Sysctls = append(podSC(p).Sysctls, corev1.Sysctl{Name: s, Value: "1"}) })
	}
	// Windows host processes
	for _, b := range []bool{true, false} {
		pod("pod hostProcess "+strconv.FormatBool(b), func(p *corev1.Pod) {
			podSC(p).WindowsOptions = &corev1.WindowsSecurityContextOptions{HostProcess: new(b)}
		})
		ctr("hostProcess "+strconv.FormatBool(b), func(c *corev1.Container) {
			c.SecurityContext.WindowsOptions = &corev1.WindowsSecurityContextOptions{HostProcess: new(b)}
		})
	}
	// privilege escalation, runAsNonRoot, runAsUser
	for _, b := range []*bool{new(true), new(false), nil} {
		s := "unset"
		if b != nil {
			s = strconv.FormatBool(*b)
		}
		ctr("allowPrivilegeEscalation "+s, func(c *corev1.Container) { c.SecurityContext.AllowPrivilegeEscalation = b })
		ctr("runAsNonRoot "+s, func(c *corev1.Container) { c.SecurityContext.RunAsNonRoot = b })
		pod("pod runAsNonRoot "+s, func(p *corev1.Pod) { podSC(p).RunAsNonRoot = b })
	}
	for _, u := range []int64{0, 1000} {
		ctr("runAsUser "+strconv.Itoa(int(u)), func(c *corev1.Container) { c.SecurityContext.RunAsUser = &u })
		pod("pod runAsUser "+strconv.Itoa(int(u)), func(p *corev1.Pod) { podSC(p).RunAsUser = &u })
	}
	return ms
}
