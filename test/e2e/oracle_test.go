package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/policies/versions"
	"github.com/podpatch/podpatch/test/cluster"
)

// The validation oracle: lint must judge a policy as the API server judges the objects that
// policy produces ("Validation agrees with Kubernetes"). A policy that lint accepts
// must never make a matching Pod or Service fail to create, and lint should not reject what
// Kubernetes would accept.
//
// TO ADD A CASE — a user reports a policy that lint accepted and whose Pod or Service the API
// server then refused, or the reverse — add a row below: the policy's `template:` or `service:`
// part as YAML, and next to it its valid neighbour (the closest policy that must pass). Run
//
//	go test ./test/e2e -run TestValidationOracle
//
// then fix the field rules (internal/k8sfields, by concern: pod.go, containers.go,
// volumes.go, services.go) until the row agrees, with a unit case in
// internal/k8sfields (TestPodSpec, TestServiceSpec). A `template` row is applied to the Dask operator's worker Pod
// (container "worker", no volumes, limits cpu 1 / memory 2Gi), a `service` row to its scheduler
// Service (ClusterIP, ports tcp-comm 8786 and http-dashboard 8787); address the fixture's
// containers by name, not "*" (see oracleObject).

// oracleRow is one policy part and, when lint and Kubernetes are known to disagree on purpose,
// why.
type oracleRow struct {
	name string
	// part is "template" or "service": which part of a PodTemplatePatch yaml is.
	part string
	yaml string
	// differs, when set, documents a deliberate disagreement; the row then checks that lint and
	// the API server still disagree, so that the reason is revisited when either side changes.
	differs string
	// rule, when set, is the version-dependent validation rule the row tests
	// (versions.Rules): on a version that does not apply it, lint (which holds every supported
	// version to a stricter rule) must reject what the API server accepts.
	rule *versions.Rule
	// leftOut, when set, is the rule by which podpatch leaves this lint-valid policy out of the
	// fixture (reference §8, valid in, valid out): the object it produces is the fixture unpatched.
	leftOut string
}

// Lint accepts a volume source that leaves out what it names: it patches that source of the
// object's volume of the same name (reference §3, apply golden merge-volumes-and-image-pull-secrets).
// The worker has no such volume, so it would be added incomplete: podpatch leaves the policy out
// (reference §8, rule volume-source).

