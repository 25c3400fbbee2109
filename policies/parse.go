package policies

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	jsonstrict "sigs.k8s.io/json"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/internal/yamljson"
	"github.com/podpatch/podpatch/policies/allowlist"
	"github.com/podpatch/podpatch/policies/internal/typecheck"
)

// The parse stage (doc.go): a policy ConfigMap's documents, bounded (decode.go, limits.go),
// decoded strictly into the schema (document.go) and validated (validate_fields.go,
// urlannotations.go, policies/allowlist), each becoming a Policy (types.go) with its match and
// patches compiled (compile.go, compact.go); a ConfigMap is valid whole or not at all.

// Options says how ConfigMaps are scoped and what namespace policies may set.
type Options struct {
	// PlatformNamespace holds the platform-wide policies.
	PlatformNamespace string
	// NamespaceAllowed is what namespace policies may set.
	NamespaceAllowed allowlist.Fields
	// NamespaceDenied are the annotations namespace policies may not set or remove; the zero
	// value is the default list of reference §3.
	NamespaceDenied allowlist.DeniedAnnotations
	// WithResourceVersion appends `@<resourceVersion>` of the ConfigMap to provenance entries.
	WithResourceVersion bool
}

// DefaultOptions returns the options of reference §3.
func DefaultOptions() Options {
	allowed, err := allowlist.ParseFields(allowlist.DefaultFields)
	if err != nil {
		panic(err) // the built-in list is a constant; a failure is a programming error
	}
	return Options{PlatformNamespace: DefaultPlatformNamespace, NamespaceAllowed: allowed}
}

// Problem is one thing wrong with a policy ConfigMap, located so a person can find it.
type Problem struct {
	// Key is the data key, empty for problems of the ConfigMap itself.
	Key string
	// Policy is the document's name, or #N (N from 1) when it has none; empty outside documents.
	Policy string
	Err    *field.Error
}

// String renders `<data key>: <policy>: <field path>: <message>`, with "-" for what is unknown.
func (p Problem) String() string {
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	path := p.Err.Field
	if path == "<nil>" {
		path = ""
	}
	return oneLine(dash(p.Key) + ": " + dash(p.Policy) + ": " + dash(path) + ": " + p.Err.ErrorBody())
}

// oneLine folds a multi-line message (YAML parser errors have several) into one line.
func oneLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return l == "" }), "; ")
}

// Problems is every problem of one ConfigMap.
type Problems []Problem

// Error joins the problems, one per line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// ScopeOf returns the scope of policies in a ConfigMap of the given namespace.
func (o Options) ScopeOf(namespace string) Scope {
	if namespace == o.PlatformNamespace {
		return ScopePlatform
	}
	return ScopeNamespace
}

// ParseConfigMap validates a policy ConfigMap and compiles its documents. It returns either
// every policy or, when anything is wrong, no policy and every problem: a ConfigMap is never
// half-applied.
func ParseConfigMap(cm *corev1.ConfigMap, opts Options) ([]*Policy, Problems) {
	return parseConfigMap(context.Background(), cm, opts)
}

// ErrBudget is wrapped by the error of a ConfigMap whose compile ran past its budget: the
// context of the admission request, or of the policy store's compile (reference §3 "Limits").
var ErrBudget = errors.New("not compiled within its budget")

// ParseConfigMapContext is ParseConfigMap within a budget: once ctx is done the compile stops
// between two steps of bounded work (a document, 1024 YAML nodes) and the ConfigMap is refused:
// no policy, one problem saying so, and an error wrapping ErrBudget and ctx's error. Its work
// is linear in the ConfigMap's bytes (at most MaxConfigMapBytes), and the memory it holds at
// once is linear in one document's text (at most MaxPolicyTextBytes).
func ParseConfigMapContext(ctx context.Context, cm *corev1.ConfigMap, opts Options) ([]*Policy, Problems, error) {
	ps, probs := parseConfigMap(ctx, cm, opts)
	if ctx.Err() != nil {
		err := fmt.Errorf("%w: %w", ErrBudget, context.Cause(ctx)) // the cause can name the budget
		return nil, Problems{{Err: field.Forbidden(field.NewPath("data"), err.Error())}}, err
	}
	return ps, probs, nil
}

