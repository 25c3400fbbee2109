package validity

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/podpatch/podpatch/internal/jsontree"
)

// The rules of reference §8's "valid in, valid out": what the API server's validation and its
// built-in admission plugins refuse in a patched Pod or Service, for the fields a policy can
// touch and the rules that tie them to others. Each rule has a stable id (Violation.Rule, the
// podpatch_policy_skipped_total label); the oracle test pins them against a real API server.
// What a policy must get right by itself is reported with own rather than add: lint reports it
// too (own.go).
// Rules read the object with jsontree.Expand only, one level at a time, so a check is one pass,
// linear in the object.

// maxAnnotationsBytes is the API server's limit on the total size of an object's annotations.
const maxAnnotationsBytes = 256 * 1024

// metadata checks what every object's metadata must satisfy after policies added to it.
func (c *checker) metadata(obj map[string]any) {
	ann := mapOf(mapOf(obj["metadata"])["annotations"])
	size := 0
	for k, v := range ann {
		size += len(k) + len(strOf(v))
	}
	if size > maxAnnotationsBytes {
		c.add(RuleAnnotationsTooLong, "metadata.annotations", "annotations may not exceed "+strconv.Itoa(maxAnnotationsBytes)+" bytes in total")
	}
}

// pod checks a Pod.
func (c *checker) pod(obj map[string]any) {
	spec := mapOf(obj["spec"])
	if spec == nil {
		return
	}
	c.defaults = c.containerDefaults()
	list := listOf(spec["volumes"])
	volumes := make(map[string]any, len(list)) // name → the volume, maybe still raw
	var f [1]string
	for i, v := range list {
		stringMembers(v, volumeMembers, f[:])
		if _, dup := volumes[f[0]]; dup {
			c.add(RuleDuplicateVolume, item("spec.volumes", f[0]), "volume names must be unique")
		}
		volumes[f[0]] = v
		if sources(v) > 1 { // none becomes an emptyDir (defaulting)
			c.add(RuleVolumeSource, item("spec.volumes", f[0]), "a volume has exactly one source")
		}
		if _, raw := v.(json.RawMessage); !raw || c.full { // a raw volume is as given: nothing new
			c.volumeSource(i, f[0], mapOf(v))
		}
	}
	names := map[string]bool{}
	var containers []container
	// Ephemeral containers too: an update adds them (pods/ephemeralcontainers), and the API
	// server validates them as containers (names unique across the three lists, env, mounts,
	// security context; Pod Security reads them).
	for _, list := range []string{"initContainers", "containers", "ephemeralContainers"} {
		hostPorts := map[string]bool{} // the regular containers' together
		for k, it := range listOf(spec[list]) {
			if list == "initContainers" {
				clear(hostPorts) // each init container runs alone
			}
			cm := mapOf(it)
			name := strOf(cm["name"])
			ct := container{list: list, name: name, index: k, m: cm, resources: resourcesOf(cm)}
			if names[name] {
				c.own(RuleDuplicateContainer, ct.at(""), "container names must be unique across containers, initContainers and ephemeralContainers",
					func() string { return ct.pos(".name") })
			}
			names[name] = true
			containers = append(containers, ct)
			c.ports(ct, hostPorts)
			c.envVars(ct, volumes)
			c.mounts(ct, volumes)
			c.resources(ct)
			c.restartRules(ct)
		}
	}
	if c.env.Lookups != nil {
		c.priority(spec)
		c.serviceAccount(spec)
		// LimitRanger does not look at ephemeral containers (they have no resources).
		c.limitRanges(spec, slices.DeleteFunc(slices.Clone(containers), func(ct container) bool { return ct.list == "ephemeralContainers" }))
	}
	c.runtimeClass(spec)
	c.podSecurity(obj, spec, volumes, containers)
	if r := mapOf(spec["resources"]); r != nil {
		c.podResources(r, containers, c.defaults)
	}
	c.claims(spec, containers)
	c.podOS(spec, containers)
	var labels map[string]any // read only when a term has label keys
	podLabels := func() map[string]any {
		if labels == nil {
			labels = mapOf(mapOf(obj["metadata"])["labels"])
		}
		return labels
	}
	c.topologySpread(spec, podLabels)
	c.affinityLabelKeys(spec, podLabels)
}

