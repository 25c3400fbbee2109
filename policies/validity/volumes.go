package validity

import (
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/internal/k8sfields"
)

// The per-source rules of a volume (reference §8), as the API server's validateVolumeSource and the
// validate<Source>VolumeSource functions it calls check them: required members at every depth,
// members that exclude or need each other, enumerations and ranges. A policy's partial source
// merged into an object's volume of the same name (or into none) can break any of them, so a
// volume a policy touched is checked with all of them (property findings 18 and the
// volume-source-incomplete class). Format rules of single values (DNS names, signer names) are
// lint's (internal/k8sfields); the check keeps to what a merge can break. Each read is one level
// of jsontree.Expand; a volume costs time linear in its size.

// volumeSource checks a volume a policy touched (or, full, any volume), the index-th of the
// Pod's, against its source's rules.
func (c *checker) volumeSource(index int, name string, v map[string]any) {
	at := item("spec.volumes", name)
	for _, src := range volumeSourceNames { // in a fixed order: the same violations first
		if sm, ok := v[src]; ok && sm != nil {
			if m := mapOf(sm); m != nil {
				volumeRules[src](&volumeCheck{c: c, at: at + "." + src, src: src, index: index}, m)
			}
		}
	}
}

// volumeSourceNames are volumeRules' keys, sorted.
var volumeSourceNames = slices.Sorted(maps.Keys(volumeRules))

// volumeCheck reports the violations of one volume source.
type volumeCheck struct {
	c       *checker
	at, src string
	index   int // of the volume, in the Pod's
}

func (vc *volumeCheck) bad(rest, msg string) { vc.c.add(RuleVolumeSource, vc.at+rest, msg) }

// own is bad for what the values at rest break alone (members that exclude each other, a value
// of the wrong form), whatever the volume they merge into holds (own.go).
func (vc *volumeCheck) own(rest, msg string) {
	vc.c.own(RuleVolumeSource, vc.at+rest, msg, func() string {
		return "spec.volumes[" + strconv.Itoa(vc.index) + "]." + vc.src + rest
	})
}

// required reports each named member that is missing or empty (string, list or object).
func (vc *volumeCheck) required(m map[string]any, at string, keys ...string) {
	for _, k := range keys {
		if empty(m[k]) {
			vc.bad(at+"."+k, "required by a "+vc.src+" volume")
		}
	}
}

