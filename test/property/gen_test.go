package property

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The generator builds PodTemplatePatch documents as raw JSON trees by walking the Go types
// of the policy schema (corev1.PodSpec for `template.spec`, corev1.ServiceSpec for
// `service.spec`): every field of those types can be chosen, so a field added to the API is
// covered without touching this file. Values come from pools chosen per field ("Type.Field"),
// per Go type (API enums, quantities, resource names), or by kind, with names that exist in
// the test cluster or in the fixture next to names that do not. Most documents do not pass
// lint (a random struct is rarely valid); those are discarded and counted, which is what makes
// the survivors exactly the policies podpatch promises to handle.

// gen is the state of one document's generation.
type gen struct {
	r     *rand.Rand
	fx    *fixture
	scope policies.Scope
	mode  policies.Mode
	// coverage counts the schema fields (Type.Field) chosen, for the report.
	coverage map[string]int
	// path, when set, is a chain of fields the document must set (pos: how far it got), so
	// that every field of the schema is reached, not only those near the top.
	path []jsonField
	pos  int
}

// maxDepth bounds nesting below the pod or service spec.
const maxDepth = 7

func (g *gen) pick(pool ...string) string {
	if len(pool) == 0 {
		return "x"
	}
	return pool[g.r.IntN(len(pool))]
}
func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

// withFixture appends the fixture's own names to a pool (names that exist in the object).
func withFixture(pool []string, names []string) []string {
	return append(slices.Clone(pool), names...)
}