// sources counts the members of a volume other than its name, scanning it when still raw.
func sources(v any) int {
	n := 0
	if raw, ok := v.(json.RawMessage); ok {
		jsontree.AllMembers(raw, func(name string, value jsontree.Scalar) {
			if name != "name" && value.Kind != jsontree.Null {
				n++
			}
		})
		return n
	}
	for k, x := range mapOf(v) {
		if k != "name" && x != nil {
			n++
		}
	}
	return n
}

// restartRules: a container's restart rules have an action and exit codes with an operator In
// or NotIn and at most 255 values (validateContainerRestartPolicy); a policy's rule merged into
// the object's, or an empty exitCodes, breaks them.
func (c *checker) restartRules(ct container) {
	rules := listOf(ct.m["restartPolicyRules"])
	if len(rules) == 0 {
		return
	}
	if ct.m["restartPolicy"] == nil {
		c.ownBy(RuleRestartPolicyRules, ct.at(".restartPolicy"), "must specify restartPolicy when restart rules are used",
			func() string { return ct.pos(".restartPolicy") }, func() string { return ct.pos(".restartPolicyRules") })
	}
	if len(rules) > 20 {
		c.add(RuleRestartPolicyRules, ct.at(".restartPolicyRules"), "at most 20 rules")
	}
	for i, r := range rules {
		rm := mapOf(r)
		rule := ".restartPolicyRules[" + strconv.Itoa(i) + "]"
		at := ct.at(rule)
		if a := strOf(rm["action"]); a != "Restart" && a != "RestartAllContainers" {
			c.own(RuleRestartPolicyRules, at+".action", "unsupported action "+strconv.Quote(a), func() string { return ct.pos(rule + ".action") })
		}
		ec := mapOf(rm["exitCodes"])
		if ec == nil {
			c.own(RuleRestartPolicyRules, at+".exitCodes", "must be specified", func() string { return ct.pos(rule + ".exitCodes") })
			continue
		}
		if op := strOf(ec["operator"]); op != "In" && op != "NotIn" {
			c.own(RuleRestartPolicyRules, at+".exitCodes.operator", "unsupported value "+strconv.Quote(op)+": supported values: In, NotIn", func() string { return ct.pos(rule + ".exitCodes.operator") })
		}
		if len(listOf(ec["values"])) > 255 {
			c.add(RuleRestartPolicyRules, at+".exitCodes.values", "at most 255 values")
		}
	}
}

// claims: a container's resources.claims name claims of the pod's resourceClaims.
//
// Each of the pod's resourceClaims names exactly one source: a policy's entry merged into the
// object's entry of the same name can leave both resourceClaimName and
// resourceClaimTemplateName.
func (c *checker) claims(spec map[string]any, containers []container) {
	for i, rc := range listOf(spec["resourceClaims"]) {
		if _, raw := rc.(json.RawMessage); raw && !c.full {
			continue // as given
		}
		m := mapOf(rc)
		if strOf(m["name"]) == "" {
			c.own(RuleResourceClaimSource, "spec.resourceClaims", "every resource claim needs a name",
				func() string { return "spec.resourceClaims[" + strconv.Itoa(i) + "].name" })
		}
		if (strOf(m["resourceClaimName"]) != "") == (strOf(m["resourceClaimTemplateName"]) != "") {
			c.own(RuleResourceClaimSource, item("spec.resourceClaims", strOf(m["name"])), "exactly one of resourceClaimName and resourceClaimTemplateName must be set",
				func() string { return "spec.resourceClaims[" + strconv.Itoa(i) + "]" })
		}
	}
	var names map[string]bool
	for _, ct := range containers {
		claims := listOf(mapOf(ct.m["resources"])["claims"])
		if len(claims) == 0 {
			continue
		}
		if names == nil {
			names = map[string]bool{}
			for _, rc := range listOf(spec["resourceClaims"]) {
				names[strOf(mapOf(rc)["name"])] = true
			}
		}
		for _, cl := range claims {
			if name := strOf(mapOf(cl)["name"]); !names[name] {
				c.add(RuleResourceClaimNotFound, ct.at(".resources.claims["+name+"]"), "names no claim of the pod's resourceClaims")
			}
		}
	}
}