// empty reports whether a member is missing, null, "", [] or {}.
func empty(v any) bool {
	switch x := jsontree.Expand(v).(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// inRange reports a numeric member outside [lo, hi].
func (vc *volumeCheck) inRange(m map[string]any, at, k string, lo, hi int64) {
	if x := m[k]; x != nil {
		if n, ok := numOf(x); ok && (n < lo || n > hi) {
			vc.bad(at+"."+k, "must be between "+strconv.FormatInt(lo, 10)+" and "+strconv.FormatInt(hi, 10))
		}
	}
}

// oneOf reports a member set to a value outside the supported ones (unset is allowed).
func (vc *volumeCheck) oneOf(m map[string]any, at, k string, allowed ...string) {
	if x := m[k]; x != nil {
		s := strOf(x)
		for _, a := range allowed {
			if s == a {
				return
			}
		}
		vc.bad(at+"."+k, "unsupported value "+strconv.Quote(s)+": supported values: "+strings.Join(allowed, ", "))
	}
}

// localPath reports a path that is absolute or climbs out with "..".
func (vc *volumeCheck) localPath(p, at string) {
	if p == "" {
		return
	}
	if path.IsAbs(p) || hasDotDot(p) {
		vc.bad(at, "must be a relative path without '..'")
	}
}

// mode reports a file mode outside 0..0777.
func (vc *volumeCheck) mode(m map[string]any, at, k string) { vc.inRange(m, at, k, 0, 0o777) }

// items checks KeyToPath entries (secret, configMap, and their projections).
func (vc *volumeCheck) items(m map[string]any, at string, paths map[string]bool) {
	for i, it := range listOf(m["items"]) {
		im := mapOf(it)
		ia := at + ".items[" + strconv.Itoa(i) + "]"
		vc.required(im, ia, "key", "path")
		vc.localPath(strOf(im["path"]), ia+".path")
		vc.mode(im, ia, "mode")
		vc.uniquePath(paths, strOf(im["path"]))
	}
}

// uniquePath reports a projected path used twice (paths nil: not a projection).
func (vc *volumeCheck) uniquePath(paths map[string]bool, p string) {
	if paths == nil || p == "" {
		return
	}
	if paths[p] {
		vc.bad("", "conflicting duplicate paths: "+p)
	}
	paths[p] = true
}

// downwardItems checks DownwardAPIVolumeFile entries.
func (vc *volumeCheck) downwardItems(m map[string]any, at string, paths map[string]bool) {
	for i, it := range listOf(m["items"]) {
		im := mapOf(it)
		ia := at + ".items[" + strconv.Itoa(i) + "]"
		p := strOf(im["path"])
		vc.required(im, ia, "path")
		vc.localPath(p, ia+".path")
		vc.mode(im, ia, "mode")
		fr, rr := im["fieldRef"] != nil, im["resourceFieldRef"] != nil
		switch {
		case fr && rr:
			vc.bad(ia, "fieldRef and resourceFieldRef can not be specified simultaneously")
		case !fr && !rr:
			vc.bad(ia, "one of fieldRef and resourceFieldRef is required")
		case fr:
			vc.required(mapOf(im["fieldRef"]), ia+".fieldRef", "fieldPath")
		default:
			r := mapOf(im["resourceFieldRef"])
			vc.required(r, ia+".resourceFieldRef", "resource")
			if !resourceFieldDivisor(r) {
				vc.bad(ia+".resourceFieldRef.divisor", "not a divisor supported with "+strOf(r["resource"]))
			}
		}
		vc.uniquePath(paths, p)
	}
}

// secretRefName: a secretRef, when set, names its Secret.
func (vc *volumeCheck) secretRefName(m map[string]any, k string) {
	if r, ok := m[k]; ok && r != nil {
		vc.required(mapOf(r), "."+k, "name")
	}
}

var (
	hostPathTypes = []string{"", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice"}
	accessModes   = []string{"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}
)

// volumeRules are the per-source rules, by the source's member name.
var volumeRules = map[string]func(vc *volumeCheck, m map[string]any){
	"emptyDir": func(vc *volumeCheck, m map[string]any) {
		if q, ok := quantityOf(m["sizeLimit"]); ok && q.Sign() < 0 {
			vc.bad(".sizeLimit", "must not be negative")
		}
		vc.inRange(m, "", "mode", 0, 0o1777)
	},
	"hostPath": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "path")
		if hasDotDot(strOf(m["path"])) {
			vc.bad(".path", "must not contain '..'")
		}
		vc.oneOf(m, "", "type", hostPathTypes...)
	},
	"gitRepo": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "repository")
		vc.localPath(strOf(m["directory"]), ".directory")
	},
	"gcePersistentDisk": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "pdName")
		vc.inRange(m, "", "partition", 0, 255)
	},
	"awsElasticBlockStore": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "volumeID")
		vc.inRange(m, "", "partition", 0, 255)
	},
	"secret": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "secretName")
		vc.mode(m, "", "defaultMode")
		vc.items(m, "", nil)
	},
	"configMap": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "name")
		vc.mode(m, "", "defaultMode")
		vc.items(m, "", nil)
	},
	"nfs": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "server", "path")
		if p := strOf(m["path"]); p != "" && !path.IsAbs(p) {
			vc.bad(".path", "must be an absolute path")
		}
	},
	"iscsi": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "targetPortal", "iqn")
		if iqn := strOf(m["iqn"]); iqn != "" && !strings.HasPrefix(iqn, "iqn") && !strings.HasPrefix(iqn, "eui") && !strings.HasPrefix(iqn, "naa") {
			vc.bad(".iqn", "must be valid format starting with iqn, eui, or naa")
		}
		vc.inRange(m, "", "lun", 0, 255)
		if (boolOf(m["chapAuthDiscovery"]) || boolOf(m["chapAuthSession"])) && m["secretRef"] == nil {
			vc.bad(".secretRef", "required with CHAP authentication")
		}
	},
	"glusterfs":             func(vc *volumeCheck, m map[string]any) { vc.required(m, "", "endpoints", "path") },
	"persistentVolumeClaim": func(vc *volumeCheck, m map[string]any) { vc.required(m, "", "claimName") },
	"rbd":                   func(vc *volumeCheck, m map[string]any) { vc.required(m, "", "monitors", "image") },
	"flexVolume":            func(vc *volumeCheck, m map[string]any) { vc.required(m, "", "driver") },
	"cinder": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "volumeID")
		vc.secretRefName(m, "secretRef")
	},
	"cephfs": func(vc *volumeCheck, m map[string]any) { vc.required(m, "", "monitors") },
	"flocker": func(vc *volumeCheck, m map[string]any) {
		name, uuid := strOf(m["datasetName"]), strOf(m["datasetUUID"])
		switch {
		case name == "" && uuid == "":
			vc.bad("", "one of datasetName and datasetUUID is required")
		case name != "" && uuid != "":
			vc.own("", "datasetName and datasetUUID can not be specified simultaneously")
		}
		if strings.Contains(name, "/") {
			vc.own(".datasetName", "must not contain '/'")
		}
	},
	"downwardAPI": func(vc *volumeCheck, m map[string]any) {
		vc.mode(m, "", "defaultMode")
		vc.downwardItems(m, "", nil)
	},
	"fc": func(vc *volumeCheck, m map[string]any) {
		wwns, wwids := len(listOf(m["targetWWNs"])), len(listOf(m["wwids"]))
		switch {
		case wwns == 0 && wwids == 0:
			vc.bad(".targetWWNs", "must specify either targetWWNs or wwids, but not both")
		case wwns != 0 && wwids != 0:
			vc.own(".targetWWNs", "targetWWNs and wwids can not be specified simultaneously")
		}
		if wwns != 0 {
			if m["lun"] == nil {
				vc.bad(".lun", "lun is required if targetWWNs is specified")
			}
			vc.inRange(m, "", "lun", 0, 255)
		}
	},
	"azureFile": func(vc *volumeCheck, m map[string]any) { vc.required(m, "", "secretName", "shareName") },
	"azureDisk": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "diskName", "diskURI")
		vc.oneOf(m, "", "cachingMode", "None", "ReadOnly", "ReadWrite")
		vc.oneOf(m, "", "kind", "Shared", "Dedicated", "Managed")
		// The kind defaults to Shared, a blob disk with an https:// URI. A URI of neither form
		// is wrong whatever the kind; one of the other form than the default, only when no
		// kind is merged into it.
		if uri := strOf(m["diskURI"]); uri != "" && !k8sfields.AzureDiskURI(strOf(m["kind"]), uri) {
			const msg = "must start with /subscriptions/ for a Managed disk, https:// for the other kinds"
			if m["kind"] != nil || !k8sfields.AzureDiskURI("Managed", uri) && !k8sfields.AzureDiskURI("", uri) {
				vc.own(".diskURI", msg)
			} else {
				vc.bad(".diskURI", msg)
			}
		}
	},
	"vsphereVolume": func(vc *volumeCheck, m map[string]any) { vc.required(m, "", "volumePath") },
	"quobyte": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "registry", "volume")
		if r := strOf(m["registry"]); r != "" && !k8sfields.QuobyteRegistry(r) {
			vc.own(".registry", "must be a host:port pair or multiple pairs separated by commas")
		}
		if len(strOf(m["tenant"])) >= 65 {
			vc.bad(".tenant", "may not exceed a length of 64 characters")
		}
	},
	"photonPersistentDisk": func(vc *volumeCheck, m map[string]any) { vc.required(m, "", "pdID") },
	"portworxVolume":       func(vc *volumeCheck, m map[string]any) { vc.required(m, "", "volumeID") },
	"scaleIO": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "gateway", "system", "volumeName") // secretRef is not validated
	},
	"storageos": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "volumeName")
		vc.secretRefName(m, "secretRef")
	},
	"csi": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "driver")
		vc.secretRefName(m, "nodePublishSecretRef")
	},
	"image": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "reference")
		vc.oneOf(m, "", "pullPolicy", "Always", "Never", "IfNotPresent")
	},
	"ephemeral": func(vc *volumeCheck, m map[string]any) {
		vc.required(m, "", "volumeClaimTemplate")
		if t := mapOf(m["volumeClaimTemplate"]); t != nil {
			claimSpec(vc, mapOf(t["spec"]), ".volumeClaimTemplate.spec")
		}
	},
	"projected": func(vc *volumeCheck, m map[string]any) {
		vc.mode(m, "", "defaultMode")
		paths := map[string]bool{}
		for i, s := range listOf(m["sources"]) {
			projection(vc, mapOf(s), ".sources["+strconv.Itoa(i)+"]", paths)
		}
	},
}