// stringPools give values for plain string fields, by "Type.Field".
func (g *gen) stringPool(typ, fld string) []string {
	fx := g.fx
	switch typ + "." + fld {
	case "Container.Image", "EphemeralContainerCommon.Image", "ImageVolumeSource.Reference":
		return []string{"busybox:1.36", "registry.example.com/platform/agent:1.2", "ghcr.io/dask/dask:latest"}
	case "EnvVar.Name":
		return withFixture([]string{"PODPATCH_ENV", "OMP_NUM_THREADS", "HTTP_PROXY"}, fx.envNames)
	case "EnvVar.Value", "HTTPHeader.Value", "Sysctl.Value", "PodDNSConfigOption.Value":
		return []string{"1", "true", "http://proxy.example.com:3128", "1024"}
	case "Volume.Name", "VolumeMount.Name", "VolumeDevice.Name":
		return withFixture([]string{"scratch", "cache", "shared-mem", "podpatch-certs"}, fx.volumes)
	case "VolumeMount.MountPath":
		return withFixture([]string{"/scratch", "/cache", "/dev/shm", "/etc/podpatch"}, fx.mountPaths)
	case "VolumeMount.SubPath", "VolumeMount.SubPathExpr":
		return []string{"sub", "$(POD_NAME)"}
	case "VolumeDevice.DevicePath":
		return []string{"/dev/xvda"}
	case "ContainerPort.Name", "ServicePort.Name":
		return withFixture([]string{"metrics", "http", "grpc"}, fx.portNames)
	case "ContainerPort.HostIP":
		return []string{"0.0.0.0", "127.0.0.1"}
	case "Toleration.Key":
		return []string{"dedicated", "nvidia.com/gpu", "spot", "node.kubernetes.io/not-ready", "runtime"}
	case "Toleration.Value":
		return []string{"ml", "true", "kata"}
	case "NodeSelectorRequirement.Key", "LabelSelectorRequirement.Key":
		return []string{"pool", "topology.kubernetes.io/zone", "kubernetes.io/arch", "team", "app"}
	case "NodeSelectorRequirement.Values", "LabelSelectorRequirement.Values":
		return []string{"gpu", "amd64", "eu-west-1a", "1", "a"}
	case "PodAffinityTerm.TopologyKey", "TopologySpreadConstraint.TopologyKey":
		return []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
	case "PodAffinityTerm.Namespaces":
		return []string{nsPlain, "other"}
	case "PodAffinityTerm.MatchLabelKeys", "PodAffinityTerm.MismatchLabelKeys", "TopologySpreadConstraint.MatchLabelKeys":
		return []string{"pod-template-hash", "app", "ray.io/cluster"}
	case "PodSpec.PriorityClassName":
		return []string{priorityHigh, priorityNever, "system-cluster-critical", "missing-priority"}
	case "PodSpec.RuntimeClassName":
		return []string{runtimeGvisor, runtimeKata, runtimePlain, "missing-runtime"}
	case "PodSpec.ServiceAccountName", "PodSpec.DeprecatedServiceAccount":
		return withFixture([]string{"default", saExisting, "missing-sa"}, []string{fx.serviceAccount})
	case "PodSpec.SchedulerName":
		return []string{"default-scheduler", "volcano"}
	case "PodSpec.Hostname", "PodSpec.HostnameOverride":
		return []string{"worker-0", "head"}
	case "PodSpec.Subdomain":
		return []string{"dask-workers", "ray"}
	case "PodSpec.NodeName":
		return []string{"node-1"}
	case "LocalObjectReference.Name", "ConfigMapKeySelector.Name", "ConfigMapEnvSource.Name", "ConfigMapVolumeSource.Name", "ConfigMapProjection.Name":
		return []string{configMapName, secretName, "missing-config"}
	case "SecretVolumeSource.SecretName", "SecretKeySelector.Name", "SecretEnvSource.Name", "SecretProjection.Name":
		return []string{secretName, "missing-secret"}
	case "ConfigMapKeySelector.Key", "SecretKeySelector.Key", "KeyToPath.Key", "FileKeySelector.Key":
		return []string{"a", "config.yaml", "missing-key"}
	case "KeyToPath.Path", "DownwardAPIVolumeFile.Path", "ServiceAccountTokenProjection.Path", "ClusterTrustBundleProjection.Path", "FileKeySelector.Path":
		return []string{"a.conf", "token", "labels"}
	case "ObjectFieldSelector.FieldPath":
		return []string{"metadata.name", "metadata.namespace", "status.podIP", "spec.nodeName", "metadata.labels['team']", "metadata.annotations['example.com/note']"}
	case "ObjectFieldSelector.APIVersion":
		return []string{"v1"}
	case "ResourceFieldSelector.Resource":
		return []string{"limits.cpu", "requests.memory", "limits.memory", "limits.nvidia.com/gpu"}
	case "ResourceFieldSelector.ContainerName":
		return withFixture([]string{"sidecar"}, fx.containers)
	case "HostAlias.IP":
		return []string{"10.0.0.5", "fd00::5"}
	case "HostAlias.Hostnames":
		return []string{"db.local", "metadata.internal"}
	case "PodDNSConfig.Nameservers":
		return []string{"10.0.0.10", "1.1.1.1"}
	case "PodDNSConfig.Searches":
		return []string{"svc.cluster.local", "example.com"}
	case "PodDNSConfigOption.Name":
		return []string{"ndots", "edns0"}
	case "Sysctl.Name":
		return []string{"net.core.somaxconn", "kernel.shm_rmid_forced", "net.ipv4.ip_unprivileged_port_start", "vm.max_map_count"}
	case "PodSchedulingGate.Name":
		return []string{"example.com/quota", "kueue.x-k8s.io/admission"}
	case "HTTPGetAction.Path":
		return []string{"/health", "/ready"}
	case "HTTPGetAction.Host", "TCPSocketAction.Host":
		return []string{"localhost", ""}
	case "HTTPHeader.Name":
		return []string{"X-Probe"}
	case "ExecAction.Command", "Container.Command", "Container.Args", "EphemeralContainerCommon.Command", "EphemeralContainerCommon.Args":
		return []string{"sleep", "3600", "true"}
	case "Container.WorkingDir", "EphemeralContainerCommon.WorkingDir":
		return []string{"/work", "/tmp"}
	case "Container.TerminationMessagePath", "EphemeralContainerCommon.TerminationMessagePath":
		return []string{"/dev/termination-log", "/tmp/term"}
	case "EphemeralContainer.TargetContainerName":
		return fx.containers
	case "EnvFromSource.Prefix":
		return []string{"CFG_", "P_"}
	case "HostPathVolumeSource.Path":
		return []string{"/data", "/var/log"}
	case "PersistentVolumeClaimVolumeSource.ClaimName":
		return []string{"data", "missing-claim"}
	case "ServiceAccountTokenProjection.Audience":
		return []string{"vault", "sts.amazonaws.com"}
	case "CSIVolumeSource.Driver", "FlexVolumeSource.Driver":
		return []string{"csi.example.com", "secrets-store.csi.k8s.io"}
	case "SELinuxOptions.Level":
		return []string{"s0:c123,c456"}
	case "SELinuxOptions.Type":
		return []string{"spc_t", "container_t"}
	case "SELinuxOptions.User":
		return []string{"system_u"}
	case "SELinuxOptions.Role":
		return []string{"system_r"}
	case "SeccompProfile.LocalhostProfile", "AppArmorProfile.LocalhostProfile":
		return []string{"profiles/audit.json", "k8s-apparmor-example"}
	case "WindowsSecurityContextOptions.RunAsUserName":
		return []string{"ContainerUser"}
	case "PodResourceClaim.Name", "ResourceClaim.Name":
		return []string{"gpu", "missing-claim"}
	case "PodResourceClaim.ResourceClaimName", "PodResourceClaim.ResourceClaimTemplateName":
		return []string{"gpu-claim", "missing-claim"}
	case "ServiceSpec.ClusterIP", "ServiceSpec.ClusterIPs":
		return []string{"None", "10.0.0.50", ""}
	case "ServiceSpec.ExternalIPs":
		return []string{"203.0.113.10", "198.51.100.7"}
	case "ServiceSpec.ExternalName":
		return []string{"dask.example.com"}
	case "ServiceSpec.LoadBalancerClass":
		return []string{"example.com/internal", "service.k8s.aws/nlb"}
	case "ServiceSpec.LoadBalancerIP":
		return []string{"203.0.113.20"}
	case "ServiceSpec.LoadBalancerSourceRanges":
		return []string{"10.0.0.0/8", "203.0.113.0/24"}
	case "ServiceSpec.TrafficDistribution":
		return []string{"PreferClose", "PreferSameZone", "PreferSameNode"}
	case "ServicePort.AppProtocol":
		return []string{"http", "kubernetes.io/h2c", "grpc"}
	case "GRPCAction.Service":
		return []string{"", "health"}
	}
	return []string{"x", "example", "a-b"}
}