// ports: names unique inside a container; host ports unique among the regular containers (and
// inside each init container).
func (c *checker) ports(ct container, hostPorts map[string]bool) {
	ports := listOf(ct.m["ports"])
	var named map[string]bool // the port names seen
	for i, it := range ports {
		name, hostPort := portOf(it)
		if name != "" {
			if named[name] {
				c.own(RuleDuplicatePortName, ct.at(".ports["+name+"]"), "port names must be unique in a container",
					func() string { return ct.pos(".ports[" + strconv.Itoa(i) + "].name") })
			}
			if named == nil {
				named = map[string]bool{}
			}
			named[name] = true
		}
		if hostPort {
			pm := mapOf(it)
			hp, _ := numOf(pm["hostPort"])
			proto := strOf(pm["protocol"])
			if proto == "" {
				proto = "TCP"
			}
			k := strconv.FormatInt(hp, 10) + "/" + proto + "/" + strOf(pm["hostIP"])
			if hostPorts[k] {
				c.add(RuleDuplicateHostPort, ct.at(".ports"), "host port "+k+" is used twice in the pod")
			}
			hostPorts[k] = true
		}
	}
}

// portMembers are the members of a container port that portOf reads.
var portMembers = []string{"name", "hostPort"}

// portOf reads a container port's name and whether it has a host port, scanning it when it is
// still raw rather than decoding it.
func portOf(v any) (name string, hostPort bool) {
	raw, ok := v.(json.RawMessage)
	if !ok {
		pm := mapOf(v)
		hp, _ := numOf(pm["hostPort"])
		return strOf(pm["name"]), hp != 0
	}
	jsontree.Members(raw, portMembers, func(i int, value jsontree.Scalar) {
		switch {
		case i == 0 && value.Kind == jsontree.String:
			name = value.Text
		case i == 1:
			hostPort = value.Kind != jsontree.Null && value.Text != "0"
		}
	})
	return name, hostPort
}

// mounts: every mount names a volume of the Pod, mount paths are unique in a container, and
// subPath and subPathExpr exclude each other.
func (c *checker) mounts(ct container, volumes map[string]any) {
	mounts := listOf(ct.m["volumeMounts"])
	if len(mounts) == 0 && ct.m["volumeDevices"] == nil {
		return
	}
	paths := make(map[string]bool, len(mounts))
	var mounted map[string]bool // volume names, read only when the container has devices
	if ct.m["volumeDevices"] != nil {
		mounted = map[string]bool{}
	}
	var f [4]string
	for _, it := range mounts {
		if c.truncated {
			return
		}
		stringMembers(it, mountMembers, f[:])
		name, mp, sub, expr := f[0], f[1], f[2], f[3]
		if mounted != nil {
			mounted[name] = true
		}
		path := func() string { return ct.at(".volumeMounts[" + mp + "]") }
		if _, ok := volumes[name]; !ok {
			c.add(RuleMountWithoutVolume, path(), "mounts volume "+strconv.Quote(name)+", which the pod does not have")
		}
		if paths[mp] {
			c.add(RuleDuplicateMountPath, path(), "mount paths must be unique in a container")
		}
		paths[mp] = true
		switch {
		case sub != "" && expr != "":
			c.add(RuleMountSubPath, path(), "subPath and subPathExpr are mutually exclusive")
		case sub != "" && (strings.HasPrefix(sub, "/") || hasDotDot(sub)):
			c.add(RuleMountSubPath, path(), "subPath must be a relative path without '..'")
		}
	}
	for _, it := range listOf(ct.m["volumeDevices"]) {
		dm := mapOf(it)
		if mounted[strOf(dm["name"])] {
			c.add(RuleMountWithoutVolume, ct.at(".volumeDevices["+strOf(dm["devicePath"])+"]"), "a volume may be mounted or used as a block device, not both")
		}
		name := strOf(dm["name"])
		v, ok := volumes[name]
		if !ok {
			c.add(RuleMountWithoutVolume, ct.at(".volumeDevices["+strOf(dm["devicePath"])+"]"), "uses volume "+strconv.Quote(name)+", which the pod does not have")
			continue
		}
		if vm := mapOf(v); vm["persistentVolumeClaim"] == nil && vm["ephemeral"] == nil {
			c.add(RuleVolumeSource, ct.at(".volumeDevices["+strOf(dm["devicePath"])+"]"), "a block device needs a persistentVolumeClaim or ephemeral volume")
		}
	}
}