// claimSpec checks an ephemeral volume's claim spec as ValidatePersistentVolumeClaimSpec does.
func claimSpec(vc *volumeCheck, spec map[string]any, at string) {
	modes := listOf(spec["accessModes"])
	if len(modes) == 0 {
		vc.bad(at+".accessModes", "at least 1 access mode is required")
	}
	rwop, other := false, false
	for _, x := range modes {
		switch s := strOf(x); s {
		case "ReadWriteOncePod":
			rwop = true
		case "ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany":
			other = true
		default:
			vc.bad(at+".accessModes", "unsupported value "+strconv.Quote(s)+": supported values: "+strings.Join(accessModes, ", "))
		}
	}
	if rwop && other {
		vc.own(at+".accessModes", "may not use ReadWriteOncePod with other access modes")
	}
	storage := mapOf(mapOf(spec["resources"])["requests"])["storage"]
	if q, ok := quantityOf(storage); !ok || q.Sign() <= 0 {
		vc.bad(at+".resources[storage]", "a positive storage request is required")
	}
	vc.oneOf(spec, at, "volumeMode", "Block", "Filesystem")
	for _, k := range []string{"dataSource", "dataSourceRef"} {
		ref := spec[k]
		if ref == nil {
			continue
		}
		rm := mapOf(ref)
		vc.required(rm, at+"."+k, "name", "kind")
		if strOf(rm["apiGroup"]) == "" && strOf(rm["kind"]) != "PersistentVolumeClaim" {
			vc.bad(at+"."+k, "must be 'PersistentVolumeClaim' when referencing the default apiGroup")
		}
	}
}