var oracleRows = []oracleRow{
	// Ephemeral containers are added to running Pods only, through their own subresource.
	{name: "ephemeral container", part: "template", yaml: `{spec: {ephemeralContainers: [{name: debug, image: busybox}]}}`},
	{name: "sidecar init container", part: "template", yaml: `{spec: {initContainers: [{name: debug, image: busybox, restartPolicy: Always}]}}`},

	// Volumes: exactly one source, and each source's own rules.
	// A volume without a source becomes an emptyDir (SetDefaults_Volume), or keeps the object's source.
	{name: "volume without a source", part: "template", yaml: `{spec: {volumes: [{name: scratch}]}}`},
	{name: "volume with emptyDir", part: "template", yaml: `{spec: {volumes: [{name: scratch, emptyDir: {}}]}}`},
	{name: "volume with two sources", part: "template", yaml: `{spec: {volumes: [{name: scratch, emptyDir: {}, configMap: {name: cfg}}]}}`},
	{name: "configMap volume", part: "template", yaml: `{spec: {volumes: [{name: cfg, configMap: {name: cfg, defaultMode: 0644, items: [{key: a, path: a.conf}]}}]}}`},
	{name: "configMap volume without name", part: "template", yaml: `{spec: {volumes: [{name: cfg, configMap: {defaultMode: 0444}}]}}`,
		leftOut: validity.RuleVolumeSource},
	{name: "secret volume", part: "template", yaml: `{spec: {volumes: [{name: creds, secret: {secretName: creds, defaultMode: 0400}}]}}`},
	{name: "file mode above 0777", part: "template", yaml: `{spec: {volumes: [{name: cfg, configMap: {name: cfg, defaultMode: 01000}}]}}`},
	{name: "item path climbing out", part: "template", yaml: `{spec: {volumes: [{name: cfg, configMap: {name: cfg, items: [{key: a, path: ../a}]}}]}}`},
	{name: "hostPath without path", part: "template", yaml: `{spec: {volumes: [{name: data, hostPath: {type: Directory}}]}}`,
		leftOut: validity.RuleVolumeSource},
	{name: "hostPath with unknown type", part: "template", yaml: `{spec: {volumes: [{name: data, hostPath: {path: /data, type: Folder}}]}}`},
	{name: "hostPath directory", part: "template", yaml: `{spec: {volumes: [{name: data, hostPath: {path: /data, type: Directory}}]}}`},
	{name: "claim", part: "template", yaml: `{spec: {volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]}}`},
	{name: "projected source with two kinds", part: "template", yaml: `{spec: {volumes: [{name: p, projected: {sources: [{configMap: {name: a}, secret: {name: b}}]}}]}}`},
	// serviceAccountName: the test API server runs without the ServiceAccount admission plugin,
	// which sets it on every real cluster; a token projection needs it.
	{name: "projected token", part: "template", yaml: `{spec: {serviceAccountName: default, volumes: [{name: p, projected: {sources: [{serviceAccountToken: {path: token, expirationSeconds: 3600}}]}}]}}`},
	{name: "projected token too short-lived", part: "template", yaml: `{spec: {serviceAccountName: default, volumes: [{name: p, projected: {sources: [{serviceAccountToken: {path: token, expirationSeconds: 60}}]}}]}}`},

	// Volume mounts.
	{name: "mount of the policy's volume", part: "template", yaml: `{spec: {volumes: [{name: scratch, emptyDir: {}}], containers: [{name: worker, volumeMounts: [{name: scratch, mountPath: /scratch}]}]}}`},
	// Lint accepts: a mount may name a volume the object brings (a manager's own volume), which
	// lint cannot see; the Dask worker has none, so podpatch leaves the policy out (reference §8).
	{name: "mount of a volume the object lacks", part: "template", yaml: `{spec: {containers: [{name: worker, volumeMounts: [{name: scratch, mountPath: /scratch}]}]}}`,
		leftOut: validity.RuleMountWithoutVolume},
	{name: "mount with absolute subPath", part: "template", yaml: `{spec: {volumes: [{name: scratch, emptyDir: {}}], containers: [{name: worker, volumeMounts: [{name: scratch, mountPath: /scratch, subPath: /abs}]}]}}`},
	{name: "bidirectional mount, unprivileged", part: "template", yaml: `{spec: {volumes: [{name: scratch, emptyDir: {}}], containers: [{name: worker, volumeMounts: [{name: scratch, mountPath: /scratch, mountPropagation: Bidirectional}]}]}}`},
	{name: "bidirectional mount, privileged", part: "template", yaml: `{spec: {volumes: [{name: scratch, emptyDir: {}}], containers: [{name: worker, securityContext: {privileged: true}, volumeMounts: [{name: scratch, mountPath: /scratch, mountPropagation: Bidirectional}]}]}}`},
	{name: "recursiveReadOnly without readOnly", part: "template", yaml: `{spec: {volumes: [{name: scratch, emptyDir: {}}], containers: [{name: worker, volumeMounts: [{name: scratch, mountPath: /scratch, recursiveReadOnly: IfPossible}]}]}}`},
	{name: "recursiveReadOnly with readOnly", part: "template", yaml: `{spec: {volumes: [{name: scratch, emptyDir: {}}], containers: [{name: worker, volumeMounts: [{name: scratch, mountPath: /scratch, readOnly: true, recursiveReadOnly: IfPossible}]}]}}`},

	// Security contexts.
	{name: "pod runAsUser -1", part: "template", yaml: `{spec: {securityContext: {runAsUser: -1}}}`},
	{name: "pod runAsUser 0", part: "template", yaml: `{spec: {securityContext: {runAsUser: 0}}}`},
	{name: "pod fsGroup -1", part: "template", yaml: `{spec: {securityContext: {fsGroup: -1}}}`},
	{name: "pod supplementalGroups -1", part: "template", yaml: `{spec: {securityContext: {supplementalGroups: [1000, -1]}}}`},
	{name: "pod groups", part: "template", yaml: `{spec: {securityContext: {runAsGroup: 1000, fsGroup: 1000, supplementalGroups: [1000], fsGroupChangePolicy: OnRootMismatch}}}`},
	{name: "pod fsGroupChangePolicy unknown", part: "template", yaml: `{spec: {securityContext: {fsGroupChangePolicy: Sometimes}}}`},
	{name: "pod sysctl with a bad name", part: "template", yaml: `{spec: {securityContext: {sysctls: [{name: "net/core/Bad Name", value: "1"}]}}}`},
	{name: "pod sysctl", part: "template", yaml: `{spec: {securityContext: {sysctls: [{name: net.core.somaxconn, value: "1024"}]}}}`},
	{name: "pod seccomp Localhost without profile", part: "template", yaml: `{spec: {securityContext: {seccompProfile: {type: Localhost}}}}`},
	{name: "pod seccomp RuntimeDefault", part: "template", yaml: `{spec: {securityContext: {seccompProfile: {type: RuntimeDefault}}}}`},
	{name: "pod appArmor Localhost without profile", part: "template", yaml: `{spec: {securityContext: {appArmorProfile: {type: Localhost}}}}`},
	{name: "pod appArmor RuntimeDefault", part: "template", yaml: `{spec: {securityContext: {appArmorProfile: {type: RuntimeDefault}}}}`},
	{name: "container runAsUser -1", part: "template", yaml: `{spec: {containers: [{name: worker, securityContext: {runAsUser: -1}}]}}`},
	{name: "container runAsUser 1000", part: "template", yaml: `{spec: {containers: [{name: worker, securityContext: {runAsUser: 1000, runAsGroup: 1000, runAsNonRoot: true}}]}}`},
	{name: "container runAsGroup -1", part: "template", yaml: `{spec: {containers: [{name: worker, securityContext: {runAsGroup: -1}}]}}`},
	{name: "privileged without privilege escalation", part: "template", yaml: `{spec: {containers: [{name: worker, securityContext: {privileged: true, allowPrivilegeEscalation: false}}]}}`},
	{name: "privileged", part: "template", yaml: `{spec: {containers: [{name: worker, securityContext: {privileged: true}}]}}`},
	{name: "CAP_SYS_ADMIN without privilege escalation", part: "template", yaml: `{spec: {containers: [{name: worker, securityContext: {allowPrivilegeEscalation: false, capabilities: {add: [CAP_SYS_ADMIN]}}}]}}`},
	{name: "no privilege escalation, capabilities dropped", part: "template", yaml: `{spec: {containers: [{name: worker, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}}]}}`},
	{name: "procMount Unmasked in the host user namespace", part: "template", yaml: `{spec: {containers: [{name: worker, securityContext: {procMount: Unmasked}}]}}`},
	{name: "procMount Default", part: "template", yaml: `{spec: {containers: [{name: worker, securityContext: {procMount: Default}}]}}`},

	// Containers: sidecars must be whole, images present.
	{name: "sidecar with empty image", part: "template", yaml: `{spec: {containers: [{name: shipper, image: ""}]}}`},
	{name: "sidecar", part: "template", yaml: `{spec: {containers: [{name: shipper, image: "fluent/fluent-bit:3"}]}}`},
	{name: "empty image on the worker", part: "template", yaml: `{spec: {containers: [{name: worker, image: ""}]}}`},
	{name: "sidecar with a blank image", part: "template", yaml: `{spec: {containers: [{name: shipper, image: " "}]}}`},
	{name: "worker image with a trailing space", part: "template", yaml: `{spec: {containers: [{name: worker, image: "ghcr.io/dask/dask:2025.1.0 "}]}}`},
	{name: "init container image with a leading tab", part: "template", yaml: `{spec: {initContainers: [{name: setup, image: "\tbusybox"}]}}`},
	{name: "image removed from the worker", part: "template", yaml: `{spec: {containers: [{name: worker, image: null}]}}`},
	{name: "new image on the worker", part: "template", yaml: `{spec: {containers: [{name: worker, image: "ghcr.io/dask/dask:2025.1.0"}]}}`},
	{name: "containers removed", part: "template", yaml: `{spec: {containers: null}}`},
	{name: "spec removed", part: "template", yaml: `{spec: null}`},
	{name: "terminationMessagePolicy unknown", part: "template", yaml: `{spec: {containers: [{name: worker, terminationMessagePolicy: Always}]}}`},
	{name: "terminationMessagePolicy", part: "template", yaml: `{spec: {containers: [{name: worker, terminationMessagePolicy: FallbackToLogsOnError}]}}`},
	{name: "init container probe without restartPolicy Always", part: "template", yaml: `{spec: {initContainers: [{name: setup, image: busybox, readinessProbe: {exec: {command: ["true"]}}}]}}`},
	{name: "sidecar init container probe", part: "template", yaml: `{spec: {initContainers: [{name: setup, image: busybox, restartPolicy: Always, readinessProbe: {exec: {command: ["true"]}}}]}}`},

	// Probes and lifecycle hooks.
	{name: "negative probe period", part: "template", yaml: `{spec: {containers: [{name: worker, livenessProbe: {tcpSocket: {port: 8788}, periodSeconds: -1}}]}}`},
	{name: "probe period", part: "template", yaml: `{spec: {containers: [{name: worker, livenessProbe: {tcpSocket: {port: 8788}, periodSeconds: 30}}]}}`},
	{name: "negative probe threshold", part: "template", yaml: `{spec: {containers: [{name: worker, readinessProbe: {tcpSocket: {port: 8788}, failureThreshold: -1}}]}}`},
	{name: "negative probe timeout", part: "template", yaml: `{spec: {containers: [{name: worker, readinessProbe: {tcpSocket: {port: 8788}, timeoutSeconds: -1}}]}}`},
	{name: "negative probe initial delay", part: "template", yaml: `{spec: {containers: [{name: worker, startupProbe: {tcpSocket: {port: 8788}, initialDelaySeconds: -5}}]}}`},
	{name: "probe without a handler", part: "template", yaml: `{spec: {containers: [{name: worker, livenessProbe: {periodSeconds: 30}}]}}`},
	{name: "probe with two handlers", part: "template", yaml: `{spec: {containers: [{name: worker, livenessProbe: {tcpSocket: {port: 8788}, exec: {command: ["true"]}}}]}}`},
	{name: "liveness successThreshold 2", part: "template", yaml: `{spec: {containers: [{name: worker, livenessProbe: {tcpSocket: {port: 8788}, successThreshold: 2}}]}}`},
	{name: "readiness successThreshold 2", part: "template", yaml: `{spec: {containers: [{name: worker, readinessProbe: {tcpSocket: {port: 8788}, successThreshold: 2}}]}}`},
	{name: "readiness probe grace period", part: "template", yaml: `{spec: {containers: [{name: worker, readinessProbe: {tcpSocket: {port: 8788}, terminationGracePeriodSeconds: 10}}]}}`},
	{name: "liveness probe grace period", part: "template", yaml: `{spec: {containers: [{name: worker, livenessProbe: {tcpSocket: {port: 8788}, terminationGracePeriodSeconds: 10}}]}}`},
	{name: "httpGet port 0", part: "template", yaml: `{spec: {containers: [{name: worker, readinessProbe: {httpGet: {port: 0}}}]}}`},
	{name: "httpGet named port", part: "template", yaml: `{spec: {containers: [{name: worker, readinessProbe: {httpGet: {port: http-dashboard, path: /health}}}]}}`},
	{name: "httpGet unknown scheme", part: "template", yaml: `{spec: {containers: [{name: worker, readinessProbe: {httpGet: {port: 8788, scheme: FTP}}}]}}`},
	{name: "exec probe without command", part: "template", yaml: `{spec: {containers: [{name: worker, livenessProbe: {exec: {}}}]}}`},
	{name: "preStop sleep", part: "template", yaml: `{spec: {containers: [{name: worker, lifecycle: {preStop: {sleep: {seconds: 5}}}}]}}`},
	{name: "preStop sleep beyond the grace period", part: "template", yaml: `{spec: {containers: [{name: worker, lifecycle: {preStop: {sleep: {seconds: 600}}}}]}}`},
	{name: "preStop sleep within the policy's grace period", part: "template", yaml: `{spec: {terminationGracePeriodSeconds: 900, containers: [{name: worker, lifecycle: {preStop: {sleep: {seconds: 600}}}}]}}`},
	{name: "postStart without a handler", part: "template", yaml: `{spec: {containers: [{name: worker, lifecycle: {postStart: {}}}]}}`},
	// Checked where ContainerStopSignals is on (the alpha lane); a server that drops the field
	// (by default) says nothing of it (skipDroppedHere).
	{name: "stopSignal without os", part: "template", yaml: `{spec: {containers: [{name: worker, lifecycle: {stopSignal: SIGUSR1}}]}}`},
	{name: "stopSignal with os", part: "template", yaml: `{spec: {os: {name: linux}, containers: [{name: worker, lifecycle: {stopSignal: SIGUSR1}}]}}`},

	// Environment.
	{name: "env name with =", part: "template", yaml: `{spec: {containers: [{name: worker, env: [{name: "a=b", value: v}]}]}}`},
	{name: "env fieldRef unsupported", part: "template", yaml: `{spec: {containers: [{name: worker, env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.hostname}}}]}]}}`},
	{name: "env fieldRef", part: "template", yaml: `{spec: {containers: [{name: worker, env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}, {name: TEAM, valueFrom: {fieldRef: {fieldPath: "metadata.labels['team']"}}}]}]}}`},
	{name: "env resourceFieldRef unsupported", part: "template", yaml: `{spec: {containers: [{name: worker, env: [{name: GPUS, valueFrom: {resourceFieldRef: {resource: limits.nvidia.com/gpu}}}]}]}}`},
	{name: "env resourceFieldRef", part: "template", yaml: `{spec: {containers: [{name: worker, env: [{name: MEM, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}]}]}}`},
	{name: "env configMapKeyRef without key", part: "template", yaml: `{spec: {containers: [{name: worker, env: [{name: X, valueFrom: {configMapKeyRef: {name: cfg}}}]}]}}`},
	{name: "env configMapKeyRef", part: "template", yaml: `{spec: {containers: [{name: worker, env: [{name: X, valueFrom: {configMapKeyRef: {name: cfg, key: x}}}]}]}}`},
	{name: "envFrom configMapRef without name", part: "template", yaml: `{spec: {containers: [{name: worker, envFrom: [{configMapRef: {}}]}]}}`},
	// Every supported version accepts any printable name but '=' (versions.RelaxedEnvNames).
	{name: "env name starting with a digit", part: "template", yaml: `{spec: {containers: [{name: worker, env: [{name: 1.relaxed-name, value: "1"}]}]}}`},
	{name: "envFrom prefix with =", part: "template", yaml: `{spec: {containers: [{name: worker, envFrom: [{prefix: "P=", configMapRef: {name: cfg}}]}]}}`},

	// Alpha fields (policies/versions: dropped where their gate is off, as by default; the
	// rows check lint against the alpha-gates lane's API server).
	{name: "evictionResponders", part: "template", yaml: `{spec: {evictionResponders: [{name: example.com/responder, priority: 10000}]}}`},
	{name: "evictionResponders without a domain", part: "template", yaml: `{spec: {evictionResponders: [{name: responder, priority: 10000}]}}`},
	{name: "evictionResponders in a reserved domain", part: "template", yaml: `{spec: {evictionResponders: [{name: x.k8s.io/responder, priority: 10000}]}}`},
	{name: "evictionResponders with a reserved priority", part: "template", yaml: `{spec: {evictionResponders: [{name: example.com/responder, priority: 10}]}}`},
	{name: "evictionResponders without a priority", part: "template", yaml: `{spec: {evictionResponders: [{name: example.com/responder}]}}`},
	{name: "evictionResponders twice", part: "template", yaml: `{spec: {evictionResponders: [{name: example.com/r, priority: 10000}, {name: example.com/r, priority: 20000}]}}`},
	{name: "evictionResponders with a schedulingGroup", part: "template", yaml: `{spec: {schedulingGroup: {podGroupName: g}, evictionResponders: [{name: example.com/r, priority: 10000}]}}`},
	{name: "bindMountOptions", part: "template", yaml: `{spec: {volumes: [{name: s, emptyDir: {}}], containers: [{name: worker, volumeMounts: [{name: s, mountPath: /s, bindMountOptions: [noexec, nosuid]}]}]}}`},
	{name: "bindMountOptions unsupported", part: "template", yaml: `{spec: {volumes: [{name: s, emptyDir: {}}], containers: [{name: worker, volumeMounts: [{name: s, mountPath: /s, bindMountOptions: [ro]}]}]}}`},
	{name: "bindMountOptions twice", part: "template", yaml: `{spec: {volumes: [{name: s, emptyDir: {}}], containers: [{name: worker, volumeMounts: [{name: s, mountPath: /s, bindMountOptions: [noexec, noexec]}]}]}}`},

	// Pod spec fields.
	{name: "dnsPolicy None without dnsConfig", part: "template", yaml: `{spec: {dnsPolicy: None}}`},
	{name: "dnsPolicy None without nameservers", part: "template", yaml: `{spec: {dnsPolicy: None, dnsConfig: {searches: [svc.cluster.local]}}}`},
	{name: "dnsPolicy None with dnsConfig", part: "template", yaml: `{spec: {dnsPolicy: None, dnsConfig: {nameservers: [10.0.0.10], searches: [svc.cluster.local], options: [{name: ndots, value: "2"}]}}}`},
	{name: "dnsConfig nameserver not an IP", part: "template", yaml: `{spec: {dnsConfig: {nameservers: [dns.local]}}}`},
	{name: "dnsConfig four nameservers", part: "template", yaml: `{spec: {dnsConfig: {nameservers: [10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4]}}}`},
	{name: "dnsConfig option without name", part: "template", yaml: `{spec: {dnsConfig: {options: [{value: "2"}]}}}`},
	{name: "dnsConfig bad search", part: "template", yaml: `{spec: {dnsConfig: {searches: ["bad search"]}}}`},
	{name: "hostname invalid", part: "template", yaml: `{spec: {hostname: Worker_0}}`},
	{name: "hostname", part: "template", yaml: `{spec: {hostname: worker-0}}`},
	{name: "subdomain invalid", part: "template", yaml: `{spec: {subdomain: dask.workers}}`},
	{name: "subdomain", part: "template", yaml: `{spec: {subdomain: dask-workers}}`},
	{name: "activeDeadlineSeconds 0", part: "template", yaml: `{spec: {activeDeadlineSeconds: 0}}`},
	{name: "activeDeadlineSeconds", part: "template", yaml: `{spec: {activeDeadlineSeconds: 3600}}`},
	{name: "nodeName invalid", part: "template", yaml: `{spec: {nodeName: Node_1}}`},
	{name: "nodeName", part: "template", yaml: `{spec: {nodeName: node-1}}`},
	{name: "nodeName with schedulingGates", part: "template", yaml: `{spec: {nodeName: node-1, schedulingGates: [{name: example.com/quota}]}}`},
	{name: "schedulingGates", part: "template", yaml: `{spec: {schedulingGates: [{name: example.com/quota}]}}`},
	{name: "schedulingGates invalid", part: "template", yaml: `{spec: {schedulingGates: [{name: "not a gate"}]}}`},
	{name: "readinessGates invalid", part: "template", yaml: `{spec: {readinessGates: [{conditionType: "not ready!"}]}}`},
	{name: "readinessGates", part: "template", yaml: `{spec: {readinessGates: [{conditionType: example.com/ready}]}}`},
	{name: "hostAliases bad IP", part: "template", yaml: `{spec: {hostAliases: [{ip: db, hostnames: [db.local]}]}}`},
	{name: "hostAliases", part: "template", yaml: `{spec: {hostAliases: [{ip: 10.0.0.5, hostnames: [db.local]}]}}`},
	{name: "os unknown", part: "template", yaml: `{spec: {os: {name: plan9}}}`},
	{name: "shareProcessNamespace with hostPID", part: "template", yaml: `{spec: {shareProcessNamespace: true, hostPID: true}}`},
	{name: "shareProcessNamespace", part: "template", yaml: `{spec: {shareProcessNamespace: true}}`},
	{name: "hostNetwork with a hostPort off the containerPort", part: "template", yaml: `{spec: {hostNetwork: true, containers: [{name: worker, ports: [{containerPort: 9000, hostPort: 9001}]}]}}`},
	{name: "hostNetwork", part: "template", yaml: `{spec: {hostNetwork: true, dnsPolicy: ClusterFirstWithHostNet}}`},
	{name: "priority integer", part: "template", yaml: `{spec: {priority: 1000}}`},
	{name: "preemptionPolicy without its class", part: "template", yaml: `{spec: {preemptionPolicy: Never}}`},
	{name: "overhead without its RuntimeClass", part: "template", yaml: `{spec: {overhead: {cpu: 100m}}}`},
	{name: "terminationGracePeriodSeconds negative", part: "template", yaml: `{spec: {terminationGracePeriodSeconds: -5}}`,
		differs: "lint rejects: the API server silently rewrites a negative grace period to 1 second (pkg/apis/core/v1/defaults.go), which no policy author means"},
	{name: "toleration operator misspelt", part: "template", yaml: `{spec: {tolerations: [{key: spot, operator: Exits}]}}`},
	{name: "toleration", part: "template", yaml: `{spec: {tolerations: [{key: spot, operator: Exists, effect: NoSchedule}]}}`},
	// Lint accepts: a request is checked against the limit only when the policy sets both, since
	// the object's limit is unknown to lint; the Dask worker's cpu limit is 1, so podpatch leaves
	// the policy out (reference §8).
	{name: "request above the object's limit", part: "template", yaml: `{spec: {containers: [{name: worker, resources: {requests: {cpu: "2"}}}]}}`,
		leftOut: validity.RuleRequestAboveLimit},
	{name: "request with its limit", part: "template", yaml: `{spec: {containers: [{name: worker, resources: {requests: {cpu: "2"}, limits: {cpu: "2"}}}]}}`},

	// Services.
	{name: "externalIPs not an IP", part: "service", yaml: `{spec: {externalIPs: [not-an-ip]}}`},
	{name: "externalIPs loopback", part: "service", yaml: `{spec: {externalIPs: [127.0.0.1]}}`},
	{name: "externalIPs", part: "service", yaml: `{spec: {externalIPs: [203.0.113.10]}}`},
	{name: "ports removed", part: "service", yaml: `{spec: {ports: null}}`},
	{name: "ports removed from a headless Service", part: "service", yaml: `{spec: {clusterIP: None, ports: null}}`},
	{name: "spec removed", part: "service", yaml: `{spec: null}`},
	// Lint accepts: a port without a name merges into the object's port of that number and keeps
	// its name (reference §3, apply golden merge-service-loadbalancer); the scheduler Service has no
	// port 9000, so it would be added unnamed next to named ones: podpatch leaves it out (reference §8).
	{name: "unnamed new port", part: "service", yaml: `{spec: {ports: [{port: 9000}]}}`,
		leftOut: validity.RuleServicePortName},
	{name: "named new port", part: "service", yaml: `{spec: {ports: [{name: metrics, port: 9000, targetPort: 9000}]}}`},
	{name: "named existing port", part: "service", yaml: `{spec: {ports: [{name: tcp-comm, port: 8786, targetPort: 9786}]}}`},
	{name: "unnamed existing port", part: "service", yaml: `{spec: {ports: [{port: 8786, targetPort: 9786}]}}`},
	{name: "port appProtocol invalid", part: "service", yaml: `{spec: {ports: [{name: metrics, port: 9000, appProtocol: "not valid!"}]}}`},
	{name: "nodePort on a ClusterIP Service", part: "service", yaml: `{spec: {ports: [{name: metrics, port: 9000, nodePort: 30080}]}}`},
	{name: "type NodePort", part: "service", yaml: `{spec: {type: NodePort}}`},
	{name: "type LoadBalancer", part: "service", yaml: `{spec: {type: LoadBalancer}}`},
	{name: "LoadBalancer with clusterIP None", part: "service", yaml: `{spec: {type: LoadBalancer, clusterIP: None}}`},
	{name: "ExternalName without externalName", part: "service", yaml: `{spec: {type: ExternalName}}`},
	{name: "ExternalName", part: "service", yaml: `{spec: {type: ExternalName, externalName: dask.example.com}}`},
	{name: "externalTrafficPolicy on a ClusterIP Service", part: "service", yaml: `{spec: {externalTrafficPolicy: Local}}`},
	{name: "externalTrafficPolicy on a NodePort Service", part: "service", yaml: `{spec: {type: NodePort, externalTrafficPolicy: Local}}`},
	{name: "sessionAffinityConfig without ClientIP", part: "service", yaml: `{spec: {sessionAffinityConfig: {clientIP: {timeoutSeconds: 600}}}}`},
	{name: "sessionAffinity ClientIP", part: "service", yaml: `{spec: {sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {timeoutSeconds: 600}}}}`},
	{name: "sessionAffinity timeout 0", part: "service", yaml: `{spec: {sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {timeoutSeconds: 0}}}}`},
	{name: "loadBalancerSourceRanges on a ClusterIP Service", part: "service", yaml: `{spec: {loadBalancerSourceRanges: [10.0.0.0/8]}}`},
	{name: "loadBalancerSourceRanges on a LoadBalancer", part: "service", yaml: `{spec: {type: LoadBalancer, loadBalancerSourceRanges: [10.0.0.0/8]}}`},
	{name: "loadBalancerSourceRanges with bits beyond the prefix", part: "service", yaml: `{spec: {type: LoadBalancer, loadBalancerSourceRanges: [10.0.0.1/8]}}`, rule: &versions.StrictIPs},
	{name: "loadBalancerSourceRanges with leading zeros", part: "service", yaml: `{spec: {type: LoadBalancer, loadBalancerSourceRanges: [010.0.0.0/8]}}`, rule: &versions.StrictIPs},
	{name: "loadBalancerSourceRanges space-padded", part: "service", yaml: `{spec: {type: LoadBalancer, loadBalancerSourceRanges: [' 10.0.0.0/8']}}`},
	{name: "externalIPs with leading zeros", part: "service", yaml: `{spec: {externalIPs: [010.1.2.3]}}`, rule: &versions.StrictIPs},
	{name: "loadBalancerClass on a ClusterIP Service", part: "service", yaml: `{spec: {loadBalancerClass: example.com/internal}}`},
	{name: "allocateLoadBalancerNodePorts on a ClusterIP Service", part: "service", yaml: `{spec: {allocateLoadBalancerNodePorts: false}}`},
	{name: "LoadBalancer class and node ports", part: "service", yaml: `{spec: {type: LoadBalancer, loadBalancerClass: example.com/internal, allocateLoadBalancerNodePorts: false}}`},
	{name: "trafficDistribution unknown", part: "service", yaml: `{spec: {trafficDistribution: Nearby}}`},
	{name: "trafficDistribution", part: "service", yaml: `{spec: {trafficDistribution: PreferClose}}`},
	{name: "ipFamilyPolicy unknown", part: "service", yaml: `{spec: {ipFamilyPolicy: DualStack}}`},
	{name: "internalTrafficPolicy unknown", part: "service", yaml: `{spec: {internalTrafficPolicy: Node}}`},
	{name: "internalTrafficPolicy", part: "service", yaml: `{spec: {internalTrafficPolicy: Local}}`},
	{name: "healthCheckNodePort on a ClusterIP Service", part: "service", yaml: `{spec: {healthCheckNodePort: 30500}}`},
	{name: "clusterIP chosen by the policy", part: "service", yaml: `{spec: {clusterIP: 10.0.0.50}}`,
		differs: "lint rejects: a fixed clusterIP in a policy given to every matching Service collides from the second Service on"},
}