// intPool gives values for integer fields, by "Type.Field".
func (g *gen) intPool(typ, fld string) []int64 {
	fx := g.fx
	ports := []int64{8080, 9000, 9090}
	for _, p := range fx.ports {
		ports = append(ports, int64(p))
	}
	switch typ + "." + fld {
	case "ContainerPort.ContainerPort", "ServicePort.Port", "HTTPGetAction.Port", "TCPSocketAction.Port", "GRPCAction.Port":
		return ports
	case "ContainerPort.HostPort":
		return append(ports, 0)
	case "ServicePort.NodePort", "ServiceSpec.HealthCheckNodePort":
		return []int64{30080, 30500}
	case "WeightedPodAffinityTerm.Weight", "PreferredSchedulingTerm.Weight":
		return []int64{1, 50, 100}
	case "TopologySpreadConstraint.MaxSkew", "TopologySpreadConstraint.MinDomains":
		return []int64{1, 2}
	case "PodSecurityContext.RunAsUser", "PodSecurityContext.RunAsGroup", "PodSecurityContext.FSGroup", "SecurityContext.RunAsUser", "SecurityContext.RunAsGroup", "PodSecurityContext.SupplementalGroups":
		return []int64{1000, 0, 65534}
	case "ConfigMapVolumeSource.DefaultMode", "SecretVolumeSource.DefaultMode", "DownwardAPIVolumeSource.DefaultMode", "ProjectedVolumeSource.DefaultMode", "KeyToPath.Mode", "DownwardAPIVolumeFile.Mode":
		return []int64{0o644, 0o400, 0o755}
	case "ServiceAccountTokenProjection.ExpirationSeconds":
		return []int64{3600, 7200}
	case "PodSpec.Priority":
		return []int64{0, 1000}
	case "Toleration.TolerationSeconds":
		return []int64{0, 300, 3600}
	case "PodSpec.ActiveDeadlineSeconds", "PodSpec.TerminationGracePeriodSeconds", "Probe.TerminationGracePeriodSeconds":
		return []int64{30, 60, 600, 3600}
	case "SleepAction.Seconds":
		return []int64{1, 5, 20}
	case "Probe.SuccessThreshold":
		return []int64{1, 2}
	case "ClientIPConfig.TimeoutSeconds":
		return []int64{600, 10800}
	case "ContainerRestartRuleOnExitCodes.Values":
		return []int64{1, 42}
	}
	return []int64{1, 3, 10, 30}
}