// projection checks one source of a projected volume as validateProjectionSources does.
func projection(vc *volumeCheck, s map[string]any, at string, paths map[string]bool) {
	n := 0
	for k, v := range s {
		if v == nil {
			continue
		}
		n++
		m := mapOf(v)
		ka := at + "." + k
		switch k {
		case "secret", "configMap":
			vc.required(m, ka, "name")
			vc.items(m, ka, paths)
		case "downwardAPI":
			vc.downwardItems(m, ka, paths)
		case "serviceAccountToken":
			if e, ok := numOf(m["expirationSeconds"]); ok && (e < 600 || e > 1<<32) {
				vc.bad(ka+".expirationSeconds", "must be between 10 minutes and 2^32 seconds")
			}
			vc.required(m, ka, "path")
			vc.localPath(strOf(m["path"]), ka+".path")
		case "clusterTrustBundle":
			name, signer := m["name"] != nil, m["signerName"] != nil
			switch {
			case name && signer:
				vc.own(ka, "only one of name and signerName may be used")
			case name:
				vc.required(m, ka, "name")
				if m["labelSelector"] != nil {
					vc.bad(ka+".labelSelector", "labelSelector must be unset if name is specified")
				}
			case signer:
				vc.signerName(m, ka)
			default:
				vc.bad(ka, "either name or signerName must be specified")
			}
			vc.required(m, ka, "path")
			vc.localPath(strOf(m["path"]), ka+".path")
			vc.uniquePath(paths, strOf(m["path"]))
		case "podCertificate":
			vc.signerName(m, ka)
			if kt := m["keyType"]; kt != nil && !slices.Contains(k8sfields.PodCertificateKeyTypes, strOf(kt)) {
				vc.own(ka+".keyType", "unsupported value "+strconv.Quote(strOf(kt))+": supported values: "+strings.Join(k8sfields.PodCertificateKeyTypes, ", "))
			}
			if m["keyType"] == nil {
				vc.bad(ka+".keyType", "required: one of "+strings.Join(k8sfields.PodCertificateKeyTypes, ", "))
			}
			if e, ok := numOf(m["maxExpirationSeconds"]); ok && e < 3600 {
				vc.bad(ka+".maxExpirationSeconds", "if provided, maxExpirationSeconds must be >= 3600")
			}
			np := 0
			for _, p := range []string{"credentialBundlePath", "keyPath", "certificateChainPath"} {
				if v := strOf(m[p]); v != "" {
					np++
					vc.localPath(v, ka+"."+p)
					vc.uniquePath(paths, v)
				}
			}
			if np == 0 {
				vc.bad(ka, "specify at least one of credentialBundlePath, keyPath, and certificateChainPath")
			}
		}
	}
	if n > 1 {
		vc.bad(at, "may not specify more than 1 volume type per source")
	}
}

// signerName: required, of the form <domain>/<path> (ValidateSignerName's shape; the format of
// each part is lint's).
func (vc *volumeCheck) signerName(m map[string]any, at string) {
	s := strOf(m["signerName"])
	if s == "" {
		vc.bad(at+".signerName", "required")
		return
	}
	if d, p, ok := strings.Cut(s, "/"); !ok || d == "" || p == "" {
		vc.bad(at+".signerName", "must be of the form <domain>/<path>")
	}
}
