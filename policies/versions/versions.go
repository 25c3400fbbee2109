// Package versions says what each supported Kubernetes version does with the fields a policy
// can set whose fate differs by version or feature gate: kept, dropped (the API
// server clears a field whose gate is off, so a policy setting it has no effect) or refused
// (the API server refuses the object). It is the one place such rules live, each with the
// versions it holds for and the gate that decides it; test/e2e's TestVersionTable checks every
// entry against the API server it runs (the 1.37.2 binary, and under --emulated-version 1.34 to
// 1.36 in the matrix's lanes). It knows nothing of policies: it reads a patch as a JSON tree.
package versions

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The supported minors of Kubernetes 1.x (README, "Supported Kubernetes versions").
const (
	OldestMinor = 33
	NewestMinor = 37
)

// Version is a Kubernetes 1.x version, by its minor.
type Version struct{ Minor int }

// Newest is the version the offline commands assume without --kube-version.
var Newest = Version{NewestMinor}

func (v Version) String() string { return "1." + strconv.Itoa(v.Minor) }

// Supported reports whether podpatch supports the version.
func (v Version) Supported() bool { return v.Minor >= OldestMinor && v.Minor <= NewestMinor }

// Parse reads "1.34", "v1.34.4" or "1.38.0-beta.0"; a version outside the supported ones
// parses, and Supported says so.
func Parse(s string) (Version, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	parts := strings.SplitN(t, ".", 3)
	if len(parts) < 2 || parts[0] != "1" {
		return Version{}, fmt.Errorf("kubernetes version %q: want 1.MINOR (such as 1.34 or v1.34.4)", s)
	}
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i] // "34+" as some distributions report it
	}
	m, err := strconv.Atoi(minor)
	if err != nil || m < 0 || m > 999 {
		return Version{}, fmt.Errorf("kubernetes version %q: want 1.MINOR (such as 1.34 or v1.34.4)", s)
	}
	return Version{m}, nil
}

// Server is the part of the cluster lookups (validity.Lookups) that knows the API server's
// version (internal/references implements it); lookups without it, or not knowing yet, check
// no version's fields.
type Server interface {
	KubeVersion() (Version, bool)
}

// Outcome is what a version's API server does with a field set on an object.
type Outcome int

const (
	// Kept: the field is stored as set.
	Kept Outcome = iota
	// Dropped: the field is cleared (its feature gate is off by default): a policy setting it
	// has no effect.
	Dropped
	// Refused: the object is refused.
	Refused
)

func (o Outcome) String() string {
	switch o {
	case Dropped:
		return "dropped"
	case Refused:
		return "refused"
	}
	return "kept"
}

// Field is one field whose fate differs by version, with its default feature gates.
type Field struct {
	// Kind is "Pod" or "Service".
	Kind string
	// Path is where a policy sets it, in the object: members joined by dots, a list's items as
	// "[]" ("spec.containers[].lifecycle.stopSignal").
	Path string
	// Gate is the feature gate that decides it.
	Gate string
	// KeptFrom is the first minor whose API server keeps it by default; 0: none supported yet.
	KeptFrom int
	// Before is what older API servers do with it: Dropped or Refused.
	Before Outcome
	// RefusedBefore, when set, is the first minor that does not refuse it: older ones (that
	// know neither the field nor its gate) refuse what Before's versions drop.
	RefusedBefore int
	// Values, when set, are the only values the gate decides (a field older versions know,
	// with new values): other values are kept everywhere.
	Values []string
}

// At is what the API server of v does with the field, by default.
func (f Field) At(v Version) Outcome {
	switch {
	case f.KeptFrom != 0 && v.Minor >= f.KeptFrom:
		return Kept
	case v.Minor < f.RefusedBefore:
		return Refused
	}
	return f.Before
}