// enumPools give values for the API's named string types.
var enumPools = map[reflect.Type][]string{
	reflect.TypeFor[corev1.AppArmorProfileType]():                     {"RuntimeDefault", "Unconfined", "Localhost"},
	reflect.TypeFor[corev1.SeccompProfileType]():                      {"RuntimeDefault", "Unconfined", "Localhost"},
	reflect.TypeFor[corev1.Capability]():                              {"NET_ADMIN", "SYS_TIME", "ALL", "NET_BIND_SERVICE", "CAP_SYS_ADMIN"},
	reflect.TypeFor[corev1.ContainerRestartPolicy]():                  {"Always"},
	reflect.TypeFor[corev1.DNSPolicy]():                               {"ClusterFirst", "Default", "None", "ClusterFirstWithHostNet"},
	reflect.TypeFor[corev1.HostPathType]():                            {"Directory", "DirectoryOrCreate", "File", ""},
	reflect.TypeFor[corev1.IPFamily]():                                {"IPv4", "IPv6"},
	reflect.TypeFor[corev1.IPFamilyPolicy]():                          {"SingleStack", "PreferDualStack", "RequireDualStack"},
	reflect.TypeFor[corev1.NodeSelectorOperator]():                    {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"},
	reflect.TypeFor[metav1.LabelSelectorOperator]():                   {"In", "NotIn", "Exists", "DoesNotExist"},
	reflect.TypeFor[corev1.MountPropagationMode]():                    {"None", "HostToContainer", "Bidirectional"},
	reflect.TypeFor[corev1.NodeInclusionPolicy]():                     {"Honor", "Ignore"},
	reflect.TypeFor[corev1.OSName]():                                  {"linux", "windows"},
	reflect.TypeFor[corev1.PodConditionType]():                        {"example.com/ready"},
	reflect.TypeFor[corev1.PodFSGroupChangePolicy]():                  {"OnRootMismatch", "Always"},
	reflect.TypeFor[corev1.PodSELinuxChangePolicy]():                  {"Recursive", "MountOption"},
	reflect.TypeFor[corev1.PreemptionPolicy]():                        {"Never", "PreemptLowerPriority"},
	reflect.TypeFor[corev1.ProcMountType]():                           {"Default", "Unmasked"},
	reflect.TypeFor[corev1.Protocol]():                                {"TCP", "UDP", "SCTP"},
	reflect.TypeFor[corev1.PullPolicy]():                              {"Always", "IfNotPresent", "Never"},
	reflect.TypeFor[corev1.RecursiveReadOnlyMode]():                   {"Disabled", "IfPossible", "Enabled"},
	reflect.TypeFor[corev1.ResourceResizeRestartPolicy]():             {"NotRequired", "RestartContainer"},
	reflect.TypeFor[corev1.RestartPolicy]():                           {"Always", "OnFailure", "Never"},
	reflect.TypeFor[corev1.ServiceAffinity]():                         {"None", "ClientIP"},
	reflect.TypeFor[corev1.ServiceExternalTrafficPolicy]():            {"Cluster", "Local"},
	reflect.TypeFor[corev1.ServiceInternalTrafficPolicy]():            {"Cluster", "Local"},
	reflect.TypeFor[corev1.ServiceType]():                             {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"},
	reflect.TypeFor[corev1.Signal]():                                  {"SIGTERM", "SIGUSR1"},
	reflect.TypeFor[corev1.StorageMedium]():                           {"", "Memory"},
	reflect.TypeFor[corev1.SupplementalGroupsPolicy]():                {"Merge", "Strict"},
	reflect.TypeFor[corev1.TaintEffect]():                             {"NoSchedule", "PreferNoSchedule", "NoExecute", ""},
	reflect.TypeFor[corev1.TerminationMessagePolicy]():                {"File", "FallbackToLogsOnError"},
	reflect.TypeFor[corev1.TolerationOperator]():                      {"Exists", "Equal"},
	reflect.TypeFor[corev1.URIScheme]():                               {"HTTP", "HTTPS"},
	reflect.TypeFor[corev1.UnsatisfiableConstraintAction]():           {"DoNotSchedule", "ScheduleAnyway"},
	reflect.TypeFor[corev1.PersistentVolumeAccessMode]():              {"ReadWriteOnce", "ReadOnlyMany"},
	reflect.TypeFor[corev1.PersistentVolumeMode]():                    {"Filesystem", "Block"},
	reflect.TypeFor[corev1.ResourceName]():                            {"cpu", "memory", "ephemeral-storage", "nvidia.com/gpu", "example.com/fpga", "hugepages-2Mi"},
	reflect.TypeFor[corev1.ContainerRestartRuleAction]():              {"Restart"},
	reflect.TypeFor[corev1.ContainerRestartRuleOnExitCodesOperator](): {"In", "NotIn"},
}

var quantities = []string{"100m", "250m", "1", "2", "4", "16", "256Mi", "1Gi", "2Gi", "8Gi", "64Gi", "0"}

// required are the fields always set on a struct of that type (its list key, or what makes
// it meaningful), so that fewer documents are discarded.
var required = map[string][]string{
	"Container":                         {"name"},
	"EphemeralContainer":                {"name", "image"},
	"EnvVar":                            {"name"},
	"Volume":                            {"name"},
	"VolumeMount":                       {"name", "mountPath"},
	"VolumeDevice":                      {"name", "devicePath"},
	"ContainerPort":                     {"containerPort"},
	"ServicePort":                       {"port"},
	"TopologySpreadConstraint":          {"maxSkew", "topologyKey", "whenUnsatisfiable"},
	"NodeSelectorRequirement":           {"key", "operator"},
	"LabelSelectorRequirement":          {"key", "operator"},
	"KeyToPath":                         {"key", "path"},
	"PodAffinityTerm":                   {"topologyKey"},
	"WeightedPodAffinityTerm":           {"weight", "podAffinityTerm"},
	"PreferredSchedulingTerm":           {"weight", "preference"},
	"HostAlias":                         {"ip", "hostnames"},
	"Sysctl":                            {"name", "value"},
	"PodSchedulingGate":                 {"name"},
	"PodReadinessGate":                  {"conditionType"},
	"ConfigMapKeySelector":              {"name", "key"},
	"SecretKeySelector":                 {"name", "key"},
	"ObjectFieldSelector":               {"fieldPath"},
	"ResourceFieldSelector":             {"resource"},
	"HTTPGetAction":                     {"port"},
	"TCPSocketAction":                   {"port"},
	"GRPCAction":                        {"port"},
	"ExecAction":                        {"command"},
	"SleepAction":                       {"seconds"},
	"ContainerResizePolicy":             {"resourceName", "restartPolicy"},
	"PodDNSConfigOption":                {"name"},
	"PodOS":                             {"name"},
	"SeccompProfile":                    {"type"},
	"AppArmorProfile":                   {"type"},
	"HostPathVolumeSource":              {"path"},
	"ConfigMapVolumeSource":             {"name"},
	"SecretVolumeSource":                {"secretName"},
	"PersistentVolumeClaimVolumeSource": {"claimName"},
	"ServiceAccountTokenProjection":     {"path"},
	"DownwardAPIVolumeFile":             {"path", "fieldRef"},
	"ImageVolumeSource":                 {"reference"},
	"CSIVolumeSource":                   {"driver"},
	"PodResourceClaim":                  {"name"},
	"ResourceClaim":                     {"name"},
	"HTTPHeader":                        {"name", "value"},
	"Toleration":                        {"operator"},
	"ClientIPConfig":                    {"timeoutSeconds"},
	"SessionAffinityConfig":             {"clientIP"},
	"EmptyDirVolumeSource":              {},
}

// oneOf are types of which exactly one field is set (inline ones included: a Volume's source,
// a Probe's handler).
var oneOf = map[string]bool{
	"VolumeSource": true, "ProbeHandler": true, "LifecycleHandler": true, "EnvVarSource": true,
	"VolumeProjection": true, "EnvFromSource": true,
}

// skipTypes are not generated: server-set or not part of what a policy means.
var skipTypes = map[reflect.Type]bool{
	reflect.TypeFor[metav1.Time]():       true,
	reflect.TypeFor[metav1.ObjectMeta](): true, // ephemeral volume claim templates' metadata
	reflect.TypeFor[metav1.TypeMeta]():   true,
}

// leafStructs are generated as scalars.
var leafStructs = map[reflect.Type]bool{
	reflect.TypeFor[resource.Quantity]():  true,
	reflect.TypeFor[intstr.IntOrString](): true,
}

// jsonField is one JSON member of a struct, inline members flattened.
type jsonField struct {
	name, goName, owner string
	typ                 reflect.Type
	group               string // the oneOf type it belongs to, if any
}

// fieldCache holds fieldsOf's answers; generators run in parallel.
var fieldCache sync.Map

func fieldsOf(t reflect.Type) []jsonField {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]jsonField)
	}
	var out []jsonField
	var walk func(t reflect.Type, group string)
	walk = func(t reflect.Type, group string) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			if strings.Contains(tag, "inline") || (name == "" && f.Anonymous) {
				g := group
				if oneOf[f.Type.Name()] {
					g = f.Type.Name()
				}
				walk(f.Type, g)
				continue
			}
			if name == "" {
				name = f.Name
			}
			out = append(out, jsonField{name: name, goName: f.Name, owner: t.Name(), typ: f.Type, group: group})
		}
	}
	walk(t, "")
	fieldCache.Store(t, out)
	return out
}