// oracleFixtures are the objects each part is applied to.
var oracleFixtures = map[string]struct {
	file   string
	kind   profiles.Kind
	schema any
}{
	"template": {"dask-operator/worker-pod.yaml", profiles.KindPod, corev1.Pod{}},
	"service":  {"dask-operator/scheduler-service.yaml", profiles.KindService, corev1.Service{}},
}

// TestValidationOracle runs every oracleRow through podpatch's lint and, as a Pod or Service
// patched by it, through a real API server's dry-run create, and requires the two verdicts to
// agree.
func TestValidationOracle(t *testing.T) {
	require.GreaterOrEqual(t, len(oracleRows), 60)
	fixtures := map[string][]byte{}
	for part, f := range oracleFixtures {
		b, err := os.ReadFile(filepath.Join(repoRoot, cluster.FixtureDir, f.file))
		require.NoError(t, err)
		js, err := yaml.YAMLToJSON(b)
		require.NoError(t, err)
		fixtures[part] = js
	}
	kube, _ := testKubeVersion(t)
	names := map[string]bool{}
	for _, row := range oracleRows {
		require.False(t, names[row.part+"/"+row.name], "duplicate row %q", row.name)
		names[row.part+"/"+row.name] = true
		t.Run(row.part+"/"+row.name, func(t *testing.T) {
			fx, ok := oracleFixtures[row.part]
			require.True(t, ok, "part must be template or service")
			var snippet any
			require.NoError(t, yaml.Unmarshal([]byte(row.yaml), &snippet), "row YAML")

			set, lintErr := oracleLint(t, row.part, snippet)
			obj, how, skipped := oracleObject(t, fx.kind, fx.schema, fixtures[row.part], snippet, set)
			skipDroppedHere(t, kube, string(fx.kind), obj.Object)
			require.Equal(t, row.leftOut, skipped, "the rule by which podpatch leaves the policy out")
			apiErr := dryRunCreateObject(t, obj)

			lintOK, apiOK := lintErr == nil, apiErr == nil
			verdict := func(ok bool) string {
				if ok {
					return "accepts"
				}
				return "rejects"
			}
			report := func(msg string) {
				t.Errorf("%s: lint %s, the API server %s (object %s)\npolicy part %s: %s\nlint: %v\nAPI server: %v",
					msg, verdict(lintOK), verdict(apiOK), how, row.part, row.yaml, lintErr, apiErr)
			}
			if row.rule != nil && !row.rule.HoldsAt(kube) {
				if lintOK || !apiOK {
					report(fmt.Sprintf("Kubernetes %s does not apply %s (from 1.%d): lint, stricter, must reject what it accepts", kube, row.rule.Gate, row.rule.From))
				}
				return
			}
			switch {
			case row.differs == "" && lintOK != apiOK:
				report("disagreement")
			case row.differs != "" && lintOK == apiOK:
				report("documented difference no longer holds (" + row.differs + "); update the row")
			}
		})
	}
}