func parseConfigMap(ctx context.Context, cm *corev1.ConfigMap, opts Options) ([]*Policy, Problems) {
	probs, tooLarge := configMapProblems(cm)
	if tooLarge {
		return nil, probs // nothing more is read of it
	}
	scope := opts.ScopeOf(cm.Namespace)
	var out []*Policy
	names := map[string]string{} // policy name -> data key that defined it
	documents := 0
	chunks := maxStreamDocuments // documents of every data key, empty ones included
	for _, key := range slices.Sorted(maps.Keys(cm.Data)) {
		keyPath := field.NewPath("data").Key(key)
		if !strings.HasSuffix(key, ".yaml") && !strings.HasSuffix(key, ".yml") {
			probs = append(probs, Problem{Key: key, Err: field.Invalid(keyPath, key, "data keys must end in .yaml or .yml")})
			continue
		}
		docs, err := splitDocuments(ctx, strings.NewReader(cm.Data[key]), policyLimits, maxDocuments-documents+1, &chunks)
		if le := (*yamljson.LimitError)(nil); errors.As(err, &le) && le.Kind == yamljson.LimitJSON {
			de := (*documentError)(nil)
			errors.As(err, &de)
			probs = append(probs, Problem{Key: key, Policy: fmt.Sprintf("#%d", de.Index), Err: field.TooLong(nil, "", maxPolicyBytes)})
			continue
		}
		if err != nil {
			probs = append(probs, Problem{Key: key, Err: field.Invalid(keyPath, field.OmitValueType{}, "not valid YAML: "+err.Error())})
			continue
		}
		if len(docs) == 0 {
			probs = append(probs, Problem{Key: key, Err: field.Required(keyPath, "holds no PodTemplatePatch document")})
		}
		if documents += len(docs); documents > maxDocuments {
			probs = append(probs, Problem{Key: key, Err: field.TooMany(field.NewPath("data"), documents, maxDocuments)})
			break
		}
		for i, d := range docs {
			p, errs := parseDocument(d.JSON, scope, opts)
			label := p.Name
			if label == "" {
				label = fmt.Sprintf("#%d", i+1)
			}
			if p.Name != "" {
				if prev, dup := names[p.Name]; dup {
					errs = append(errs, field.Duplicate(field.NewPath("metadata", "name"),
						p.Name+" (also defined in data key "+prev+")"))
				}
				names[p.Name] = key
			}
			for _, e := range errs {
				probs = append(probs, Problem{Key: key, Policy: label, Err: e})
			}
			if len(errs) == 0 {
				p.Namespace, p.ConfigMap, p.Key, p.Index, p.Scope = cm.Namespace, cm.Name, key, i, scope
				p.hash = sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%d\x00%s", cm.Namespace, cm.Name, key, i, d.JSON))
				p.Ref = cm.Namespace + "/" + cm.Name + "/" + p.Name
				if opts.WithResourceVersion && cm.ResourceVersion != "" {
					p.Ref += "@" + cm.ResourceVersion
				}
				out = append(out, p)
			}
		}
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return out, nil
}

// configMapProblems are the problems of a policy ConfigMap as a whole: its label, binary data,
// no data; tooLarge when it is beyond MaxConfigMapBytes, and nothing more is read of it.
func configMapProblems(cm *corev1.ConfigMap) (probs Problems, tooLarge bool) {
	cmProblem := func(err *field.Error) { probs = append(probs, Problem{Err: err}) }
	if v, ok := cm.Labels[PolicyLabel]; !ok || v != "true" {
		cmProblem(field.Required(field.NewPath("metadata", "labels").Key(PolicyLabel),
			`must be "true": podpatch reads only ConfigMaps carrying this label`))
	}
	for _, k := range slices.Sorted(maps.Keys(cm.BinaryData)) {
		probs = append(probs, Problem{Key: k, Err: field.Forbidden(field.NewPath("binaryData").Key(k),
			"policies must be YAML text in data")})
	}
	if len(cm.Data) == 0 {
		cmProblem(field.Required(field.NewPath("data"), "a policy ConfigMap needs at least one <name>.yaml key"))
	}
	size := 0
	for k, v := range cm.Data {
		size += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		size += len(k) + len(v)
	}
	if size > MaxConfigMapBytes {
		cmProblem(field.TooLong(field.NewPath("data"), "", MaxConfigMapBytes))
		return probs, true
	}
	return probs, false
}

// parseDocument decodes and validates one PodTemplatePatch. The returned policy always carries
// the name (when it has one) so that problems can be attributed.
func parseDocument(js []byte, scope Scope, opts Options) (*Policy, field.ErrorList) {
	p := &Policy{}
	doc, raw, errs := decodeDocument(js, p)
	if raw == nil {
		return p, errs
	}
	errs = append(errs, validateHead(&doc)...)
	spec := doc.Spec
	specPath := field.NewPath("spec")
	p.Mode, p.Priority = spec.Mode, spec.Priority
	if p.Mode == "" {
		p.Mode = ModeMerge
	}
	switch p.Mode {
	case ModeDefault, ModeMerge:
	case ModeEnforce:
		if scope == ScopeNamespace {
			errs = append(errs, field.Forbidden(specPath.Child("mode"), "enforce is for platform policies only"))
		}
	default:
		errs = append(errs, field.NotSupported(specPath.Child("mode"), spec.Mode,
			[]string{string(ModeDefault), string(ModeMerge), string(ModeEnforce)}))
	}
	var mErrs field.ErrorList
	p.match, mErrs = compileMatch(spec.Match, scope, specPath.Child("match"))
	errs = append(errs, mErrs...)
	if spec.Template == nil && spec.Service == nil {
		errs = append(errs, field.Required(specPath.Child("template"), "a policy needs template, service, or both"))
	}
	errs = append(errs, parseParts(p, spec, raw, scope, opts)...)
	errs = append(errs, lintValidity(p, specPath, errs)...) // reference §8, what lint can know offline
	return p, errs
}

// decodeDocument decodes a policy document within its bounds, strictly, finding every bad
// quantity and wrong type at its path first; it names p after the document. raw, the document
// as a tree, is nil when it cannot be decoded at all.
func decodeDocument(js []byte, p *Policy) (Document, map[string]any, field.ErrorList) {
	var doc Document
	if len(js) > maxPolicyBytes {
		return doc, nil, field.ErrorList{field.TooLong(nil, "", maxPolicyBytes)}
	}
	if err := checkJSONDepth(js); err != nil {
		return doc, nil, field.ErrorList{field.Invalid(nil, "", err.Error())}
	}
	raw, err := jsontree.DecodeObject(js)
	if err != nil {
		return doc, nil, field.ErrorList{field.Invalid(nil, "", err.Error())}
	}
	if meta, ok := raw["metadata"].(map[string]any); ok {
		p.Name, _ = meta["name"].(string)
	}
	errs := checkPolicyLimits(raw)
	// A typed decode stops at the first bad quantity or wrong type, without a path: find them
	// all in the raw tree first. The typed decode reads a copy in which bad quantities are zero,
	// values of the wrong type are left out, and null quantities (removals) are left out, so
	// that they are not compared as zero.
	typed := deepCopy(raw)
	errs = append(errs, typecheck.Quantities(typed)...)
	errs = append(errs, typecheck.Types(typed, reflect.TypeFor[Document](), nil)...)
	if js, err = jsontree.Encode(typed); err != nil {
		return doc, nil, append(errs, field.InternalError(nil, err))
	}
	strictErrs, err := jsonstrict.UnmarshalStrict(js, &doc)
	if err != nil {
		return doc, nil, append(errs, decodeError(err))
	}
	for _, se := range strictErrs {
		fe, ok := se.(jsonstrict.FieldError)
		if !ok {
			errs = append(errs, field.Invalid(nil, "", se.Error()))
			continue
		}
		detail := "unknown field: check its spelling and indentation"
		if strings.Contains(se.Error(), "duplicate field") {
			detail = "duplicate field"
		}
		errs = append(errs, field.Forbidden(pathOf(fe.FieldPath()), detail))
	}
	return doc, raw, errs
}

// validateHead checks a document's apiVersion, kind and metadata.
func validateHead(doc *Document) field.ErrorList {
	var errs field.ErrorList
	if doc.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), doc.APIVersion, []string{APIVersion}))
	}
	if doc.Kind != DocumentKind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), doc.Kind, []string{DocumentKind}))
	}
	namePath := field.NewPath("metadata", "name")
	if doc.Metadata.Name == "" {
		errs = append(errs, field.Required(namePath, "every policy needs a name, unique within its ConfigMap"))
	} else {
		for _, msg := range validation.IsDNS1123Label(doc.Metadata.Name) {
			errs = append(errs, field.Invalid(namePath, doc.Metadata.Name, msg))
		}
	}
	return append(errs, metav1validation.ValidateLabels(doc.Metadata.Labels, field.NewPath("metadata", "labels"))...)
}