// object generates a JSON object for struct type t, choosing some of its fields; allow, when
// not nil, restricts the choice (namespace policies, the allow-list).
func (g *gen) object(t reflect.Type, depth int, extra int, allow func(jsonField) bool) map[string]any {
	fs := fieldsOf(t)
	forced := g.forcedIn(fs)
	if oneOf[t.Name()] {
		i := g.r.IntN(len(fs))
		if forced >= 0 {
			i = forced
			g.pos++
		}
		return map[string]any{fs[i].name: g.value(fs[i], depth+1, forced >= 0)}
	}
	out := map[string]any{}
	if forced >= 0 {
		g.pos++
		out[fs[forced].name] = g.value(fs[forced], depth+1, true)
	}
	req := required[t.Name()]
	var optional []jsonField
	groups := map[string][]jsonField{}
	var groupNames []string
	for _, f := range fs {
		if _, done := out[f.name]; done {
			if f.group != "" && !slices.Contains(groupNames, f.group) {
				groupNames = append(groupNames, f.group)
				groups[f.group] = nil // the forced member is this group's one
			}
			continue
		}
		if allow != nil && !allow(f) {
			continue
		}
		if skipTypes[derefType(f.typ)] {
			continue
		}
		if slices.Contains(req, f.name) {
			out[f.name] = g.value(f, depth+1, false)
			continue
		}
		if f.group != "" {
			if !slices.Contains(groupNames, f.group) {
				groupNames = append(groupNames, f.group)
			}
			if _, closed := groups[f.group]; closed && groups[f.group] == nil {
				continue
			}
			groups[f.group] = append(groups[f.group], f)
			continue
		}
		optional = append(optional, f)
	}
	for _, name := range groupNames {
		grp := groups[name]
		if len(grp) > 0 && g.chance(0.85) {
			f := grp[g.r.IntN(len(grp))]
			out[f.name] = g.value(f, depth+1, false)
		}
	}
	if depth >= maxDepth {
		return out
	}
	n := extra
	if len(out) == 0 && n == 0 {
		n = 1
	}
	for range n {
		if len(optional) == 0 {
			break
		}
		i := g.r.IntN(len(optional))
		f := optional[i]
		optional = slices.Delete(optional, i, i+1)
		out[f.name] = g.value(f, depth+1, false)
	}
	return out
}

