package k8sfields

import (
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The rules of volumes: sources, file modes and paths, projected and downward API files.

// validateVolumesPatch checks volumes; they merge by name, so names are unique. A policy's
// volume replaces the source of the object's volume of that name (reference §3), or is added.
func validateVolumesPatch(volumes []corev1.Volume, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := make(map[string]bool, len(volumes))
	for i := range volumes {
		v := &volumes[i]
		p := fld.Index(i).Child("name")
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(p, "the name of the volume"))
		case names[v.Name]:
			errs = append(errs, field.Duplicate(p, v.Name))
		default:
			errs = append(errs, invalidIf(p, v.Name, validation.IsDNS1123Label(v.Name))...)
		}
		names[v.Name] = true
		errs = append(errs, validateVolumeSourcePatch(&v.VolumeSource, fld.Index(i))...)
	}
	return errs
}

// volumeSources lists the JSON names of the sources a volume sets.
func volumeSources(src *corev1.VolumeSource) []string {
	v := reflect.ValueOf(src).Elem()
	var set []string
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			set = append(set, name)
		}
	}
	return set
}

// fileModeMax is the largest file mode a volume may give its files (0777).
const fileModeMax = 0o777

// validateVolumeSourcePatch checks that a volume has at most one source, and that source. A
// volume without one keeps the object's source, or becomes an emptyDir (Kubernetes' default).
// A source may leave out what names its target (configMap.name, secret.secretName, …): it then
// changes that source of the object's volume of the same name (reference §3), so only what it sets
// is checked.
func validateVolumeSourcePatch(src *corev1.VolumeSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if set := volumeSources(src); len(set) > 1 {
		errs = append(errs, field.Forbidden(fld.Child(set[1]), "may not set more than one volume source; "+set[0]+" is set"))
	}
	if e := src.EmptyDir; e != nil {
		if e.SizeLimit != nil && e.SizeLimit.Sign() < 0 {
			errs = append(errs, field.Invalid(fld.Child("emptyDir", "sizeLimit"), e.SizeLimit.String(), "must be greater than or equal to 0"))
		}
		if e.Mode != nil && (*e.Mode < 0 || *e.Mode > 0o1777) {
			errs = append(errs, field.Invalid(fld.Child("emptyDir", "mode"), *e.Mode, "must be between 0 and 01777 (octal)"))
		}
	}
	if h := src.HostPath; h != nil {
		p := fld.Child("hostPath")
		if slices.Contains(strings.Split(h.Path, "/"), "..") {
			errs = append(errs, field.Invalid(p.Child("path"), h.Path, "must not contain '..'"))
		}
		if h.Type != nil {
			errs = append(errs, notSupported(p.Child("type"), *h.Type, corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate,
				corev1.HostPathDirectory, corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket,
				corev1.HostPathCharDev, corev1.HostPathBlockDev)...)
		}
	}
	if sec := src.Secret; sec != nil {
		p := fld.Child("secret")
		errs = append(errs, validateFileMode(sec.DefaultMode, p.Child("defaultMode"))...)
		errs = append(errs, validateKeyToPaths(sec.Items, p.Child("items"), nil)...)
	}
	if cm := src.ConfigMap; cm != nil {
		p := fld.Child("configMap")
		errs = append(errs, validateFileMode(cm.DefaultMode, p.Child("defaultMode"))...)
		errs = append(errs, validateKeyToPaths(cm.Items, p.Child("items"), nil)...)
	}
	if nfs := src.NFS; nfs != nil && nfs.Path != "" && !path.IsAbs(nfs.Path) {
		errs = append(errs, field.Invalid(fld.Child("nfs", "path"), nfs.Path, "must be an absolute path"))
	}
	if csi := src.CSI; csi != nil && csi.Driver != "" {
		errs = append(errs, invalidIf(fld.Child("csi", "driver"), csi.Driver, validation.IsDNS1123Subdomain(strings.ToLower(csi.Driver)))...)
	}
	if img := src.Image; img != nil {
		errs = append(errs, notSupported(fld.Child("image", "pullPolicy"), img.PullPolicy, "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever)...)
	}
	if d := src.DownwardAPI; d != nil {
		p := fld.Child("downwardAPI")
		errs = append(errs, validateFileMode(d.DefaultMode, p.Child("defaultMode"))...)
		errs = append(errs, validateDownwardAPIFiles(d.Items, p.Child("items"), map[string]bool{})...)
	}
	if pr := src.Projected; pr != nil {
		errs = append(errs, validateProjectedPatch(pr, fld.Child("projected"))...)
	}
	return errs
}

// validateFileMode checks a defaultMode or mode of a volume's files.
func validateFileMode(mode *int32, fld *field.Path) field.ErrorList {
	if mode != nil && (*mode < 0 || *mode > fileModeMax) {
		return field.ErrorList{field.Invalid(fld, *mode, "must be between 0 and 0777 (octal)")}
	}
	return nil
}

// validateKeyToPaths checks the items of a ConfigMap or Secret volume; paths, when given,
// collects the paths of a projected volume, which must not collide.
func validateKeyToPaths(items []corev1.KeyToPath, fld *field.Path, paths map[string]bool) field.ErrorList {
	var errs field.ErrorList
	for i, it := range items {
		p := fld.Index(i)
		if it.Key == "" {
			errs = append(errs, field.Required(p.Child("key"), "the key to project"))
		}
		errs = append(errs, validateFilePath(it.Path, p.Child("path"), paths)...)
		errs = append(errs, validateFileMode(it.Mode, p.Child("mode"))...)
	}
	return errs
}

// validateFilePath checks the path of a file in a volume; paths, when not nil, collects paths
// that must be unique.
func validateFilePath(file string, fld *field.Path, paths map[string]bool) field.ErrorList {
	if file == "" {
		return field.ErrorList{field.Required(fld, "the file's path in the volume")}
	}
	errs := validateRelativePath(file, fld)
	if paths != nil {
		if paths[file] {
			errs = append(errs, field.Duplicate(fld, file))
		}
		paths[file] = true
	}
	return errs
}

// validateDownwardAPIFiles checks the files of a downward API volume or projection.
func validateDownwardAPIFiles(files []corev1.DownwardAPIVolumeFile, fld *field.Path, paths map[string]bool) field.ErrorList {
	var errs field.ErrorList
	for i, f := range files {
		p := fld.Index(i)
		errs = append(errs, validateFilePath(f.Path, p.Child("path"), paths)...)
		errs = append(errs, validateFileMode(f.Mode, p.Child("mode"))...)
		switch {
		case f.FieldRef != nil && f.ResourceFieldRef != nil:
			errs = append(errs, field.Forbidden(p, "may set only one of fieldRef and resourceFieldRef"))
		case f.FieldRef != nil:
			errs = append(errs, validateFieldRef(f.FieldRef, []string{"metadata.name", "metadata.namespace", "metadata.uid",
				"metadata.labels", "metadata.annotations"}, p.Child("fieldRef"))...)
		case f.ResourceFieldRef != nil:
			errs = append(errs, validateResourceFieldRef(f.ResourceFieldRef, true, p.Child("resourceFieldRef"))...)
		default:
			errs = append(errs, field.Required(p, "must set fieldRef or resourceFieldRef"))
		}
	}
	return errs
}

// minTokenExpiration and maxTokenExpiration bound a projected service account token's life.
const (
	minTokenExpiration = 10 * 60
	maxTokenExpiration = 1 << 32
)

// validateProjectedPatch checks a projected volume: one kind per source, unique paths.
func validateProjectedPatch(pr *corev1.ProjectedVolumeSource, fld *field.Path) field.ErrorList {
	errs := validateFileMode(pr.DefaultMode, fld.Child("defaultMode"))
	paths := map[string]bool{}
	for i, src := range pr.Sources {
		p := fld.Child("sources").Index(i)
		var kinds []string
		if s := src.Secret; s != nil {
			kinds = append(kinds, "secret")
			errs = append(errs, validateObjectName(s.Name, "Secret", p.Child("secret", "name"))...)
			errs = append(errs, validateKeyToPaths(s.Items, p.Child("secret", "items"), paths)...)
		}
		if c := src.ConfigMap; c != nil {
			kinds = append(kinds, "configMap")
			errs = append(errs, validateObjectName(c.Name, "ConfigMap", p.Child("configMap", "name"))...)
			errs = append(errs, validateKeyToPaths(c.Items, p.Child("configMap", "items"), paths)...)
		}
		if d := src.DownwardAPI; d != nil {
			kinds = append(kinds, "downwardAPI")
			errs = append(errs, validateDownwardAPIFiles(d.Items, p.Child("downwardAPI", "items"), paths)...)
		}
		if t := src.ServiceAccountToken; t != nil {
			kinds = append(kinds, "serviceAccountToken")
			tp := p.Child("serviceAccountToken")
			if e := t.ExpirationSeconds; e != nil && (*e < minTokenExpiration || *e > maxTokenExpiration) {
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), *e,
					fmt.Sprintf("must be between %d (10 minutes) and %d", minTokenExpiration, int64(maxTokenExpiration))))
			}
			errs = append(errs, validateFilePath(t.Path, tp.Child("path"), paths)...)
		}
		if src.ClusterTrustBundle != nil {
			kinds = append(kinds, "clusterTrustBundle")
		}
		if src.PodCertificate != nil {
			kinds = append(kinds, "podCertificate")
		}
		if len(kinds) > 1 {
			errs = append(errs, field.Forbidden(p.Child(kinds[1]), "may not set more than one kind per source; "+kinds[0]+" is set"))
		}
	}
	return errs
}