// volumeMembers are the members of a volume read for every volume.
var volumeMembers = []string{"name"}

// envVars: an environment variable has a value or one source, never two (a policy's valueFrom
// merged into the object's of another kind), and a fileKeyRef names its volume, path and key,
// the volume one of the Pod's, an emptyDir (validateFileKeyRefVolumes). Only entries a policy
// touched are read, unless full: raw ones are as given.
func (c *checker) envVars(ct container, volumes map[string]any) {
	if _, raw := ct.m["env"].(json.RawMessage); raw && !c.full {
		return
	}
	for i, it := range listOf(ct.m["env"]) {
		if _, r := it.(json.RawMessage); r && !c.full {
			continue
		}
		e := mapOf(it)
		from := mapOf(e["valueFrom"])
		n := 0
		for _, v := range from {
			if v != nil {
				n++
			}
		}
		if r := mapOf(from["resourceFieldRef"]); r != nil && !resourceFieldDivisor(r) {
			c.add(RuleEnvSource, ct.at(".env["+strOf(e["name"])+"].valueFrom.resourceFieldRef.divisor"), "not a divisor supported with "+strOf(r["resource"]))
		}
		if f := from["fileKeyRef"]; f != nil {
			fm := mapOf(f)
			for _, k := range fileKeyRefMembers {
				if strOf(fm[k]) == "" {
					c.ownBy(RuleEnvSource, ct.at(".env["+strOf(e["name"])+"].valueFrom.fileKeyRef."+k), "must be specified",
						func() string { return ct.pos(".env[" + strconv.Itoa(i) + "].valueFrom.fileKeyRef." + k) },
						func() string { return ct.pos(".env[" + strconv.Itoa(i) + "].valueFrom.fileKeyRef") })
				}
			}
			if name := strOf(fm["volumeName"]); name != "" {
				// The object's volumes may hold it: at admission only.
				at := ct.at(".env[" + strOf(e["name"]) + "].valueFrom.fileKeyRef.volumeName")
				switch v, ok := volumes[name]; {
				case !ok:
					c.add(RuleEnvSource, at, "no volume "+strconv.Quote(name)+" in the Pod")
				case !emptyDirVolume(v):
					c.add(RuleEnvSource, at, "the volume "+strconv.Quote(name)+" must be an emptyDir")
				}
			}
		}
		switch {
		case n > 1:
			c.add(RuleEnvSource, ct.at(".env["+strOf(e["name"])+"].valueFrom"), "may not have more than one source")
		case n == 1 && strOf(e["value"]) != "":
			c.add(RuleEnvSource, ct.at(".env["+strOf(e["name"])+"].valueFrom"), "may not be set with a value")
		}
	}
}