// forcedIn returns the index in fs of the next field of the generator's forced path, or -1.
func (g *gen) forcedIn(fs []jsonField) int {
	if g.pos >= len(g.path) {
		return -1
	}
	want := g.path[g.pos]
	for i, f := range fs {
		if f.owner == want.owner && f.goName == want.goName {
			return i
		}
	}
	return -1
}

// schemaPaths lists, for every field of the policy schema under root, one shortest path of
// fields leading to it: a document can be made to set any field (coverage).
func schemaPaths(root reflect.Type) [][]jsonField {
	var out [][]jsonField
	seen := map[string]bool{}
	queue := [][]jsonField{nil}
	types := []reflect.Type{root}
	for len(queue) > 0 {
		at, t := queue[0], types[0]
		queue, types = queue[1:], types[1:]
		for _, f := range fieldsOf(t) {
			k := f.owner + "." + f.goName
			if seen[k] || skipTypes[derefType(f.typ)] {
				continue
			}
			seen[k] = true
			p := append(slices.Clone(at), f)
			out = append(out, p)
			et := derefType(f.typ)
			for et.Kind() == reflect.Slice || et.Kind() == reflect.Map {
				et = derefType(et.Elem())
			}
			if et.Kind() == reflect.Struct && !leafStructs[et] {
				queue, types = append(queue, p), append(types, et)
			}
		}
	}
	return out
}

var (
	pathsOnce                  sync.Once
	podSpecPaths, servicePaths [][]jsonField
)

