package policies

import (
	"strings"
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

func TestValidateTemplatePatch(t *testing.T) {
	spec := func(s corev1.PodSpec) *TemplatePatch { return &TemplatePatch{Spec: s} }
	container := func(c corev1.Container) *TemplatePatch {
		return spec(corev1.PodSpec{Containers: []corev1.Container{c}})
	}
	toleration := func(tol corev1.Toleration) *TemplatePatch {
		return spec(corev1.PodSpec{Tolerations: []corev1.Toleration{tol}})
	}
	affinity := func(a corev1.Affinity) *TemplatePatch { return spec(corev1.PodSpec{Affinity: &a}) }
	requiredNode := func(terms ...corev1.NodeSelectorTerm) *TemplatePatch {
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
	podAffinity := func(term corev1.PodAffinityTerm) *TemplatePatch {
		return affinity(corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term},
		}})
	}
	spread := func(cs ...corev1.TopologySpreadConstraint) *TemplatePatch {
		return spec(corev1.PodSpec{TopologySpreadConstraints: cs})
	}
	zoneSpread := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule}
	resources := func(requests, limits corev1.ResourceList) *TemplatePatch {
		return container(corev1.Container{Name: "*", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}})
	}
	q := resource.MustParse
	appSelector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "dask"}}

	valid := &TemplatePatch{
		Metadata: PatchMetadata{
			Labels:      map[string]string{"team": "ml", "example.com/tier": "gpu", "empty": ""},
			Annotations: map[string]string{"example.com/note": "any value: at all!", "Cluster-Autoscaler.kubernetes.io/safe-to-evict": "true"},
		},
		Spec: corev1.PodSpec{
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
		},
	}

	cases := []fieldErrorCase[TemplatePatch]{
		{name: "valid policy with many fields", patch: valid},
		{name: "empty template", patch: &TemplatePatch{}},
		{name: "container with only name and resources", patch: resources(nil, corev1.ResourceList{"nvidia.com/gpu": q("1")})},

		// metadata
		{name: "label key", patch: &TemplatePatch{Metadata: PatchMetadata{Labels: map[string]string{"bad key": "x"}}},
			wantField: "spec.template.metadata.labels", wantType: field.ErrorTypeInvalid},
		{name: "label value", patch: &TemplatePatch{Metadata: PatchMetadata{Labels: map[string]string{"team": "not valid!"}}},
			wantField: "spec.template.metadata.labels", wantType: field.ErrorTypeInvalid},
		{name: "annotation key", patch: &TemplatePatch{Metadata: PatchMetadata{Annotations: map[string]string{"bad key": "x"}}},
			wantField: "spec.template.metadata.annotations", wantType: field.ErrorTypeInvalid},
		{name: "annotations too large", patch: &TemplatePatch{Metadata: PatchMetadata{Annotations: map[string]string{"big": strings.Repeat("x", 256*1024)}}},
			wantField: "spec.template.metadata.annotations", wantType: field.ErrorTypeTooLong},
		{name: "reserved annotation", patch: &TemplatePatch{Metadata: PatchMetadata{Annotations: map[string]string{AppliedAnnotation: "x"}}},
			wantField: "spec.template.metadata.annotations[podpatch.io/applied]", wantType: field.ErrorTypeForbidden, wantDetail: "set by podpatch itself"},

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
		{name: "initContainer name", patch: spec(corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}, {Name: "Init"}}}),
			wantField: "spec.template.spec.initContainers[1].name", wantType: field.ErrorTypeInvalid},
		{name: "env name", patch: container(corev1.Container{Name: "*", Env: []corev1.EnvVar{{Name: "1FOO", Value: "x"}}}),
			wantField: "spec.template.spec.containers[0].env[0].name", wantType: field.ErrorTypeInvalid},
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
			Prefix: "1_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}},
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
		{name: "volume name", patch: spec(corev1.PodSpec{Volumes: []corev1.Volume{{Name: "Scratch"}}}),
			wantField: "spec.template.spec.volumes[0].name", wantType: field.ErrorTypeInvalid},
		{name: "volume name required", patch: spec(corev1.PodSpec{Volumes: []corev1.Volume{{}}}),
			wantField: "spec.template.spec.volumes[0].name", wantType: field.ErrorTypeRequired},
		{name: "volume name duplicate", patch: spec(corev1.PodSpec{Volumes: []corev1.Volume{{Name: "a"}, {Name: "a"}}}),
			wantField: "spec.template.spec.volumes[1].name", wantType: field.ErrorTypeDuplicate},
		{name: "imagePullSecret name required", patch: spec(corev1.PodSpec{ImagePullSecrets: []corev1.LocalObjectReference{{}}}),
			wantField: "spec.template.spec.imagePullSecrets[0].name", wantType: field.ErrorTypeRequired},

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
	checkFieldErrors(t, cases, validateTemplatePatch, field.NewPath("spec", "template"))
}