// emptyDirVolume reports whether a volume (maybe still raw) is an emptyDir: its source, or
// none, which defaulting makes one.
func emptyDirVolume(v any) bool {
	ok := true
	each := func(name string, null bool) {
		if name != "name" && name != "emptyDir" && !null {
			ok = false
		}
	}
	if raw, isRaw := v.(json.RawMessage); isRaw {
		jsontree.AllMembers(raw, func(name string, value jsontree.Scalar) { each(name, value.Kind == jsontree.Null) })
		return ok
	}
	for k, x := range mapOf(v) {
		each(k, x == nil)
	}
	return ok
}

// fileKeyRefMembers are the members a fileKeyRef needs (validateFileKeySelector).
var fileKeyRefMembers = []string{"volumeName", "path", "key"}

// mountMembers are the members of a volumeMount the check reads.
var mountMembers = []string{"name", "mountPath", "subPath", "subPathExpr"}

// stringMembers reads the string members named keys of an object into out (empty when absent
// or not a string), scanning it when it is still raw rather than decoding it into a map.
func stringMembers(v any, keys, out []string) {
	clear(out)
	raw, ok := v.(json.RawMessage)
	if !ok {
		m := mapOf(v)
		for i, k := range keys {
			out[i] = strOf(m[k])
		}
		return
	}
	jsontree.Members(raw, keys, func(i int, value jsontree.Scalar) {
		if value.Kind == jsontree.String {
			out[i] = value.Text
		}
	})
}

// topologySpread: a topology spread constraint's matchLabelKeys refine its labelSelector, so
// they need one, and are not keys of it; the API server merges each key the Pod has a label of
// into the selector, so such a key twice is refused too (ValidateMatchLabelKeysInTopologySpread,
// after the merge).
func (c *checker) topologySpread(spec map[string]any, labels func() map[string]any) {
	list := spec["topologySpreadConstraints"]
	if _, raw := list.(json.RawMessage); raw && !c.full {
		return // as given
	}
	for i, it := range listOf(list) {
		if _, raw := it.(json.RawMessage); raw && !c.full {
			continue
		}
		c.labelKeys("spec.topologySpreadConstraints["+strconv.Itoa(i)+"]", false, mapOf(it), labels, true)
	}
}

// affinityLabelKeys: the same for pod (anti-)affinity terms, whose matchLabelKeys and
// mismatchLabelKeys need a labelSelector and share no key; the API server merges them into
// the term's selector for the keys the Pod has a label of, and such a key already in the
// selector is refused (ValidateMatchLabelKeysAndMismatchLabelKeys).
func (c *checker) affinityLabelKeys(spec map[string]any, labels func() map[string]any) {
	aff := spec["affinity"]
	if _, raw := aff.(json.RawMessage); raw && !c.full {
		return // as given
	}
	am := mapOf(aff)
	for _, kind := range []string{"podAffinity", "podAntiAffinity"} {
		k := mapOf(am[kind])
		for _, mode := range []string{"requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"} {
			for i, t := range listOf(k[mode]) {
				tm := mapOf(t)
				if mode[0] == 'p' {
					tm = mapOf(tm["podAffinityTerm"])
				}
				at := "spec.affinity." + kind + "." + mode + "[" + strconv.Itoa(i) + "]"
				c.labelKeys(at, mode[0] == 'p', tm, labels, false)
			}
		}
	}
}

// Where labelKeys found a key the selector already has.
const (
	bySelector = 1 + iota // the selector's own
	byLabel               // merged in from the Pod's label
)