func forcedPaths() ([][]jsonField, [][]jsonField) {
	pathsOnce.Do(func() {
		podSpecPaths = schemaPaths(reflect.TypeFor[corev1.PodSpec]())
		servicePaths = schemaPaths(reflect.TypeFor[corev1.ServiceSpec]())
	})
	return podSpecPaths, servicePaths
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// value generates the value of one field (null sometimes, in merge and enforce policies: a
// removal).
func (g *gen) value(f jsonField, depth int, forced bool) any {
	g.coverage[f.owner+"."+f.goName]++
	if !forced && g.mode != policies.ModeDefault && g.chance(0.03) {
		return nil
	}
	return g.typed(f, f.typ, depth)
}

func (g *gen) typed(f jsonField, t reflect.Type, depth int) any {
	t = derefType(t)
	switch t {
	case reflect.TypeFor[resource.Quantity]():
		return g.pick(quantities...)
	case reflect.TypeFor[intstr.IntOrString]():
		if g.chance(0.5) {
			return g.pickInt(g.intPool(f.owner, f.goName))
		}
		return g.pick(withFixture([]string{"metrics", "http"}, g.fx.portNames)...)
	}
	if pool, ok := enumPools[t]; ok {
		return g.pick(pool...)
	}
	switch t.Kind() {
	case reflect.Struct:
		return g.object(t, depth, g.extraFields(), nil)
	case reflect.Slice:
		n := 1
		if g.chance(0.25) {
			n = 2
		}
		l := make([]any, 0, n)
		for range n {
			l = append(l, g.typed(f, t.Elem(), depth))
		}
		return l
	case reflect.Map:
		return g.mapValue(f, t, depth)
	case reflect.String:
		return g.pick(g.stringPool(f.owner, f.goName)...)
	case reflect.Bool:
		return g.chance(0.5)
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return g.pickInt(g.intPool(f.owner, f.goName))
	}
	return nil
}

func (g *gen) pickInt(pool []int64) int64 { return pool[g.r.IntN(len(pool))] }

// extraFields is how many optional fields a nested struct gets besides its required ones.
func (g *gen) extraFields() int {
	switch x := g.r.Float64(); {
	case x < 0.55:
		return 1
	case x < 0.85:
		return 2
	default:
		return 0
	}
}

func (g *gen) mapValue(f jsonField, t reflect.Type, depth int) map[string]any {
	n := 1
	if g.chance(0.3) {
		n = 2
	}
	out := map[string]any{}
	for range n {
		var k string
		switch {
		case t.Key() == reflect.TypeFor[corev1.ResourceName]():
			k = g.pick(enumPools[t.Key()]...)
		case f.goName == "NodeSelector":
			k = g.pick("pool", "kubernetes.io/arch", "cloud.google.com/gke-nodepool", "runtime", "kubernetes.io/os")
		case f.goName == "Selector":
			k = g.pick(append(slices.Sorted(mapsKeys(strMap(g.fx.spec()["selector"]))), "app", "team")...)
		default:
			k = g.pick("example.com/key", "team", "tier")
		}
		var v any
		switch {
		case t.Elem() == reflect.TypeFor[resource.Quantity]():
			v = g.pick(quantities...)
		case f.goName == "NodeSelector":
			v = g.pick("gpu", "amd64", "linux", "kata", "default-pool")
		case t.Elem().Kind() == reflect.String:
			v = g.pick("a", "b", "true")
		default:
			v = g.typed(f, t.Elem(), depth)
		}
		if g.mode != policies.ModeDefault && g.chance(0.05) {
			v = nil
		}
		out[k] = v
	}
	return out
}

func (f *fixture) spec() map[string]any {
	s, _ := f.obj["spec"].(map[string]any)
	return s
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// metadata generates labels and annotations for a patch's metadata.
func (g *gen) metadata(service bool) map[string]any {
	out := map[string]any{}
	val := func() any {
		if g.mode != policies.ModeDefault && g.chance(0.1) {
			return nil
		}
		return g.pick("a", "true", "platform", "")
	}
	if g.chance(0.6) {
		k := g.pick("team", "cost-center", "example.com/owner", "podpatch.io/skip", "app", "tier")
		g.coverage["ObjectMeta.Labels"]++
		out["labels"] = map[string]any{k: val()}
	}
	if g.chance(0.6) {
		keys := []string{"example.com/note", "cluster-autoscaler.kubernetes.io/safe-to-evict", "prometheus.io/scrape"}
		if service {
			keys = append(keys, "service.beta.kubernetes.io/aws-load-balancer-internal", "networking.gke.io/load-balancer-type", "podpatch.io/provide-external-url")
		}
		g.coverage["ObjectMeta.Annotations"]++
		out["annotations"] = map[string]any{g.pick(keys...): val()}
	}
	return out
}

// podSpecFields is the top level a namespace policy may reach under the default allow-list
// (reference §3); nil allows everything (platform).
func (g *gen) allowPodSpec() func(jsonField) bool {
	if g.scope == policies.ScopePlatform {
		return nil
	}
	return func(f jsonField) bool {
		return slices.Contains([]string{"nodeSelector", "tolerations", "affinity", "topologySpreadConstraints",
			"priorityClassName", "containers"}, f.name)
	}
}

// containers generates a containers or initContainers list: entries address the fixture's
// containers by name, "*" or "@main", or add sidecars.
func (g *gen) containers(list string, depth int) []any {
	existing := g.fx.containers
	names := []string{"*", "@main", "sidecar"}
	if list == "initContainers" {
		existing = g.fx.initContainers
		names = []string{"*", "init-setup"}
	}
	names = append(names, existing...)
	n := 1
	if g.chance(0.2) {
		n = 2
	}
	var allow func(jsonField) bool
	if g.scope == policies.ScopeNamespace {
		allow = func(f jsonField) bool { return f.name == "name" || f.name == "resources" || f.name == "env" }
	}
	ct := reflect.TypeFor[corev1.Container]()
	var out []any
	for range n {
		c := g.object(ct, depth, g.extraFields(), allow)
		name := g.pick(names...)
		c["name"] = name
		if !slices.Contains(existing, name) && name != "*" && name != "@main" && g.chance(0.7) {
			c["image"] = g.pick(g.stringPool("Container", "Image")...)
		}
		out = append(out, c)
	}
	return out
}

// document generates one PodTemplatePatch for the fixture's kind (sometimes with both parts).
func (g *gen) document(name string) map[string]any {
	spec := map[string]any{}
	if g.mode != policies.ModeMerge || g.chance(0.5) {
		spec["mode"] = string(g.mode)
	}
	if g.chance(0.2) {
		spec["priority"] = g.r.IntN(3) - 1
	}
	spec["match"] = g.match()
	pod := g.fx.kind == profiles.KindPod
	if pod || g.chance(0.15) {
		spec["template"] = g.templatePart()
	}
	if !pod || g.chance(0.15) {
		spec["service"] = g.servicePart()
	}
	return map[string]any{
		"apiVersion": policies.APIVersion, "kind": policies.DocumentKind,
		"metadata": map[string]any{"name": name}, "spec": spec,
	}
}

func (g *gen) templatePart() map[string]any {
	part := map[string]any{}
	if g.chance(0.3) {
		part["metadata"] = g.metadata(false)
	}
	if !g.chance(0.85) && len(part) > 0 {
		return part
	}
	st := reflect.TypeFor[corev1.PodSpec]()
	allow := g.allowPodSpec()
	var fs []jsonField
	for _, f := range fieldsOf(st) {
		if allow == nil || allow(f) {
			fs = append(fs, f)
		}
	}
	spec := map[string]any{}
	podPaths, _ := forcedPaths()
	k := 1 + g.r.IntN(3)
	if allow == nil && g.chance(0.5) {
		g.path, g.pos, k = podPaths[g.r.IntN(len(podPaths))], 0, 1
	}
	for i := range k {
		f := fs[g.r.IntN(len(fs))]
		if i == 0 && len(g.path) > 0 {
			f, g.pos = g.path[0], 1
		}
		switch f.name {
		case "containers", "initContainers":
			g.coverage["PodSpec."+f.goName]++
			spec[f.name] = g.containers(f.name, 1)
		default:
			spec[f.name] = g.value(f, 1, len(g.path) > 0)
		}
	}
	part["spec"] = spec
	return part
}

func (g *gen) servicePart() map[string]any {
	part := map[string]any{}
	if g.scope == policies.ScopeNamespace || g.chance(0.3) {
		part["metadata"] = g.metadata(true)
	}
	if g.scope == policies.ScopeNamespace {
		return part
	}
	st := reflect.TypeFor[corev1.ServiceSpec]()
	fs := fieldsOf(st)
	spec := map[string]any{}
	_, svcPaths := forcedPaths()
	k := 1 + g.r.IntN(3)
	var path []jsonField
	if g.chance(0.5) {
		path, k = svcPaths[g.r.IntN(len(svcPaths))], 1
	}
	for i := range k {
		f := fs[g.r.IntN(len(fs))]
		if i == 0 && path != nil {
			g.path, g.pos, f = path, 1, path[0]
		}
		spec[f.name] = g.value(f, 1, path != nil)
	}
	part["spec"] = spec
	return part
}

// match mostly selects the fixture (its manager, its role, or everything), sometimes not.
func (g *gen) match() map[string]any {
	m := map[string]any{}
	switch x := g.r.Float64(); {
	case x < 0.45:
		m["managers"] = []any{string(g.fx.id.Manager)}
	case x < 0.6:
		m["managers"] = []any{string(g.fx.id.Manager)}
		m["roles"] = []any{string(g.fx.id.Role)}
	case x < 0.65:
		m["managers"] = []any{g.pick("dask", "spark", "ray", "flink", "dask-gateway")}
	}
	if g.scope == policies.ScopePlatform && g.chance(0.1) {
		m["namespaces"] = []any{"prop-*"}
	}
	if g.chance(0.05) {
		m["selector"] = map[string]any{"matchLabels": map[string]any{"team": "a"}}
	}
	return m
}

// newGen returns a generator for one document.
func newGen(r *rand.Rand, fx *fixture, scope policies.Scope, coverage map[string]int) *gen {
	g := &gen{r: r, fx: fx, scope: scope, coverage: coverage}
	modes := []policies.Mode{policies.ModeDefault, policies.ModeMerge, policies.ModeEnforce}
	if scope == policies.ScopeNamespace {
		modes = modes[:2]
	}
	g.mode = modes[r.IntN(len(modes))]
	return g
}

// docName is the name of the i-th document of a pair.
func docName(i int) string { return fmt.Sprintf("p%d", i) }