// Fields are the fields a policy can set whose fate differs by supported version or feature
// gate: every field of the Pod and Service API (k8s.io/api v0.37.2) that the API server drops or
// refuses while its gate is off (pkg/api/pod/util.go dropDisabledFields and the gated
// validation), with the first minor whose default gates keep it. TestVersionTable measures each
// against the API server of every lane of the matrix (real 1.33 and 1.37 binaries, 1.34 to 1.36
// by --emulated-version; README "Supported Kubernetes versions"). Fields kept by every supported
// version's defaults are not listed (hostUsers, supplementalGroupsPolicy, procMount,
// seLinuxChangePolicy, resizePolicy, recursiveReadOnly: their gates are on from 1.33).
// Container fields are those of spec.containers, which policies' "*" and "@main" entries reach.
var Fields = []Field{
	{Kind: "Pod", Path: "spec.resources", Gate: "PodLevelResources", KeptFrom: 34, Before: Dropped},
	{Kind: "Pod", Path: "spec.resourceClaims", Gate: "DynamicResourceAllocation", KeptFrom: 34, Before: Dropped},
	{Kind: "Pod", Path: "spec.containers[].resources.claims", Gate: "DynamicResourceAllocation", KeptFrom: 34, Before: Dropped},
	{Kind: "Pod", Path: "spec.hostnameOverride", Gate: "HostnameOverride", KeptFrom: 35, Before: Dropped},
	{Kind: "Pod", Path: "spec.volumes[].image", Gate: "ImageVolume", KeptFrom: 35, Before: Dropped},
	// A regular container's restartPolicy (and its rules, which need it): 1.33 refuses it
	// ("may not be set for non-init containers"), 1.34 drops it with the gate off.
	{Kind: "Pod", Path: "spec.containers[].restartPolicy", Gate: "ContainerRestartRules", KeptFrom: 35, Before: Dropped, RefusedBefore: 34},
	{Kind: "Pod", Path: "spec.containers[].restartPolicyRules", Gate: "ContainerRestartRules", KeptFrom: 35, Before: Dropped, RefusedBefore: 34},
	{Kind: "Pod", Path: "spec.containers[].env[].valueFrom.fileKeyRef", Gate: "EnvFiles", KeptFrom: 35, Before: Refused},
	{Kind: "Pod", Path: "spec.initContainers[].env[].valueFrom.fileKeyRef", Gate: "EnvFiles", KeptFrom: 35, Before: Refused},
	{Kind: "Pod", Path: "spec.securityContext.seLinuxChangePolicy", Values: []string{"MountOption"}, Gate: "SELinuxMount", KeptFrom: 37, Before: Refused},
	{Kind: "Pod", Path: "spec.volumes[].projected.sources[].clusterTrustBundle", Gate: "ClusterTrustBundleProjection", KeptFrom: 37, Before: Dropped},
	{Kind: "Pod", Path: "spec.volumes[].projected.sources[].podCertificate", Gate: "PodCertificateRequest", KeptFrom: 37, Before: Dropped},
	{Kind: "Pod", Path: "spec.containers[].lifecycle.stopSignal", Gate: "ContainerStopSignals", Before: Dropped},
	{Kind: "Pod", Path: "spec.volumes[].emptyDir.mode", Gate: "EmptyDirVolumeMode", Before: Dropped},
	{Kind: "Pod", Path: "spec.containers[].volumeMounts[].bindMountOptions", Gate: "VolumeBindMountOptions", Before: Dropped},
	{Kind: "Pod", Path: "spec.volumes[].secret.defaultUser", Gate: "AtomicWriteVolumeUserFields", Before: Dropped},
	{Kind: "Pod", Path: "spec.volumes[].configMap.defaultUser", Gate: "AtomicWriteVolumeUserFields", Before: Dropped},
	{Kind: "Pod", Path: "spec.volumes[].downwardAPI.defaultUser", Gate: "AtomicWriteVolumeUserFields", Before: Dropped},
	{Kind: "Pod", Path: "spec.volumes[].projected.defaultUser", Gate: "AtomicWriteVolumeUserFields", Before: Dropped},
	{Kind: "Pod", Path: "spec.volumes[].projected.sources[].serviceAccountToken.user", Gate: "AtomicWriteVolumeUserFields", Before: Dropped},
	{Kind: "Pod", Path: "spec.containers[].livenessProbe.httpGet.protocol", Gate: "H2CContainerProbe", Before: Dropped},
	{Kind: "Pod", Path: "spec.containers[].readinessProbe.httpGet.protocol", Gate: "H2CContainerProbe", Before: Dropped},
	{Kind: "Pod", Path: "spec.containers[].startupProbe.httpGet.protocol", Gate: "H2CContainerProbe", Before: Dropped},
	{Kind: "Pod", Path: "spec.containers[].livenessProbe.grpc.mode", Gate: "GRPCContainerProbeTLS", Before: Dropped},
	{Kind: "Pod", Path: "spec.containers[].readinessProbe.grpc.mode", Gate: "GRPCContainerProbeTLS", Before: Dropped},
	{Kind: "Pod", Path: "spec.containers[].startupProbe.grpc.mode", Gate: "GRPCContainerProbeTLS", Before: Dropped},
	{Kind: "Pod", Path: "spec.schedulingGroup", Gate: "GenericWorkload", Before: Dropped},
	{Kind: "Pod", Path: "spec.evictionResponders", Gate: "EvictionRequestAPI", Before: Dropped},
	{Kind: "Service", Path: "spec.trafficDistribution", Values: []string{"PreferSameZone", "PreferSameNode"}, Gate: "PreferSameTrafficDistribution", KeptFrom: 34, Before: Refused},
}