func TestValidateServicePatch(t *testing.T) {
	spec := func(s corev1.ServiceSpec) *ServicePatch { return &ServicePatch{Spec: s} }
	port := func(p corev1.ServicePort) *ServicePatch {
		return spec(corev1.ServiceSpec{Ports: []corev1.ServicePort{p}})
	}

	valid := &ServicePatch{
		Metadata: PatchMetadata{
			Labels:      map[string]string{"team": "ml"},
			Annotations: map[string]string{"networking.gke.io/load-balancer-type": "Internal"},
		},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{
				{Name: "tcp-comm", Port: 8786, TargetPort: intstr.FromInt32(8786), Protocol: corev1.ProtocolTCP},
				{Name: "http-dashboard", Port: 8787, TargetPort: intstr.FromString("dashboard"), NodePort: 30087},
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
			},
			Selector:                 map[string]string{"app.kubernetes.io/name": "dask"},
			ExternalTrafficPolicy:    corev1.ServiceExternalTrafficPolicyLocal,
			InternalTrafficPolicy:    new(corev1.ServiceInternalTrafficPolicyCluster),
			SessionAffinity:          corev1.ServiceAffinityClientIP,
			LoadBalancerSourceRanges: []string{"10.0.0.0/8", " 192.168.0.0/16 ", "2001:db8::/32"},
			ClusterIP:                corev1.ClusterIPNone,
			ClusterIPs:               []string{corev1.ClusterIPNone},
		},
	}

	cases := []fieldErrorCase[ServicePatch]{
		{name: "valid service", patch: valid},
		{name: "empty service", patch: &ServicePatch{}},

		{name: "label key", patch: &ServicePatch{Metadata: PatchMetadata{Labels: map[string]string{"bad key": "x"}}},
			wantField: "spec.service.metadata.labels", wantType: field.ErrorTypeInvalid},
		{name: "annotation key", patch: &ServicePatch{Metadata: PatchMetadata{Annotations: map[string]string{"a/b/c": "x"}}},
			wantField: "spec.service.metadata.annotations", wantType: field.ErrorTypeInvalid},
		{name: "reserved annotation", patch: &ServicePatch{Metadata: PatchMetadata{Annotations: map[string]string{AppliedAnnotation: ""}}},
			wantField: "spec.service.metadata.annotations[podpatch.io/applied]", wantType: field.ErrorTypeForbidden},
		{name: "type", patch: spec(corev1.ServiceSpec{Type: "Internal"}),
			wantField: "spec.service.spec.type", wantType: field.ErrorTypeNotSupported},
		{name: "port required", patch: port(corev1.ServicePort{Name: "http"}),
			wantField: "spec.service.spec.ports[0].port", wantType: field.ErrorTypeRequired},
		{name: "port range", patch: port(corev1.ServicePort{Port: 70000}),
			wantField: "spec.service.spec.ports[0].port", wantType: field.ErrorTypeInvalid},
		{name: "port name", patch: port(corev1.ServicePort{Port: 80, Name: "HTTP"}),
			wantField: "spec.service.spec.ports[0].name", wantType: field.ErrorTypeInvalid},
		{name: "port name duplicate", patch: spec(corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, Name: "http"}, {Port: 8080, Name: "http"}}}),
			wantField: "spec.service.spec.ports[1].name", wantType: field.ErrorTypeDuplicate},
		{name: "port protocol", patch: port(corev1.ServicePort{Port: 80, Protocol: "HTTP"}),
			wantField: "spec.service.spec.ports[0].protocol", wantType: field.ErrorTypeNotSupported},
		{name: "nodePort range", patch: port(corev1.ServicePort{Port: 80, NodePort: 70000}),
			wantField: "spec.service.spec.ports[0].nodePort", wantType: field.ErrorTypeInvalid},
		{name: "targetPort number", patch: port(corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(70000)}),
			wantField: "spec.service.spec.ports[0].targetPort", wantType: field.ErrorTypeInvalid},
		{name: "targetPort name", patch: port(corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("web_http")}),
			wantField: "spec.service.spec.ports[0].targetPort", wantType: field.ErrorTypeInvalid},
		{name: "selector key", patch: spec(corev1.ServiceSpec{Selector: map[string]string{"bad key": "x"}}),
			wantField: "spec.service.spec.selector", wantType: field.ErrorTypeInvalid},
		{name: "selector value", patch: spec(corev1.ServiceSpec{Selector: map[string]string{"app": "-dask"}}),
			wantField: "spec.service.spec.selector", wantType: field.ErrorTypeInvalid},
		{name: "externalTrafficPolicy", patch: spec(corev1.ServiceSpec{ExternalTrafficPolicy: "Global"}),
			wantField: "spec.service.spec.externalTrafficPolicy", wantType: field.ErrorTypeNotSupported},
		{name: "internalTrafficPolicy", patch: spec(corev1.ServiceSpec{InternalTrafficPolicy: new(corev1.ServiceInternalTrafficPolicy("Global"))}),
			wantField: "spec.service.spec.internalTrafficPolicy", wantType: field.ErrorTypeNotSupported},
		{name: "sessionAffinity", patch: spec(corev1.ServiceSpec{SessionAffinity: "Sticky"}),
			wantField: "spec.service.spec.sessionAffinity", wantType: field.ErrorTypeNotSupported},
		{name: "loadBalancerSourceRanges", patch: spec(corev1.ServiceSpec{LoadBalancerSourceRanges: []string{"10.0.0.0/8", "10.1.0.0"}}),
			wantField: "spec.service.spec.loadBalancerSourceRanges[1]", wantType: field.ErrorTypeInvalid},
		{name: "clusterIP", patch: spec(corev1.ServiceSpec{ClusterIP: "10.96.0.10"}),
			wantField: "spec.service.spec.clusterIP", wantType: field.ErrorTypeForbidden, wantDetail: "immutable and assigned by the API server"},
		{name: "clusterIPs", patch: spec(corev1.ServiceSpec{ClusterIPs: []string{"10.96.0.10"}}),
			wantField: "spec.service.spec.clusterIPs[0]", wantType: field.ErrorTypeForbidden},
	}
	checkFieldErrors(t, cases, validateServicePatch, field.NewPath("spec", "service"))
}