// parseParts validates a policy's template and service parts as Kubernetes validates their
// fields, for nulls, reserved fields, removals and, for a namespace policy, the allow-lists,
// and compiles them into p.
func parseParts(p *Policy, spec PatchSpec, raw map[string]any, scope Scope, opts Options) field.ErrorList {
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	rawSpec, _ := raw["spec"].(map[string]any)
	part := func(name string, validate func(*field.Path) field.ErrorList) map[string]any {
		fld := specPath.Child(name)
		raw, _ := rawSpec[name].(map[string]any)
		errs = append(errs, validate(fld)...)
		errs = append(errs, checkNulls(raw, p.Mode, fld)...)
		errs = append(errs, checkReserved(raw, name == "service", fld)...)
		errs = append(errs, validateRemovals(name, raw, p.Mode, fld)...)
		if scope == ScopeNamespace {
			errs = append(errs, opts.NamespaceAllowed.Check(raw, name == "service", keyedList, fld)...)
			errs = append(errs, opts.NamespaceDenied.Check(raw, fld)...)
		}
		return raw
	}
	var template, service map[string]any
	if spec.Template != nil {
		template = part("template", func(fld *field.Path) field.ErrorList { return validateTemplatePatch(spec.Template, fld) })
	}
	if spec.Service != nil {
		service = part("service", func(fld *field.Path) field.ErrorList { return validateServicePatch(spec.Service, fld) })
	}
	var err error
	if p.template, err = newPatchPart(template); err != nil {
		errs = append(errs, field.InternalError(specPath.Child("template"), err))
	}
	if p.service, err = newPatchPart(service); err != nil {
		errs = append(errs, field.InternalError(specPath.Child("service"), err))
	}
	return errs
}

