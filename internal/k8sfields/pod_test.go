package k8sfields

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// fieldErrorCase is one row of the field validation tables: a partial object and the single
// error it must produce (none when wantField is empty).
type fieldErrorCase[T any] struct {
	name       string
	patch      *T
	wantField  string
	wantType   field.ErrorType
	wantDetail string // a substring of the error's detail, when the wording matters
}

func checkFieldErrors[T any](t *testing.T, cases []fieldErrorCase[T], validate func(*T, *field.Path) field.ErrorList, fld *field.Path) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := validate(tc.patch, fld)
			if tc.wantField == "" {
				require.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, "errors: %v", errs)
			assert.Equal(t, tc.wantField, errs[0].Field, "error: %v", errs[0])
			assert.Equal(t, tc.wantType, errs[0].Type, "error: %v", errs[0])
			if tc.wantDetail != "" {
				assert.Contains(t, errs[0].Detail, tc.wantDetail)
			}
		})
	}
}

// TestPodSpec: a policy's partial pod spec against the rules Kubernetes applies to the same
// fields (reference §3), one error per row at its path; the API-server oracle (test/e2e's
// TestValidationOracle) pins the rows.
func TestPodSpec(t *testing.T) {
	spec := func(s corev1.PodSpec) *corev1.PodSpec { return &s }
	container := func(c corev1.Container) *corev1.PodSpec {
		return spec(corev1.PodSpec{Containers: []corev1.Container{c}})
	}
	toleration := func(tol corev1.Toleration) *corev1.PodSpec {
		return spec(corev1.PodSpec{Tolerations: []corev1.Toleration{tol}})
	}
	affinity := func(a corev1.Affinity) *corev1.PodSpec { return spec(corev1.PodSpec{Affinity: &a}) }
	requiredNode := func(terms ...corev1.NodeSelectorTerm) *corev1.PodSpec {
		return affinity(corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}})
	}
	expression := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	matchField := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	podAffinity := func(term corev1.PodAffinityTerm) *corev1.PodSpec {
		return affinity(corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term},
		}})
	}
	spread := func(cs ...corev1.TopologySpreadConstraint) *corev1.PodSpec {
		return spec(corev1.PodSpec{TopologySpreadConstraints: cs})
	}
	zoneSpread := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule}
	resources := func(requests, limits corev1.ResourceList) *corev1.PodSpec {
		return container(corev1.Container{Name: "*", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}})
	}
	q := resource.MustParse
	volume := func(v corev1.Volume) *corev1.PodSpec { return spec(corev1.PodSpec{Volumes: []corev1.Volume{v}}) }
	emptyDir := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	worker := func(c corev1.Container) *corev1.PodSpec {
		c.Name = "worker"
		return container(c)
	}
	tcpProbe := func(p corev1.Probe) *corev1.Probe {
		p.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(8788)}
		return &p
	}
	appSelector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "dask"}}

	valid := &corev1.PodSpec{
		NodeSelector: map[string]string{"cloud.google.com/gke-nodepool": "gpu-pool"},
		Tolerations: []corev1.Toleration{
			{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{Key: "dedicated", Value: "ml"},
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
			{Operator: corev1.TolerationOpExists},
		},
		InitContainers: []corev1.Container{{Name: "*", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"memory": q("1Gi")}}}},
		Containers: []corev1.Container{
			{
				Name: "*",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{"cpu": q("500m"), "memory": q("1Gi"), "nvidia.com/gpu": q("1"), "hugepages-2Mi": q("1Gi")},
					Limits:   corev1.ResourceList{"cpu": q("2"), "memory": q("1Gi"), "nvidia.com/gpu": q("1"), "hugepages-2Mi": q("1Gi"), "ephemeral-storage": q("10Gi")},
				},
				Env: []corev1.EnvVar{
					{Name: "OMP_NUM_THREADS", Value: "1"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				},
				EnvFrom:         []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
				VolumeMounts:    []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}},
				ImagePullPolicy: corev1.PullIfNotPresent,
			},
			{
				Name:  "log-shipper",
				Image: "fluent/fluent-bit:3",
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 2020, Protocol: corev1.ProtocolTCP}, {ContainerPort: 2021, HostPort: 2021}},
			},
			{Name: "worker", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("1")}}},
		},
		Volumes:          []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
		Affinity: &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: "node.kubernetes.io/instance-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"a2-highgpu-1g", "a2-highgpu-2g"}},
						{Key: "spot", Operator: corev1.NodeSelectorOpDoesNotExist},
						{Key: "gpu-count", Operator: corev1.NodeSelectorOpGt, Values: []string{"0"}},
					},
					MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"node-1"}}},
				}}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
					{Weight: 100, Preference: expression("topology.kubernetes.io/zone", corev1.NodeSelectorOpIn, "europe-west4-a")},
				},
			},
			PodAffinity: &corev1.PodAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: appSelector, TopologyKey: "kubernetes.io/hostname", Namespaces: []string{"team-ml"},
				}},
			},
			PodAntiAffinity: &corev1.PodAntiAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight: 1,
					PodAffinityTerm: corev1.PodAffinityTerm{
						LabelSelector:     &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}},
						NamespaceSelector: &metav1.LabelSelector{},
						TopologyKey:       "topology.kubernetes.io/zone",
					},
				}},
			},
		},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{
			{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule, MinDomains: new(int32(2)), LabelSelector: appSelector},
			{MaxSkew: 2, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway, NodeTaintsPolicy: new(corev1.NodeInclusionPolicyHonor)},
		},
		PriorityClassName:             "batch-low",
		SchedulerName:                 "default-scheduler",
		ServiceAccountName:            "dask-worker",
		RestartPolicy:                 corev1.RestartPolicyNever,
		DNSPolicy:                     corev1.DNSClusterFirst,
		TerminationGracePeriodSeconds: new(int64(0)),
	}

	cases := []fieldErrorCase[corev1.PodSpec]{
		{name: "valid policy with many fields", patch: valid},
		{name: "empty template", patch: &corev1.PodSpec{}},
		{name: "valid pod fields that Kubernetes checks together", patch: spec(corev1.PodSpec{
			Hostname: "worker-0", Subdomain: "dask-workers", ActiveDeadlineSeconds: new(int64(3600)),
			DNSPolicy: corev1.DNSNone, DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.10", "2001:db8::53"}, Searches: []string{"svc.cluster.local.", "my_domain.example"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: new("2")}}},
			HostAliases:     []corev1.HostAlias{{IP: "10.0.0.5", Hostnames: []string{"db.local"}}},
			ReadinessGates:  []corev1.PodReadinessGate{{ConditionType: "example.com/ready"}},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/quota"}},
			OS:              &corev1.PodOS{Name: corev1.Linux}, TerminationGracePeriodSeconds: new(int64(60)),
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: new(int64(0)), RunAsGroup: new(int64(1000)), FSGroup: new(int64(1000)),
				SupplementalGroups: []int64{1000}, FSGroupChangePolicy: new(corev1.FSGroupChangeOnRootMismatch),
				Sysctls:         []corev1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}, {Name: "net/ipv4/ip_local_port_range", Value: "1024 65535"}},
				SeccompProfile:  &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: new("profiles/dask.json")},
				AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}},
			Volumes: []corev1.Volume{
				{Name: "scratch"},
				{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
					{Path: "mem", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "worker", Resource: "limits.memory"}},
				}}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: new(int32(0o440)), Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: new(int64(3600))}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				}}}},
			},
			Containers: []corev1.Container{{
				Name:            "worker",
				SecurityContext: &corev1.SecurityContext{RunAsUser: new(int64(1000)), AllowPrivilegeEscalation: new(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				LivenessProbe:   tcpProbe(corev1.Probe{PeriodSeconds: 30, SuccessThreshold: 1, TerminationGracePeriodSeconds: new(int64(5))}),
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http-dashboard"), Path: "/health",
					Scheme: corev1.URISchemeHTTPS, HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "1"}}}}, SuccessThreshold: 3},
				StartupProbe:             &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 8786}}, FailureThreshold: 30},
				Lifecycle:                &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 45}}, StopSignal: new(corev1.SIGUSR1)},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				ResizePolicy:             []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired}},
				Env: []corev1.EnvVar{
					{Name: "TEAM", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['team']"}}},
					{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
					{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "x.conf"}}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch", SubPathExpr: "$(POD_NAME)", ReadOnly: true,
					RecursiveReadOnly: new(corev1.RecursiveReadOnlyIfPossible), MountPropagation: new(corev1.MountPropagationNone)}},
			}},
		})},
		{name: "container with only name and resources", patch: resources(nil, corev1.ResourceList{"nvidia.com/gpu": q("1")})},

		// nodeSelector
		{name: "nodeSelector key", patch: spec(corev1.PodSpec{NodeSelector: map[string]string{"-pool": "gpu"}}),
			wantField: "spec.template.spec.nodeSelector", wantType: field.ErrorTypeInvalid},
		{name: "nodeSelector value", patch: spec(corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu pool"}}),
			wantField: "spec.template.spec.nodeSelector", wantType: field.ErrorTypeInvalid},

		// tolerations
		{name: "toleration key", patch: toleration(corev1.Toleration{Key: "bad key", Operator: corev1.TolerationOpExists}),
			wantField: "spec.template.spec.tolerations[0].key", wantType: field.ErrorTypeInvalid},
		{name: "toleration operator", patch: toleration(corev1.Toleration{Key: "k", Operator: "Gt", Value: "1"}),
			wantField: "spec.template.spec.tolerations[0].operator", wantType: field.ErrorTypeNotSupported},
		{name: "toleration empty key needs Exists", patch: toleration(corev1.Toleration{Operator: corev1.TolerationOpEqual}),
			wantField: "spec.template.spec.tolerations[0].operator", wantType: field.ErrorTypeInvalid},
		{name: "toleration Exists with value", patch: toleration(corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}),
			wantField: "spec.template.spec.tolerations[0].value", wantType: field.ErrorTypeInvalid},
		{name: "toleration Equal value", patch: toleration(corev1.Toleration{Key: "k", Operator: corev1.TolerationOpEqual, Value: "not valid!"}),
			wantField: "spec.template.spec.tolerations[0].value", wantType: field.ErrorTypeInvalid},
		{name: "toleration default operator value", patch: toleration(corev1.Toleration{Key: "k", Value: "not valid!"}),
			wantField: "spec.template.spec.tolerations[0].value", wantType: field.ErrorTypeInvalid},
		{name: "toleration effect", patch: toleration(corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Effect: "Sometimes"}),
			wantField: "spec.template.spec.tolerations[0].effect", wantType: field.ErrorTypeNotSupported},
		{name: "tolerationSeconds needs NoExecute", patch: toleration(corev1.Toleration{
			Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: new(int64(30)),
		}), wantField: "spec.template.spec.tolerations[0].effect", wantType: field.ErrorTypeInvalid},

		// containers
		{name: "container name required", patch: container(corev1.Container{Image: "busybox"}),
			wantField: "spec.template.spec.containers[0].name", wantType: field.ErrorTypeRequired},
		{name: "container name", patch: container(corev1.Container{Name: "Main_Container"}),
			wantField: "spec.template.spec.containers[0].name", wantType: field.ErrorTypeInvalid},
		{name: "container name duplicate", patch: spec(corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}, {Name: "main"}}}),
			wantField: "spec.template.spec.containers[1].name", wantType: field.ErrorTypeDuplicate},
		{name: "wildcard container duplicate", patch: spec(corev1.PodSpec{Containers: []corev1.Container{{Name: "*"}, {Name: "*"}}}),
			wantField: "spec.template.spec.containers[1].name", wantType: field.ErrorTypeDuplicate},
		{name: "wildcard container with image", patch: container(corev1.Container{Name: "*", Image: "busybox"}),
			wantField: "spec.template.spec.containers[0].image", wantType: field.ErrorTypeForbidden, wantDetail: "name one container to add a sidecar"},
		{name: "main container with image", patch: container(corev1.Container{Name: "@main", Image: "rayproject/ray:2.41.0"})},
		{name: "main init container", patch: spec(corev1.PodSpec{InitContainers: []corev1.Container{{Name: "@main", Image: "busybox"}}}),
			wantField: "spec.template.spec.initContainers[0].name", wantType: field.ErrorTypeInvalid},
		{name: "initContainer name", patch: spec(corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}, {Name: "Init"}}}),
			wantField: "spec.template.spec.initContainers[1].name", wantType: field.ErrorTypeInvalid},
		{name: "env name", patch: container(corev1.Container{Name: "*", Env: []corev1.EnvVar{{Name: "A=B", Value: "x"}}}),
			wantField: "spec.template.spec.containers[0].env[0].name", wantType: field.ErrorTypeInvalid},
		// Every supported version accepts any printable name but '=' (versions.RelaxedEnvNames).
		{name: "env name relaxed", patch: container(corev1.Container{Name: "*", Env: []corev1.EnvVar{{Name: "1.relaxed-name", Value: "x"}}})},
		{name: "env name required", patch: container(corev1.Container{Name: "*", Env: []corev1.EnvVar{{Value: "x"}}}),
			wantField: "spec.template.spec.containers[0].env[0].name", wantType: field.ErrorTypeRequired},
		{name: "env value and valueFrom", patch: container(corev1.Container{Name: "*", Env: []corev1.EnvVar{{
			Name: "POD", Value: "x", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		}}}), wantField: "spec.template.spec.containers[0].env[0].valueFrom", wantType: field.ErrorTypeForbidden},
		{name: "env valueFrom empty", patch: container(corev1.Container{Name: "*", Env: []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{}}}}),
			wantField: "spec.template.spec.containers[0].env[0].valueFrom", wantType: field.ErrorTypeRequired},
		{name: "env valueFrom two sources", patch: container(corev1.Container{Name: "*", Env: []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{
			FieldRef:     &corev1.ObjectFieldSelector{FieldPath: "metadata.name"},
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"},
		}}}}), wantField: "spec.template.spec.containers[0].env[0].valueFrom", wantType: field.ErrorTypeForbidden},
		{name: "env name duplicate", patch: container(corev1.Container{Name: "*", Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B"}, {Name: "A", Value: "2"}}}),
			wantField: "spec.template.spec.containers[0].env[2].name", wantType: field.ErrorTypeDuplicate},
		{name: "envFrom prefix", patch: container(corev1.Container{Name: "*", EnvFrom: []corev1.EnvFromSource{{
			Prefix: "P=", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}},
		}}}), wantField: "spec.template.spec.containers[0].envFrom[0].prefix", wantType: field.ErrorTypeInvalid},
		{name: "envFrom without source", patch: container(corev1.Container{Name: "*", EnvFrom: []corev1.EnvFromSource{{Prefix: "CFG_"}}}),
			wantField: "spec.template.spec.containers[0].envFrom[0]", wantType: field.ErrorTypeRequired},
		{name: "containerPort range", patch: container(corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{ContainerPort: 70000}}}),
			wantField: "spec.template.spec.containers[0].ports[0].containerPort", wantType: field.ErrorTypeInvalid},
		{name: "containerPort required", patch: container(corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{Name: "http"}}}),
			wantField: "spec.template.spec.containers[0].ports[0].containerPort", wantType: field.ErrorTypeRequired},
		{name: "hostPort range", patch: container(corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: -1}}}),
			wantField: "spec.template.spec.containers[0].ports[0].hostPort", wantType: field.ErrorTypeInvalid},
		{name: "container port name", patch: container(corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{ContainerPort: 80, Name: "web_http"}}}),
			wantField: "spec.template.spec.containers[0].ports[0].name", wantType: field.ErrorTypeInvalid},
		{name: "container port protocol", patch: container(corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: "HTTP"}}}),
			wantField: "spec.template.spec.containers[0].ports[0].protocol", wantType: field.ErrorTypeNotSupported},
		{name: "volumeMount name required", patch: container(corev1.Container{Name: "*", VolumeMounts: []corev1.VolumeMount{{MountPath: "/data"}}}),
			wantField: "spec.template.spec.containers[0].volumeMounts[0].name", wantType: field.ErrorTypeRequired},
		{name: "volumeMount mountPath required", patch: container(corev1.Container{Name: "*", VolumeMounts: []corev1.VolumeMount{{Name: "data"}}}),
			wantField: "spec.template.spec.containers[0].volumeMounts[0].mountPath", wantType: field.ErrorTypeRequired},
		{name: "volumeMount mountPath duplicate", patch: container(corev1.Container{Name: "*", VolumeMounts: []corev1.VolumeMount{
			{Name: "data", MountPath: "/data"}, {Name: "other", MountPath: "/data"},
		}}), wantField: "spec.template.spec.containers[0].volumeMounts[1].mountPath", wantType: field.ErrorTypeDuplicate},
		{name: "resource name", patch: resources(nil, corev1.ResourceList{"example.com/bad name": q("1")}),
			wantField: "spec.template.spec.containers[0].resources.limits[example.com/bad name]", wantType: field.ErrorTypeInvalid},
		{name: "resource name without domain", patch: resources(corev1.ResourceList{"gpu": q("1")}, nil),
			wantField: "spec.template.spec.containers[0].resources.requests[gpu]", wantType: field.ErrorTypeInvalid, wantDetail: "nvidia.com/gpu"},
		{name: "negative quantity", patch: resources(corev1.ResourceList{"cpu": q("-1")}, nil),
			wantField: "spec.template.spec.containers[0].resources.requests[cpu]", wantType: field.ErrorTypeInvalid},
		{name: "request above limit", patch: resources(corev1.ResourceList{"cpu": q("2"), "memory": q("1Gi")}, corev1.ResourceList{"cpu": q("1500m"), "memory": q("2Gi")}),
			wantField: "spec.template.spec.containers[0].resources.requests[cpu]", wantType: field.ErrorTypeInvalid, wantDetail: "cpu limit of 1500m"},
		{name: "fractional extended resource", patch: spec(corev1.PodSpec{Containers: []corev1.Container{
			{Name: "main"},
			{Name: "worker", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": q("500m")}}},
		}}), wantField: "spec.template.spec.containers[1].resources.limits[nvidia.com/gpu]", wantType: field.ErrorTypeInvalid},
		{name: "extended resource request below limit", patch: resources(corev1.ResourceList{"nvidia.com/gpu": q("1")}, corev1.ResourceList{"nvidia.com/gpu": q("2")}),
			wantField: "spec.template.spec.containers[0].resources.requests[nvidia.com/gpu]", wantType: field.ErrorTypeInvalid},
		{name: "imagePullPolicy", patch: container(corev1.Container{Name: "*", ImagePullPolicy: "Sometimes"}),
			wantField: "spec.template.spec.containers[0].imagePullPolicy", wantType: field.ErrorTypeNotSupported},

		// volumes, imagePullSecrets
		{name: "volume name", patch: volume(corev1.Volume{Name: "Scratch", VolumeSource: emptyDir}),
			wantField: "spec.template.spec.volumes[0].name", wantType: field.ErrorTypeInvalid},
		{name: "volume name required", patch: volume(corev1.Volume{VolumeSource: emptyDir}),
			wantField: "spec.template.spec.volumes[0].name", wantType: field.ErrorTypeRequired},
		{name: "volume name duplicate", patch: spec(corev1.PodSpec{Volumes: []corev1.Volume{{Name: "a", VolumeSource: emptyDir}, {Name: "a", VolumeSource: emptyDir}}}),
			wantField: "spec.template.spec.volumes[1].name", wantType: field.ErrorTypeDuplicate},
		{name: "volume without a source", patch: volume(corev1.Volume{Name: "scratch"})},
		{name: "volume with two sources", patch: volume(corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{}, ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}},
		}}), wantField: "spec.template.spec.volumes[0].configMap", wantType: field.ErrorTypeForbidden, wantDetail: "emptyDir is set"},
		{name: "volume source without its name patches the object's", patch: volume(corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{DefaultMode: new(int32(0o444))},
		}})},
		{name: "volume file mode", patch: volume(corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: "creds", DefaultMode: new(int32(0o1000))},
		}}), wantField: "spec.template.spec.volumes[0].secret.defaultMode", wantType: field.ErrorTypeInvalid},
		{name: "volume item path climbing out", patch: volume(corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{Items: []corev1.KeyToPath{{Key: "a", Path: "../a"}}},
		}}), wantField: "spec.template.spec.volumes[0].configMap.items[0].path", wantType: field.ErrorTypeInvalid},
		{name: "volume item key required", patch: volume(corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{Items: []corev1.KeyToPath{{Path: "a"}}},
		}}), wantField: "spec.template.spec.volumes[0].configMap.items[0].key", wantType: field.ErrorTypeRequired},
		{name: "hostPath type", patch: volume(corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: "/data", Type: new(corev1.HostPathType("Folder"))},
		}}), wantField: "spec.template.spec.volumes[0].hostPath.type", wantType: field.ErrorTypeNotSupported},
		{name: "hostPath with ..", patch: volume(corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: "/data/../etc"},
		}}), wantField: "spec.template.spec.volumes[0].hostPath.path", wantType: field.ErrorTypeInvalid},
		{name: "emptyDir negative size", patch: volume(corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: new(q("-1Gi"))},
		}}), wantField: "spec.template.spec.volumes[0].emptyDir.sizeLimit", wantType: field.ErrorTypeInvalid},
		{name: "nfs relative path", patch: volume(corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "data"},
		}}), wantField: "spec.template.spec.volumes[0].nfs.path", wantType: field.ErrorTypeInvalid},
		{name: "projected source with two kinds", patch: volume(corev1.Volume{Name: "p", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
				ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}},
				Secret:    &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "b"}},
			}}},
		}}), wantField: "spec.template.spec.volumes[0].projected.sources[0].configMap", wantType: field.ErrorTypeForbidden},
		{name: "projected configMap without name", patch: volume(corev1.Volume{Name: "p", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{}}}},
		}}), wantField: "spec.template.spec.volumes[0].projected.sources[0].configMap.name", wantType: field.ErrorTypeRequired},
		{name: "projected token too short-lived", patch: volume(corev1.Volume{Name: "p", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
				ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: new(int64(60))},
			}}},
		}}), wantField: "spec.template.spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds", wantType: field.ErrorTypeInvalid},
		{name: "projected duplicate path", patch: volume(corev1.Volume{Name: "p", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}, Items: []corev1.KeyToPath{{Key: "k", Path: "f"}}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "b"}, Items: []corev1.KeyToPath{{Key: "k", Path: "f"}}}},
			}},
		}}), wantField: "spec.template.spec.volumes[0].projected.sources[1].secret.items[0].path", wantType: field.ErrorTypeDuplicate},
		{name: "downwardAPI file without a reference", patch: volume(corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{
			DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{Path: "labels"}}},
		}}), wantField: "spec.template.spec.volumes[0].downwardAPI.items[0]", wantType: field.ErrorTypeRequired},
		{name: "downwardAPI resource without container", patch: volume(corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{
			DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{Path: "mem",
				ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}}},
		}}), wantField: "spec.template.spec.volumes[0].downwardAPI.items[0].resourceFieldRef.containerName", wantType: field.ErrorTypeRequired},
		{name: "imagePullSecret name required", patch: spec(corev1.PodSpec{ImagePullSecrets: []corev1.LocalObjectReference{{}}}),
			wantField: "spec.template.spec.imagePullSecrets[0].name", wantType: field.ErrorTypeRequired},

		// what Kubernetes forbids on create, or computes itself
		{name: "ephemeral containers", patch: spec(corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}}),
			wantField: "spec.template.spec.ephemeralContainers", wantType: field.ErrorTypeForbidden, wantDetail: "cannot be set on create"},
		{name: "priority", patch: spec(corev1.PodSpec{Priority: new(int32(1000))}),
			wantField: "spec.template.spec.priority", wantType: field.ErrorTypeForbidden, wantDetail: "priorityClassName"},
		{name: "preemptionPolicy", patch: spec(corev1.PodSpec{PreemptionPolicy: new(corev1.PreemptNever)}),
			wantField: "spec.template.spec.preemptionPolicy", wantType: field.ErrorTypeForbidden},
		{name: "overhead", patch: spec(corev1.PodSpec{Overhead: corev1.ResourceList{"cpu": q("100m")}}),
			wantField: "spec.template.spec.overhead", wantType: field.ErrorTypeForbidden, wantDetail: "RuntimeClass"},

		// pod fields
		{name: "hostname", patch: spec(corev1.PodSpec{Hostname: "Worker_0"}),
			wantField: "spec.template.spec.hostname", wantType: field.ErrorTypeInvalid},
		{name: "subdomain", patch: spec(corev1.PodSpec{Subdomain: "dask.workers"}),
			wantField: "spec.template.spec.subdomain", wantType: field.ErrorTypeInvalid},
		{name: "hostnameOverride with hostNetwork", patch: spec(corev1.PodSpec{HostnameOverride: new("worker-0"), HostNetwork: true}),
			wantField: "spec.template.spec.hostnameOverride", wantType: field.ErrorTypeForbidden},
		{name: "nodeName", patch: spec(corev1.PodSpec{NodeName: "Node_1"}),
			wantField: "spec.template.spec.nodeName", wantType: field.ErrorTypeInvalid},
		{name: "nodeName with schedulingGates", patch: spec(corev1.PodSpec{NodeName: "node-1", SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/quota"}}}),
			wantField: "spec.template.spec.nodeName", wantType: field.ErrorTypeForbidden},
		{name: "activeDeadlineSeconds 0", patch: spec(corev1.PodSpec{ActiveDeadlineSeconds: new(int64(0))}),
			wantField: "spec.template.spec.activeDeadlineSeconds", wantType: field.ErrorTypeInvalid},
		{name: "dnsPolicy None without dnsConfig", patch: spec(corev1.PodSpec{DNSPolicy: corev1.DNSNone}),
			wantField: "spec.template.spec.dnsConfig", wantType: field.ErrorTypeRequired},
		{name: "dnsPolicy None without nameservers", patch: spec(corev1.PodSpec{DNSPolicy: corev1.DNSNone, DNSConfig: &corev1.PodDNSConfig{Searches: []string{"svc.cluster.local"}}}),
			wantField: "spec.template.spec.dnsConfig.nameservers", wantType: field.ErrorTypeRequired},
		{name: "dnsConfig nameserver", patch: spec(corev1.PodSpec{DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{"dns.local"}}}),
			wantField: "spec.template.spec.dnsConfig.nameservers[0]", wantType: field.ErrorTypeInvalid},
		{name: "dnsConfig too many nameservers", patch: spec(corev1.PodSpec{DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}}}),
			wantField: "spec.template.spec.dnsConfig.nameservers", wantType: field.ErrorTypeTooMany},
		{name: "dnsConfig search", patch: spec(corev1.PodSpec{DNSConfig: &corev1.PodDNSConfig{Searches: []string{"bad search"}}}),
			wantField: "spec.template.spec.dnsConfig.searches[0]", wantType: field.ErrorTypeInvalid},
		{name: "dnsConfig option name", patch: spec(corev1.PodSpec{DNSConfig: &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Value: new("2")}}}}),
			wantField: "spec.template.spec.dnsConfig.options[0].name", wantType: field.ErrorTypeRequired},
		{name: "hostAliases ip", patch: spec(corev1.PodSpec{HostAliases: []corev1.HostAlias{{IP: "db", Hostnames: []string{"db.local"}}}}),
			wantField: "spec.template.spec.hostAliases[0].ip", wantType: field.ErrorTypeInvalid},
		{name: "hostAliases hostname", patch: spec(corev1.PodSpec{HostAliases: []corev1.HostAlias{{IP: "10.0.0.5", Hostnames: []string{"DB_1"}}}}),
			wantField: "spec.template.spec.hostAliases[0].hostnames[0]", wantType: field.ErrorTypeInvalid},
		{name: "readinessGates", patch: spec(corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "not ready!"}}}),
			wantField: "spec.template.spec.readinessGates[0].conditionType", wantType: field.ErrorTypeInvalid},
		{name: "schedulingGates", patch: spec(corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "not a gate"}}}),
			wantField: "spec.template.spec.schedulingGates[0]", wantType: field.ErrorTypeInvalid},
		{name: "schedulingGates duplicate", patch: spec(corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "a"}, {Name: "a"}}}),
			wantField: "spec.template.spec.schedulingGates[1]", wantType: field.ErrorTypeDuplicate},
		{name: "runtimeClassName", patch: spec(corev1.PodSpec{RuntimeClassName: new("Not_Valid")}),
			wantField: "spec.template.spec.runtimeClassName", wantType: field.ErrorTypeInvalid},
		{name: "os", patch: spec(corev1.PodSpec{OS: &corev1.PodOS{Name: "plan9"}}),
			wantField: "spec.template.spec.os.name", wantType: field.ErrorTypeNotSupported},
		{name: "shareProcessNamespace with hostPID", patch: spec(corev1.PodSpec{ShareProcessNamespace: new(true), HostPID: true}),
			wantField: "spec.template.spec.shareProcessNamespace", wantType: field.ErrorTypeInvalid},
		{name: "hostUsers false with hostIPC", patch: spec(corev1.PodSpec{HostUsers: new(false), HostIPC: true}),
			wantField: "spec.template.spec.hostIPC", wantType: field.ErrorTypeForbidden},
		{name: "hostNetwork with another hostPort", patch: spec(corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{
			Name: "worker", Ports: []corev1.ContainerPort{{ContainerPort: 9000, HostPort: 9001}}}}}),
			wantField: "spec.template.spec.containers[0].ports[0].hostPort", wantType: field.ErrorTypeInvalid},

		// security contexts
		{name: "pod runAsUser -1", patch: spec(corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsUser: new(int64(-1))}}),
			wantField: "spec.template.spec.securityContext.runAsUser", wantType: field.ErrorTypeInvalid},
		{name: "pod runAsGroup -1", patch: spec(corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsGroup: new(int64(-1))}}),
			wantField: "spec.template.spec.securityContext.runAsGroup", wantType: field.ErrorTypeInvalid},
		{name: "pod fsGroup -1", patch: spec(corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{FSGroup: new(int64(-1))}}),
			wantField: "spec.template.spec.securityContext.fsGroup", wantType: field.ErrorTypeInvalid},
		{name: "pod supplementalGroups -1", patch: spec(corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SupplementalGroups: []int64{1000, -1}}}),
			wantField: "spec.template.spec.securityContext.supplementalGroups[1]", wantType: field.ErrorTypeInvalid},
		{name: "pod fsGroupChangePolicy", patch: spec(corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{FSGroupChangePolicy: new(corev1.PodFSGroupChangePolicy("Sometimes"))}}),
			wantField: "spec.template.spec.securityContext.fsGroupChangePolicy", wantType: field.ErrorTypeNotSupported},
		{name: "pod sysctl name", patch: spec(corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net/core/Bad Name"}}}}),
			wantField: "spec.template.spec.securityContext.sysctls[0].name", wantType: field.ErrorTypeInvalid},
		{name: "pod sysctl duplicate", patch: spec(corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.shm_rmid_forced"}, {Name: "kernel.shm_rmid_forced"}}}}),
			wantField: "spec.template.spec.securityContext.sysctls[1].name", wantType: field.ErrorTypeDuplicate},
		{name: "pod seccomp Localhost without profile", patch: spec(corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}}}),
			wantField: "spec.template.spec.securityContext.seccompProfile.localhostProfile", wantType: field.ErrorTypeRequired},
		{name: "pod seccomp profile without Localhost", patch: spec(corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault, LocalhostProfile: new("p.json")}}}),
			wantField: "spec.template.spec.securityContext.seccompProfile.localhostProfile", wantType: field.ErrorTypeInvalid},
		{name: "pod appArmor Localhost without profile", patch: spec(corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{
			AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost}}}),
			wantField: "spec.template.spec.securityContext.appArmorProfile.localhostProfile", wantType: field.ErrorTypeRequired},
		{name: "container runAsUser -1", patch: worker(corev1.Container{SecurityContext: &corev1.SecurityContext{RunAsUser: new(int64(-1))}}),
			wantField: "spec.template.spec.containers[0].securityContext.runAsUser", wantType: field.ErrorTypeInvalid},
		{name: "container runAsGroup too large", patch: worker(corev1.Container{SecurityContext: &corev1.SecurityContext{RunAsGroup: new(int64(1 << 31))}}),
			wantField: "spec.template.spec.containers[0].securityContext.runAsGroup", wantType: field.ErrorTypeInvalid},
		{name: "privileged without privilege escalation", patch: worker(corev1.Container{SecurityContext: &corev1.SecurityContext{
			Privileged: new(true), AllowPrivilegeEscalation: new(false)}}),
			wantField: "spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation", wantType: field.ErrorTypeInvalid},
		{name: "CAP_SYS_ADMIN without privilege escalation", patch: worker(corev1.Container{SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: new(false), Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"CAP_SYS_ADMIN"}}}}),
			wantField: "spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation", wantType: field.ErrorTypeInvalid},
		{name: "procMount Unmasked in the host user namespace", patch: worker(corev1.Container{SecurityContext: &corev1.SecurityContext{ProcMount: new(corev1.UnmaskedProcMount)}}),
			wantField: "spec.template.spec.containers[0].securityContext.procMount", wantType: field.ErrorTypeInvalid, wantDetail: "hostUsers: false"},
		{name: "procMount Unmasked with hostUsers false", patch: spec(corev1.PodSpec{HostUsers: new(false), Containers: []corev1.Container{{
			Name: "worker", SecurityContext: &corev1.SecurityContext{ProcMount: new(corev1.UnmaskedProcMount)}}}})},

		// containers: termination, restart, resize
		{name: "terminationMessagePolicy", patch: worker(corev1.Container{TerminationMessagePolicy: "Always"}),
			wantField: "spec.template.spec.containers[0].terminationMessagePolicy", wantType: field.ErrorTypeNotSupported},
		{name: "container restartPolicy", patch: spec(corev1.PodSpec{InitContainers: []corev1.Container{{Name: "setup", RestartPolicy: new(corev1.ContainerRestartPolicy("Sometimes"))}}}),
			wantField: "spec.template.spec.initContainers[0].restartPolicy", wantType: field.ErrorTypeNotSupported},
		{name: "resizePolicy resource", patch: worker(corev1.Container{ResizePolicy: []corev1.ContainerResizePolicy{{ResourceName: "nvidia.com/gpu", RestartPolicy: corev1.NotRequired}}}),
			wantField: "spec.template.spec.containers[0].resizePolicy[0].resourceName", wantType: field.ErrorTypeNotSupported},

		// probes and hooks
		{name: "probe period negative", patch: worker(corev1.Container{LivenessProbe: tcpProbe(corev1.Probe{PeriodSeconds: -1})}),
			wantField: "spec.template.spec.containers[0].livenessProbe.periodSeconds", wantType: field.ErrorTypeInvalid},
		{name: "probe failureThreshold negative", patch: worker(corev1.Container{ReadinessProbe: tcpProbe(corev1.Probe{FailureThreshold: -1})}),
			wantField: "spec.template.spec.containers[0].readinessProbe.failureThreshold", wantType: field.ErrorTypeInvalid},
		{name: "probe timeout negative", patch: worker(corev1.Container{ReadinessProbe: tcpProbe(corev1.Probe{TimeoutSeconds: -1})}),
			wantField: "spec.template.spec.containers[0].readinessProbe.timeoutSeconds", wantType: field.ErrorTypeInvalid},
		{name: "probe initialDelay negative", patch: worker(corev1.Container{StartupProbe: tcpProbe(corev1.Probe{InitialDelaySeconds: -5})}),
			wantField: "spec.template.spec.containers[0].startupProbe.initialDelaySeconds", wantType: field.ErrorTypeInvalid},
		{name: "probe without a handler", patch: worker(corev1.Container{LivenessProbe: &corev1.Probe{PeriodSeconds: 30}}),
			wantField: "spec.template.spec.containers[0].livenessProbe", wantType: field.ErrorTypeRequired},
		{name: "probe with two handlers", patch: worker(corev1.Container{LivenessProbe: tcpProbe(corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"true"}}}})}),
			wantField: "spec.template.spec.containers[0].livenessProbe.tcpSocket", wantType: field.ErrorTypeForbidden, wantDetail: "exec is set"},
		{name: "liveness successThreshold", patch: worker(corev1.Container{LivenessProbe: tcpProbe(corev1.Probe{SuccessThreshold: 2})}),
			wantField: "spec.template.spec.containers[0].livenessProbe.successThreshold", wantType: field.ErrorTypeInvalid},
		{name: "readiness successThreshold", patch: worker(corev1.Container{ReadinessProbe: tcpProbe(corev1.Probe{SuccessThreshold: 2})})},
		{name: "readiness grace period", patch: worker(corev1.Container{ReadinessProbe: tcpProbe(corev1.Probe{TerminationGracePeriodSeconds: new(int64(10))})}),
			wantField: "spec.template.spec.containers[0].readinessProbe.terminationGracePeriodSeconds", wantType: field.ErrorTypeInvalid},
		{name: "liveness grace period 0", patch: worker(corev1.Container{LivenessProbe: tcpProbe(corev1.Probe{TerminationGracePeriodSeconds: new(int64(0))})}),
			wantField: "spec.template.spec.containers[0].livenessProbe.terminationGracePeriodSeconds", wantType: field.ErrorTypeInvalid},
		{name: "httpGet port 0", patch: worker(corev1.Container{ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(0)}}}}),
			wantField: "spec.template.spec.containers[0].readinessProbe.httpGet.port", wantType: field.ErrorTypeInvalid},
		{name: "httpGet scheme", patch: worker(corev1.Container{ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http"), Scheme: "FTP"}}}}),
			wantField: "spec.template.spec.containers[0].readinessProbe.httpGet.scheme", wantType: field.ErrorTypeNotSupported},
		{name: "exec without command", patch: worker(corev1.Container{LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}}}),
			wantField: "spec.template.spec.containers[0].livenessProbe.exec.command", wantType: field.ErrorTypeRequired},
		{name: "grpc port", patch: worker(corev1.Container{LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 0}}}}),
			wantField: "spec.template.spec.containers[0].livenessProbe.grpc.port", wantType: field.ErrorTypeInvalid},
		{name: "init container probe", patch: spec(corev1.PodSpec{InitContainers: []corev1.Container{{Name: "setup", Image: "busybox",
			ReadinessProbe: tcpProbe(corev1.Probe{})}}}),
			wantField: "spec.template.spec.initContainers[0].readinessProbe", wantType: field.ErrorTypeForbidden, wantDetail: "restartPolicy Always"},
		{name: "sidecar init container probe", patch: spec(corev1.PodSpec{InitContainers: []corev1.Container{{Name: "setup", Image: "busybox",
			RestartPolicy: new(corev1.ContainerRestartPolicyAlways), ReadinessProbe: tcpProbe(corev1.Probe{})}}})},
		{name: "preStop sleep beyond the grace period", patch: worker(corev1.Container{Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			Sleep: &corev1.SleepAction{Seconds: 600}}}}),
			wantField: "spec.template.spec.containers[0].lifecycle.preStop.sleep.seconds", wantType: field.ErrorTypeInvalid, wantDetail: "(30;"},
		{name: "preStop sleep within the policy's grace period", patch: spec(corev1.PodSpec{TerminationGracePeriodSeconds: new(int64(900)), Containers: []corev1.Container{{
			Name: "worker", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 600}}}}}})},
		{name: "postStart without a handler", patch: worker(corev1.Container{Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{}}}),
			wantField: "spec.template.spec.containers[0].lifecycle.postStart", wantType: field.ErrorTypeRequired},
		{name: "stopSignal without os", patch: worker(corev1.Container{Lifecycle: &corev1.Lifecycle{StopSignal: new(corev1.SIGUSR1)}}),
			wantField: "spec.template.spec.containers[0].lifecycle.stopSignal", wantType: field.ErrorTypeForbidden},
		{name: "stopSignal on windows", patch: spec(corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{
			Name: "worker", Lifecycle: &corev1.Lifecycle{StopSignal: new(corev1.SIGUSR1)}}}}),
			wantField: "spec.template.spec.containers[0].lifecycle.stopSignal", wantType: field.ErrorTypeNotSupported},

		// environment references, mount options
		{name: "env fieldRef path", patch: worker(corev1.Container{Env: []corev1.EnvVar{{Name: "H", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.hostname"}}}}}),
			wantField: "spec.template.spec.containers[0].env[0].valueFrom.fieldRef.fieldPath", wantType: field.ErrorTypeNotSupported},
		{name: "env fieldRef label key", patch: worker(corev1.Container{Env: []corev1.EnvVar{{Name: "T", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['bad key']"}}}}}),
			wantField: "spec.template.spec.containers[0].env[0].valueFrom.fieldRef.fieldPath", wantType: field.ErrorTypeInvalid},
		{name: "env fieldRef apiVersion", patch: worker(corev1.Container{Env: []corev1.EnvVar{{Name: "N", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}}}}),
			wantField: "spec.template.spec.containers[0].env[0].valueFrom.fieldRef.apiVersion", wantType: field.ErrorTypeNotSupported},
		{name: "env resourceFieldRef", patch: worker(corev1.Container{Env: []corev1.EnvVar{{Name: "G", ValueFrom: &corev1.EnvVarSource{
			ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.nvidia.com/gpu"}}}}}),
			wantField: "spec.template.spec.containers[0].env[0].valueFrom.resourceFieldRef.resource", wantType: field.ErrorTypeNotSupported},
		{name: "env configMapKeyRef key", patch: worker(corev1.Container{Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}),
			wantField: "spec.template.spec.containers[0].env[0].valueFrom.configMapKeyRef.key", wantType: field.ErrorTypeRequired},
		{name: "env secretKeyRef name", patch: worker(corev1.Container{Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}}),
			wantField: "spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.name", wantType: field.ErrorTypeRequired},
		{name: "envFrom configMapRef name", patch: worker(corev1.Container{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}}}}),
			wantField: "spec.template.spec.containers[0].envFrom[0].configMapRef.name", wantType: field.ErrorTypeRequired},
		{name: "mount subPath absolute", patch: worker(corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "s", MountPath: "/s", SubPath: "/abs"}}}),
			wantField: "spec.template.spec.containers[0].volumeMounts[0].subPath", wantType: field.ErrorTypeInvalid},
		{name: "mount subPath and subPathExpr", patch: worker(corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "s", MountPath: "/s", SubPath: "a", SubPathExpr: "$(POD)"}}}),
			wantField: "spec.template.spec.containers[0].volumeMounts[0].subPathExpr", wantType: field.ErrorTypeInvalid},
		{name: "mount Bidirectional unprivileged", patch: worker(corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "s", MountPath: "/s",
			MountPropagation: new(corev1.MountPropagationBidirectional)}}}),
			wantField: "spec.template.spec.containers[0].volumeMounts[0].mountPropagation", wantType: field.ErrorTypeForbidden},
		{name: "mount Bidirectional privileged", patch: worker(corev1.Container{SecurityContext: &corev1.SecurityContext{Privileged: new(true)},
			VolumeMounts: []corev1.VolumeMount{{Name: "s", MountPath: "/s", MountPropagation: new(corev1.MountPropagationBidirectional)}}})},
		{name: "mount recursiveReadOnly without readOnly", patch: worker(corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "s", MountPath: "/s",
			RecursiveReadOnly: new(corev1.RecursiveReadOnlyIfPossible)}}}),
			wantField: "spec.template.spec.containers[0].volumeMounts[0].recursiveReadOnly", wantType: field.ErrorTypeForbidden},

		// node affinity
		{name: "required node affinity with two terms", patch: requiredNode(expression("a", corev1.NodeSelectorOpExists), expression("b", corev1.NodeSelectorOpExists)),
			wantField: "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
			wantType:  field.ErrorTypeInvalid, wantDetail: "must have exactly one term"},
		{name: "required node affinity without terms", patch: requiredNode(),
			wantField: "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
			wantType:  field.ErrorTypeInvalid},
		{name: "node selector key", patch: requiredNode(expression("bad key", corev1.NodeSelectorOpExists)),
			wantField: "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key",
			wantType:  field.ErrorTypeInvalid},
		{name: "node selector In without values", patch: requiredNode(expression("zone", corev1.NodeSelectorOpIn)),
			wantField: "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values",
			wantType:  field.ErrorTypeRequired},
		{name: "node selector Exists with values", patch: requiredNode(expression("zone", corev1.NodeSelectorOpExists, "a")),
			wantField: "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values",
			wantType:  field.ErrorTypeForbidden},
		{name: "node selector Gt not an integer", patch: requiredNode(expression("gpus", corev1.NodeSelectorOpGt, "two")),
			wantField: "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0]",
			wantType:  field.ErrorTypeInvalid},
		{name: "node selector Lt with two values", patch: requiredNode(expression("gpus", corev1.NodeSelectorOpLt, "1", "2")),
			wantField: "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values",
			wantType:  field.ErrorTypeInvalid},
		{name: "node selector operator", patch: requiredNode(expression("zone", "Like", "a")),
			wantField: "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator",
			wantType:  field.ErrorTypeNotSupported},
		{name: "matchFields key", patch: requiredNode(matchField("metadata.labels", corev1.NodeSelectorOpIn, "node-1")),
			wantField: "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].key",
			wantType:  field.ErrorTypeNotSupported},
		{name: "matchFields operator", patch: requiredNode(matchField("metadata.name", corev1.NodeSelectorOpExists)),
			wantField: "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].operator",
			wantType:  field.ErrorTypeNotSupported},
		{name: "matchFields two values", patch: requiredNode(matchField("metadata.name", corev1.NodeSelectorOpIn, "node-1", "node-2")),
			wantField: "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].values",
			wantType:  field.ErrorTypeInvalid},
		{name: "preferred node affinity weight", patch: affinity(corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 0, Preference: expression("zone", corev1.NodeSelectorOpExists)}},
		}}), wantField: "spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", wantType: field.ErrorTypeInvalid},
		{name: "preferred node affinity term", patch: affinity(corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 10, Preference: expression("zone", corev1.NodeSelectorOpNotIn)}},
		}}), wantField: "spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].values",
			wantType: field.ErrorTypeRequired},

		// pod (anti-)affinity
		{name: "pod affinity topologyKey required", patch: podAffinity(corev1.PodAffinityTerm{LabelSelector: appSelector}),
			wantField: "spec.template.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey", wantType: field.ErrorTypeRequired},
		{name: "pod affinity topologyKey", patch: podAffinity(corev1.PodAffinityTerm{LabelSelector: appSelector, TopologyKey: "-zone"}),
			wantField: "spec.template.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey", wantType: field.ErrorTypeInvalid},
		{name: "pod affinity labelSelector", patch: podAffinity(corev1.PodAffinityTerm{TopologyKey: "zone", LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}},
		}}), wantField: "spec.template.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].values",
			wantType: field.ErrorTypeRequired},
		{name: "pod affinity namespaceSelector", patch: podAffinity(corev1.PodAffinityTerm{TopologyKey: "zone", NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"bad key": "x"},
		}}), wantField: "spec.template.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector.matchLabels",
			wantType: field.ErrorTypeInvalid},
		{name: "pod affinity namespaces", patch: podAffinity(corev1.PodAffinityTerm{TopologyKey: "zone", Namespaces: []string{"team-a", "Team_B"}}),
			wantField: "spec.template.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaces[1]", wantType: field.ErrorTypeInvalid},
		{name: "pod anti-affinity required topologyKey", patch: affinity(corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname"}, {}},
		}}), wantField: "spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[1].topologyKey",
			wantType: field.ErrorTypeRequired},
		{name: "pod anti-affinity preferred weight", patch: affinity(corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 101, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "zone"}}},
		}}), wantField: "spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
			wantType: field.ErrorTypeInvalid},
		{name: "pod anti-affinity preferred topologyKey", patch: affinity(corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1}},
		}}), wantField: "spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey",
			wantType: field.ErrorTypeRequired},

		// topologySpreadConstraints
		{name: "spread maxSkew", patch: spread(corev1.TopologySpreadConstraint{TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}),
			wantField: "spec.template.spec.topologySpreadConstraints[0].maxSkew", wantType: field.ErrorTypeInvalid},
		{name: "spread topologyKey required", patch: spread(corev1.TopologySpreadConstraint{MaxSkew: 1, WhenUnsatisfiable: corev1.DoNotSchedule}),
			wantField: "spec.template.spec.topologySpreadConstraints[0].topologyKey", wantType: field.ErrorTypeRequired},
		{name: "spread topologyKey", patch: spread(corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "bad key", WhenUnsatisfiable: corev1.DoNotSchedule}),
			wantField: "spec.template.spec.topologySpreadConstraints[0].topologyKey", wantType: field.ErrorTypeInvalid},
		{name: "spread whenUnsatisfiable", patch: spread(corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone"}),
			wantField: "spec.template.spec.topologySpreadConstraints[0].whenUnsatisfiable", wantType: field.ErrorTypeNotSupported},
		{name: "spread labelSelector", patch: spread(corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Like"}}},
		}), wantField: "spec.template.spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].operator", wantType: field.ErrorTypeInvalid},
		{name: "spread minDomains", patch: spread(corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule, MinDomains: new(int32(0)),
		}), wantField: "spec.template.spec.topologySpreadConstraints[0].minDomains", wantType: field.ErrorTypeInvalid},
		{name: "spread minDomains needs DoNotSchedule", patch: spread(corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.ScheduleAnyway, MinDomains: new(int32(3)),
		}), wantField: "spec.template.spec.topologySpreadConstraints[0].minDomains", wantType: field.ErrorTypeInvalid},
		{name: "spread nodeTaintsPolicy", patch: spread(corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule, NodeTaintsPolicy: new(corev1.NodeInclusionPolicy("Sometimes")),
		}), wantField: "spec.template.spec.topologySpreadConstraints[0].nodeTaintsPolicy", wantType: field.ErrorTypeNotSupported},
		{name: "spread duplicate", patch: spread(zoneSpread, corev1.TopologySpreadConstraint{MaxSkew: 3, TopologyKey: zoneSpread.TopologyKey, WhenUnsatisfiable: zoneSpread.WhenUnsatisfiable}),
			wantField: "spec.template.spec.topologySpreadConstraints[1]", wantType: field.ErrorTypeDuplicate},

		// scalar fields
		{name: "priorityClassName", patch: spec(corev1.PodSpec{PriorityClassName: "High_Priority"}),
			wantField: "spec.template.spec.priorityClassName", wantType: field.ErrorTypeInvalid},
		{name: "schedulerName", patch: spec(corev1.PodSpec{SchedulerName: "my scheduler"}),
			wantField: "spec.template.spec.schedulerName", wantType: field.ErrorTypeInvalid},
		{name: "serviceAccountName", patch: spec(corev1.PodSpec{ServiceAccountName: "Dask"}),
			wantField: "spec.template.spec.serviceAccountName", wantType: field.ErrorTypeInvalid},
		{name: "restartPolicy", patch: spec(corev1.PodSpec{RestartPolicy: "Sometimes"}),
			wantField: "spec.template.spec.restartPolicy", wantType: field.ErrorTypeNotSupported},
		{name: "dnsPolicy", patch: spec(corev1.PodSpec{DNSPolicy: "Custom"}),
			wantField: "spec.template.spec.dnsPolicy", wantType: field.ErrorTypeNotSupported},
		{name: "terminationGracePeriodSeconds", patch: spec(corev1.PodSpec{TerminationGracePeriodSeconds: new(int64(-1))}),
			wantField: "spec.template.spec.terminationGracePeriodSeconds", wantType: field.ErrorTypeInvalid},
	}
	checkFieldErrors(t, cases, PodSpec, field.NewPath("spec", "template", "spec"))
}