func TestValidatePatchNil(t *testing.T) {
	assert.Empty(t, validateTemplatePatch(nil, field.NewPath("spec", "template")))
	assert.Empty(t, validateServicePatch(nil, field.NewPath("spec", "service")))
}

// TestValidateTemplatePatchReportsEveryError checks that errors are collected, not stopped at
// the first, and come out in a stable order.
func TestValidateTemplatePatchReportsEveryError(t *testing.T) {
	patch := &TemplatePatch{
		Metadata: PatchMetadata{Labels: map[string]string{"b key": "x", "a key": "y"}},
		Spec: corev1.PodSpec{
			Tolerations:   []corev1.Toleration{{Key: "k", Operator: "Sometimes", Effect: "Always"}},
			RestartPolicy: "Sometimes",
		},
	}
	fld := field.NewPath("spec", "template")
	errs := validateTemplatePatch(patch, fld)
	var got []string
	for _, e := range errs {
		got = append(got, e.Field+" "+string(e.Type))
	}
	assert.Equal(t, []string{
		"spec.template.metadata.labels FieldValueInvalid",
		"spec.template.metadata.labels FieldValueInvalid",
		"spec.template.spec.tolerations[0].operator FieldValueNotSupported",
		"spec.template.spec.tolerations[0].effect FieldValueNotSupported",
		"spec.template.spec.restartPolicy FieldValueNotSupported",
	}, got)
	require.Len(t, errs, 5)
	assert.Equal(t, "a key", errs[0].BadValue, "labels are reported in key order")
	assert.Equal(t, errs.ToAggregate().Error(), validateTemplatePatch(patch, fld).ToAggregate().Error())
}