// oracleLint lints a platform policy with the given part and returns it compiled, or its
// problems.
func oracleLint(t *testing.T, part string, snippet any) (*policies.Set, error) {
	t.Helper()
	doc := map[string]any{
		"apiVersion": policies.APIVersion,
		"kind":       policies.DocumentKind,
		"metadata":   map[string]any{"name": "oracle"},
		"spec":       map[string]any{"match": map[string]any{"managers": []string{"dask"}}, part: snippet},
	}
	text, err := yaml.Marshal(doc)
	require.NoError(t, err)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: policies.DefaultPlatformNamespace, Name: "oracle",
			Labels: map[string]string{policies.PolicyLabel: "true"}},
		Data: map[string]string{"oracle.yaml": string(text)},
	}
	ps, probs := policies.ParseConfigMap(cm, policies.DefaultOptions())
	if len(probs) > 0 {
		return nil, probs
	}
	require.Len(t, ps, 1)
	return policies.NewSet(ps), nil
}

// oracleObject returns the fixture patched by the snippet, and how it was made. A policy lint
// accepts is applied by podpatch's engine, exactly as the webhook would. One lint rejects cannot
// be, so a strategic merge patch with the same schema stands in for the engine; for accepted
// policies the stand-in is checked to reach the same verdict as the engine, which keeps it honest
// as long as rows address containers by name.
//
// It also returns the rule by which podpatch left the policy out, if it did: the object is then
// the fixture as it is (reference §8).
func oracleObject(t *testing.T, kind profiles.Kind, schema any, fixture []byte, snippet any, set *policies.Set) (*unstructured.Unstructured, string, string) {
	t.Helper()
	patch, err := json.Marshal(snippet)
	require.NoError(t, err)
	merged, err := strategicpatch.StrategicMergePatch(fixture, patch, schema)
	require.NoError(t, err, "strategic merge of the row into the fixture")
	stand := &unstructured.Unstructured{}
	require.NoError(t, stand.UnmarshalJSON(merged))
	if set == nil {
		return stand, "built by strategic merge patch", ""
	}
	res, err := set.Apply(policies.Input{Kind: kind, Object: fixture, Namespace: "default"})
	require.NoError(t, err)
	if len(res.Skipped) > 0 {
		require.NotNil(t, dryRunCreateObject(t, stand), "podpatch left out a policy whose object the API server accepts: %v", res.Skipped[0])
		obj := &unstructured.Unstructured{}
		require.NoError(t, obj.UnmarshalJSON(res.Object))
		return obj, "left out by podpatch: " + res.Skipped[0].String(), res.Skipped[0].Violation.Rule
	}
	require.True(t, res.Changed, "the policy must match the fixture")
	obj := &unstructured.Unstructured{}
	require.NoError(t, obj.UnmarshalJSON(res.Object))
	engineErr, standErr := dryRunCreateObject(t, obj), dryRunCreateObject(t, stand)
	require.Equal(t, engineErr == nil, standErr == nil,
		"the strategic-merge stand-in and the engine disagree; rewrite the row so both build the same object\nengine: %v\nstand-in: %v", engineErr, standErr)
	return obj, "rendered by podpatch", ""
}

// dryRunCreateObject asks the API server to create obj without storing it and returns its
// refusal, or nil. Errors other than a refusal of the object fail the test.
func dryRunCreateObject(t *testing.T, obj *unstructured.Unstructured) error {
	t.Helper()
	err := k8s.Create(contextBackground(), obj.DeepCopy(), client.DryRunAll)
	var status apierrors.APIStatus
	if err == nil {
		return nil
	}
	if !errors.As(err, &status) || !(apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)) {
		require.NoError(t, err, "dry-run create failed for another reason than the object")
	}
	return err
}