// typeErrorField finds the field path in a JSON type error ("… Go struct field Document.spec.priority of type int32").
var typeErrorField = regexp.MustCompile(`Go struct field [A-Za-z0-9_]+\.(\S+) of type (\S+)`)

// decodeError turns a decoding error into a field error at the field it names.
func decodeError(err error) *field.Error {
	msg := err.Error()
	if m := typeErrorField.FindStringSubmatch(msg); m != nil {
		return field.Invalid(pathOf(m[1]), "", "wrong type: want "+m[2])
	}
	return field.Invalid(nil, "", "cannot decode: "+strings.TrimPrefix(msg, "json: "))
}

// pathOf converts a dotted JSON path such as "spec.template.spec.containers[0].imagee" into a
// field.Path. Map keys that contain dots cannot be told apart here; they are rare in such errors.
func pathOf(dotted string) *field.Path {
	var p *field.Path
	for _, part := range strings.Split(dotted, ".") {
		name, idx, hasIdx := strings.Cut(part, "[")
		if p == nil {
			p = field.NewPath(name)
		} else {
			p = p.Child(name)
		}
		for hasIdx {
			var n int
			var rest string
			if _, err := fmt.Sscanf(idx, "%d]", &n); err != nil {
				break
			}
			p = p.Index(n)
			_, rest, hasIdx = strings.Cut(idx, "[")
			idx = rest
		}
	}
	return p
}

// checkNulls allows `null` only as the value of an object member in merge and enforce
// policies, where it removes that key.
func checkNulls(v any, mode Mode, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	var walk func(v any, fld *field.Path, inList bool)
	walk = func(v any, fld *field.Path, inList bool) {
		switch t := v.(type) {
		case nil:
			switch {
			case inList:
				errs = append(errs, field.Invalid(fld, nil, "null is not allowed in a list"))
			case mode == ModeDefault:
				errs = append(errs, field.Invalid(fld, nil, "null removes a field only in merge or enforce mode"))
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				walk(t[k], fld.Child(k), false)
			}
		case []any:
			for i, item := range t {
				walk(item, fld.Index(i), true)
			}
		}
	}
	if m, ok := v.(map[string]any); ok {
		walk(m, fld, false)
	}
	return errs
}

// checkReserved refuses every policy that sets or removes a reserved label (ReservedLabels), in
// the labels of a patch or in a Service's selector, which decides what the Service is.
func checkReserved(raw map[string]any, service bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	reserved := ReservedLabels()
	paths := [][]string{{"metadata", "labels"}}
	if service {
		paths = append(paths, []string{"spec", "selector"})
	}
	for _, at := range paths {
		v, present := raw[at[0]]
		m, _ := v.(map[string]any)
		lv, lpresent := m[at[1]]
		if (present && v == nil) || (lpresent && lv == nil) {
			where := fld.Child(at[0])
			if v != nil {
				where = where.Child(at[1])
			}
			errs = append(errs, field.Forbidden(where, "null would remove reserved labels, by which podpatch and the cluster managers recognise objects"))
			continue
		}
		labels, _ := lv.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			if slices.Contains(reserved, k) {
				errs = append(errs, field.Forbidden(fld.Child(at[0], at[1]).Key(k),
					"reserved: podpatch and the cluster managers recognise objects by this label, so no policy may set or remove it"))
			}
		}
	}
	return errs
}