// labelKeys checks the label-key lists of a term at at (a preferred affinity term's in its
// podAffinityTerm): matchLabelKeys, and mismatchLabelKeys unless direct. It reports keys that
// the selector already has once merged: direct (topology spread), a key in the selector is
// refused whether or not the Pod has the label.
func (c *checker) labelKeys(at string, preferred bool, term map[string]any, labels func() map[string]any, direct bool) {
	match := listOf(term["matchLabelKeys"])
	var mismatch []any
	if !direct {
		mismatch = listOf(term["mismatchLabelKeys"])
	}
	if len(match) == 0 && len(mismatch) == 0 {
		return
	}
	place := func(rest string) string {
		if preferred {
			return at + ".podAffinityTerm" + rest
		}
		return at + rest
	}
	if term["labelSelector"] == nil {
		if len(match) > 0 {
			c.own(RulePodFieldConflict, place(".matchLabelKeys"), "may not be set without labelSelector",
				func() string { return place(".matchLabelKeys") })
		}
		if len(mismatch) > 0 {
			c.own(RulePodFieldConflict, place(".mismatchLabelKeys"), "may not be set without labelSelector",
				func() string { return place(".mismatchLabelKeys") })
		}
		return
	}
	var both map[string]bool // the keys of both lists
	if len(match) > 0 && len(mismatch) > 0 {
		both = make(map[string]bool, len(match))
		for _, k := range match {
			both[strOf(k)] = true
		}
		for _, k := range mismatch {
			if key := strOf(k); both[key] {
				c.own(RulePodFieldConflict, place(".matchLabelKeys"), strconv.Quote(key)+" may not be in both matchLabelKeys and mismatchLabelKeys",
					func() string { return place(".matchLabelKeys") })
			}
		}
	}
	sel := mapOf(term["labelSelector"])
	taken := map[string]int8{}
	for k := range mapOf(sel["matchLabels"]) {
		taken[k] = bySelector
	}
	for _, e := range listOf(sel["matchExpressions"]) {
		taken[strOf(mapOf(e)["key"])] = bySelector
	}
	for l, list := range [2][]any{match, mismatch} {
		for j, k := range list {
			key := strOf(k)
			if l == 1 && both[key] {
				continue // reported above
			}
			_, labelled := labels()[key]
			if !labelled && !direct {
				continue // not merged: nothing to collide with
			}
			const msg = " exists in both matchLabelKeys (or mismatchLabelKeys) and labelSelector, once merged"
			switch by := taken[key]; {
			case by == bySelector && direct:
				c.own(RulePodFieldConflict, at+".matchLabelKeys", strconv.Quote(key)+msg,
					func() string { return place(".matchLabelKeys[" + strconv.Itoa(j) + "]") })
			case by != 0:
				c.add(RulePodFieldConflict, at+".matchLabelKeys", strconv.Quote(key)+msg)
			}
			if labelled && taken[key] == 0 {
				taken[key] = byLabel
			}
		}
	}
}

// Check returns the violations of a patched object tree, and false when there were more than
// MaxViolations. Parts of the object still raw are as given, so the rules that read only one
// part skip it. It only reads (jsontree.Expand, never the tree's storing accessors), so it
// neither grows the JSONPatch's walk nor changes the object.
func (e *Env) Check(obj map[string]any) ([]Violation, bool) { return e.run(obj, false) }

// CheckAll is Check on every part of the object, raw or not: for an object as it is.
func (e *Env) CheckAll(obj map[string]any) ([]Violation, bool) { return e.run(obj, true) }

// CheckGiven returns the violations of the object as given, in JSON that is known to be valid.
func (e *Env) CheckGiven(raw []byte) ([]Violation, bool) {
	obj, ok := jsontree.Expand(json.RawMessage(raw)).(map[string]any)
	if !ok {
		return nil, true
	}
	return e.run(obj, true)
}

// run is Check; with full, it also checks parts of the object still raw.
func (e *Env) run(obj map[string]any, full bool) ([]Violation, bool) {
	c := &checker{env: e, full: full}
	c.check(obj)
	return c.out, !c.truncated
}

// check runs every rule of the object's kind.
func (c *checker) check(obj map[string]any) {
	if c.env.Service {
		c.service(obj)
	} else {
		c.pod(obj)
	}
	c.metadata(obj)
}