// pathSegments are each table path split at its dots, once: Find runs on the admission path.
var pathSegments = func() map[string][]string {
	m := make(map[string][]string, len(Fields))
	for _, f := range Fields {
		m[f.Path] = strings.Split(f.Path, ".")
	}
	return m
}()

// segments is f's path split at its dots.
func (f Field) segments() []string {
	if s, ok := pathSegments[f.Path]; ok {
		return s
	}
	return strings.Split(f.Path, ".")
}

// Effect is a field of a patch that a version does not keep.
type Effect struct {
	Field   Field
	Outcome Outcome
	// At is the path of the first place the patch sets it, with list items by index or name.
	At string
}

// String says what the version does, for a person: "has no effect on Kubernetes 1.34: feature
// gate X is off".
func (e Effect) String(v Version) string {
	if e.Outcome == Refused {
		return fmt.Sprintf("makes Kubernetes %s refuse the object: feature gate %s is off there", v, e.Field.Gate)
	}
	return fmt.Sprintf("has no effect on Kubernetes %s: feature gate %s is off there, and the API server drops the field", v, e.Field.Gate)
}

// Affected returns the fields of an object's patch (a policy's template or service part, as a
// JSON tree: {"metadata": …, "spec": …}) that v drops or refuses, in the order of Fields. A
// null (a removal) sets nothing.
func Affected(kind string, patch map[string]any, v Version) []Effect {
	return AffectedOn(kind, patch, At(v), v) // At learns nothing: the table answers
}

// Strip removes every occurrence of the field from a decoded JSON tree, in place (list items
// of every name).
func (f Field) Strip(tree map[string]any) { strip(tree, f.segments()) }

func strip(v any, path []string) {
	m, ok := v.(map[string]any)
	if !ok || len(path) == 0 {
		return
	}
	name, list := strings.CutSuffix(path[0], "[]")
	if len(path) == 1 {
		delete(m, name)
		return
	}
	if !list {
		strip(m[name], path[1:])
		return
	}
	items, _ := m[name].([]any)
	for _, it := range items {
		strip(it, path[1:])
	}
}

// Find reports whether a JSON tree sets a Field's path (non-null), and where first.
func Find(tree map[string]any, path string) (at string, ok bool) {
	return find(tree, strings.Split(path, "."), "", nil)
}

// find is Find for f: with Values, only where the field holds one of them.
func (f Field) find(tree map[string]any) (at string, ok bool) {
	return find(tree, f.segments(), "", f.Values)
}

// Set reports whether a JSON tree (an object as stored) sets the field, with one of its
// Values when it has some.
func (f Field) Set(tree map[string]any) bool {
	_, ok := f.find(tree)
	return ok
}

func find(v any, path []string, at string, values []string) (string, bool) {
	if len(path) == 0 {
		if s, ok := v.(string); ok && values != nil {
			return at, slices.Contains(values, s)
		}
		return at, v != nil && values == nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	seg := path[0]
	list := strings.HasSuffix(seg, "[]")
	name := strings.TrimSuffix(seg, "[]")
	child, ok := m[name]
	if !ok {
		return "", false
	}
	if at != "" {
		at += "."
	}
	at += name
	if !list {
		return find(child, path[1:], at, values)
	}
	items, _ := child.([]any)
	for i, it := range items {
		key := strconv.Itoa(i)
		item, _ := it.(map[string]any)
		if n, ok := item["name"].(string); ok {
			key = n
		}
		if where, ok := find(it, path[1:], at+"["+key+"]", values); ok {
			return where, true
		}
	}
	return "", false
}
