package policytest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/allowlist"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/render"
)

// MaxDiffLines bounds the diff a failing case prints.
const MaxDiffLines = 40

// CaseResult is the outcome of one case.
type CaseResult struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	Suite string `json:"suite"`
	Name  string `json:"name"`
	Pass  bool   `json:"pass"`
	// Failures say what did not hold, one entry each (a diff for the whole object).
	Failures []string `json:"failures,omitempty"`
	// Updated is the expected-object file --update rewrote.
	Updated string `json:"updated,omitempty"`
}

// ID is the case's name for --run: suite/case.
func (r CaseResult) ID() string { return r.Suite + "/" + r.Name }

// Options are how a suite runs.
type Options struct {
	// Run, when set, selects the cases whose suite/case name it matches.
	Run *regexp.Regexp
	// Update writes the observed patched objects to the cases' expect.objectFile.
	Update bool
	// Root is the directory the suites read and write in; nil is the current directory.
	Root *Root
}

// suite is a loaded test file with its compiled policies.
type suite struct {
	path string
	// name is the test file's path in root, which the paths it names are relative to.
	name string
	root *Root
	// budget is what is left of MaxSuiteBytes.
	budget int64
	// policies and nodes are the files of spec.policies and of each context.nodes.files entry.
	policies []found
	nodes    [][]found
	f        *File
	set      *policies.Set
	// broken is why the policies do not compile: every case fails with it.
	broken string
	refs   map[string]bool
	// placed is context.nodes, nil when it has none.
	placed *placed
}

// RunFile loads a test file and runs its cases. A wrong test file is an *Error; so is a file it
// names that escapes the root, before anything it names is read.
func RunFile(path string, o Options) ([]CaseResult, error) {
	root := o.Root
	if root == nil {
		var err error
		if root, err = OpenRoot("."); err != nil {
			return nil, err
		}
		defer root.Close()
	}
	name, data, err := root.suite(path)
	if err != nil {
		return nil, err
	}
	f, err := parse(path, data)
	if err != nil {
		return nil, err
	}
	s := &suite{path: path, name: name, root: root, budget: MaxSuiteBytes, f: f, refs: map[string]bool{}}
	if err := s.confine(o.Update); err != nil {
		return nil, err
	}
	if err := s.compile(); err != nil {
		return nil, err
	}
	var out []CaseResult
	for i := range f.Spec.Cases {
		c := &f.Spec.Cases[i]
		r := CaseResult{File: path, Line: c.line, Suite: f.Metadata.Name, Name: c.Name}
		if o.Run != nil && !o.Run.MatchString(r.ID()) {
			continue
		}
		if err := s.run(c, &r, o); err != nil {
			return nil, err
		}
		r.Pass = len(r.Failures) == 0
		out = append(out, r)
	}
	return out, nil
}

// confine places every file the suite names in its root before any is read: one that escapes
// it (absolute, leaving it by "..", through a symbolic link that leads out, or into .git) fails
// the suite, naming the field and the path; with update, so does an expect.objectFile that is
// a symbolic link, which --update would otherwise write through.
func (s *suite) confine(update bool) error {
	sp := &s.f.Spec
	for i, p := range sp.Policies {
		files, err := s.files(fmt.Sprintf("spec.policies[%d]", i), sp.policyLines[i], p)
		if err != nil {
			return err
		}
		s.policies = append(s.policies, files...)
	}
	n := &sp.Context.Nodes
	for i, p := range n.Files {
		files, err := s.files(fmt.Sprintf("context.nodes.files[%d]", i), n.fileLines[i], p)
		if err != nil {
			return err
		}
		s.nodes = append(s.nodes, files)
	}
	for i := range sp.Cases {
		c := &sp.Cases[i]
		var err error
		if c.File != "" {
			if c.in, err = s.file(fmt.Sprintf("case %q: file", c.Name), c.fileLine, c.File, true); err != nil {
				return err
			}
		}
		if c.Expect.ObjectFile == "" {
			continue
		}
		field := fmt.Sprintf("case %q: expect.objectFile", c.Name)
		if c.want, err = s.file(field, c.objectFileLine, c.Expect.ObjectFile, true); err != nil {
			return err
		}
		if update { // the file itself, not where a link in its place leads
			if c.want, err = s.file(field, c.objectFileLine, c.Expect.ObjectFile, false); err != nil {
				return err
			}
			if err := s.root.notALink(c.want.name); err != nil {
				return &Error{File: s.path, Line: c.objectFileLine, Msg: fmt.Sprintf("%s %q %v", field, c.Expect.ObjectFile, err)}
			}
		}
	}
	return nil
}

// file places a path the suite names in field (at line) in the root: as messages name it
// (relative to the working directory, as the test file's path is), and resolved in the root,
// its last symbolic link followed when last is set.
func (s *suite) file(field string, line int, p string, last bool) (found, error) {
	name, err := within(s.name, p)
	if err == nil {
		name, err = s.root.resolve(name, last)
	}
	if err != nil {
		return found{}, s.refuse(field, line, p, err)
	}
	return found{show: filepath.Join(filepath.Dir(s.path), p), name: name}, nil
}

// files is file for a file or folder of manifests: its files, each placed in the root.
func (s *suite) files(field string, line int, p string) ([]found, error) {
	f, err := s.file(field, line, p, true)
	if err != nil {
		return nil, err
	}
	files, err := s.root.list(f.show, f.name, true)
	if err != nil {
		return nil, s.refuse(field, line, p, err)
	}
	return files, nil
}

// refuse is the error for a path a suite names that cannot be placed in the root.
func (s *suite) refuse(field string, line int, p string, err error) error {
	var e *escape
	if errors.As(err, &e) {
		return &Error{File: s.path, Line: line, Msg: fmt.Sprintf("%s %q escapes the suite's root %s: %s", field, p, s.root, e.msg)}
	}
	return &Error{File: s.path, Line: line, Msg: fmt.Sprintf("%s: %v", field, err)}
}

// compile reads the policies and the Nodes.
func (s *suite) compile() error {
	f := s.f
	ns := f.Spec.Context.Namespace
	if ns == "" {
		ns = "default"
	}
	var cms []policies.SourcedConfigMap
	for _, file := range s.policies {
		data, err := s.root.read(file.show, file.name, &s.budget)
		if err != nil {
			return &Error{File: s.path, Msg: "spec.policies: " + err.Error()}
		}
		// The file was read in the root; the manifest reader takes its bytes as standard
		// input ("-"), which its messages and the ConfigMaps then name.
		got, err := policyfiles.ReadConfigMaps([]string{"-"}, ns, bytes.NewReader(data))
		if err != nil {
			return &Error{File: s.path, Msg: "spec.policies: " + file.show + strings.TrimPrefix(err.Error(), "-")}
		}
		for i := range got {
			got[i].File = file.show
		}
		cms = append(cms, got...)
	}
	if len(cms) == 0 {
		return &Error{File: s.path, Msg: "spec.policies: no policy ConfigMaps under " + strings.Join(f.Spec.Policies, ", ")}
	}
	opts, err := engineOptions(f.Spec.PlatformNamespace)
	if err != nil {
		return &Error{File: s.path, Msg: err.Error()}
	}
	set, probs := policies.Compile(cms, opts)
	if len(probs) > 0 {
		s.broken = "the policies do not compile:\n" + policies.ProblemLines(probs)
	}
	s.set = set
	if s.placed, err = s.readNodes(); err != nil {
		return err
	}
	for _, cm := range cms {
		ps, _ := policies.ParseConfigMap(cm.ConfigMap, opts)
		for _, p := range ps {
			s.refs[refOf(p)] = true
		}
	}
	return nil
}

func engineOptions(platform string) (policies.Options, error) {
	if platform == "" {
		platform = policies.DefaultPlatformNamespace
	}
	allowed, err := allowlist.ParseFields(allowlist.DefaultFields)
	if err != nil {
		return policies.Options{}, err
	}
	denied, err := allowlist.ParseDeniedAnnotations(allowlist.DefaultDeniedAnnotations)
	if err != nil {
		return policies.Options{}, err
	}
	return policies.Options{PlatformNamespace: platform, NamespaceAllowed: allowed, NamespaceDenied: denied}, nil
}

func refOf(p *policies.Policy) string {
	ref, _, _ := strings.Cut(p.Ref, "@")
	return ref
}

// object is the case's input as JSON.
func (s *suite) object(c *Case) ([]byte, error) {
	if c.Object != nil {
		return json.Marshal(c.Object)
	}
	data, err := s.root.read(c.in.show, c.in.name, &s.budget)
	if err != nil {
		return nil, s.caseErr(c, "file: %v", err)
	}
	docs, err := policies.SplitDocuments(bytes.NewReader(data))
	if err != nil {
		return nil, s.caseErr(c, "file %s: %v", c.File, err)
	}
	if len(docs) != 1 {
		return nil, s.caseErr(c, "file %s holds %d documents; a case tests one object", c.File, len(docs))
	}
	return docs[0].JSON, nil
}

func (s *suite) caseErr(c *Case, format string, args ...any) error {
	return &Error{File: s.path, Line: c.line, Msg: fmt.Sprintf("case %q: ", c.Name) + fmt.Sprintf(format, args...)}
}

func (s *suite) run(c *Case, r *CaseResult, o Options) error {
	for _, ref := range c.Expect.Applied {
		if !s.refs[ref] {
			return s.caseErr(c, "expect.applied names %s, which is no policy of spec.policies", ref)
		}
	}
	for _, l := range c.Expect.LeftOut {
		if !s.refs[l.Policy] {
			return s.caseErr(c, "expect.leftOut names %s, which is no policy of spec.policies", l.Policy)
		}
	}
	if s.placed != nil {
		if n := unknownNames(c.Expect.FitsNodes, s.placed.nodes); n != "" {
			return s.caseErr(c, "expect.fitsNodes names %s, which is no Node of context.nodes", n)
		}
		if n := unknownNames(c.Expect.FitsNodePools, s.placed.nodePools); n != "" {
			return s.caseErr(c, "expect.fitsNodePools names %s, which is no NodePool of context.nodes", n)
		}
	}
	in, err := s.object(c)
	if err != nil {
		return err
	}
	var head struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(in, &head) // Apply says what is wrong with it
	isService := profiles.Kind(head.Kind) == profiles.KindService
	if e := c.Expect.placementGiven(); isService && len(e) > 0 {
		return s.caseErr(c, "expect.%s: a Service is placed on no Node; placement expectations are for Pods and workloads' pod templates", e[0])
	}
	if s.broken != "" {
		r.Failures = append(r.Failures, s.broken)
		return nil
	}
	ns, labels := s.f.Spec.Context.Namespace, s.f.Spec.Context.NamespaceLabels
	if c.Namespace != "" {
		ns = c.Namespace
	}
	if c.NamespaceLabels != nil {
		labels = c.NamespaceLabels
	}
	if ns == "" {
		ns = "default"
	}
	res, got, err := Apply(s.set, in, ns, labels)
	if err != nil {
		return s.caseErr(c, "object: %v", err)
	}
	if s.placed != nil && !isService {
		fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }
		if err := s.placed.place(c, &res, fail); err != nil {
			return s.caseErr(c, "object: %v", err)
		}
	}
	check(c, res, got, r)
	return s.wholeObject(c, got, r, o)
}

// Apply patches one object as admission would (policies.Set.Apply; a workload's pod template as
// a Pod, as `render` does) and returns the result and the patched object as JSON.
func Apply(set *policies.Set, obj []byte, namespace string, labels map[string]string) (policies.Result, []byte, error) {
	var tree map[string]any
	if err := json.Unmarshal(obj, &tree); err != nil {
		return policies.Result{}, nil, err
	}
	kind, _ := tree["kind"].(string)
	in := policies.Input{Kind: profiles.Kind(kind), Object: obj, Namespace: namespace, NamespaceLabels: labels, Explain: true}
	switch {
	case in.Kind == profiles.KindPod || in.Kind == profiles.KindService:
		res, err := set.Apply(in)
		return res, res.Object, err
	default:
		at, ok := render.TemplatePath(kind)
		if !ok {
			return policies.Result{}, nil, fmt.Errorf("kind %q: podpatch patches Pods, Services and the pod templates of workloads", kind)
		}
		parent := tree
		for _, k := range at[:len(at)-1] {
			if parent, ok = parent[k].(map[string]any); !ok {
				return policies.Result{}, nil, fmt.Errorf("%s has no pod template", kind)
			}
		}
		tmpl, ok := parent[at[len(at)-1]].(map[string]any)
		if !ok {
			return policies.Result{}, nil, fmt.Errorf("%s has no pod template", kind)
		}
		tmeta, _ := tmpl["metadata"].(map[string]any)
		_, hadNS := tmeta["namespace"]
		meta := map[string]any{}
		for k, v := range tmeta {
			meta[k] = v
		}
		if m, _ := tree["metadata"].(map[string]any); m != nil && m["namespace"] != nil {
			meta["namespace"] = m["namespace"]
		}
		pod, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tmpl["spec"]})
		if err != nil {
			return policies.Result{}, nil, err
		}
		in.Kind, in.Object = profiles.KindPod, pod
		res, err := set.Apply(in)
		if err != nil || !res.Changed {
			return res, obj, err
		}
		var p map[string]any
		if err := json.Unmarshal(res.Object, &p); err != nil {
			return res, nil, err
		}
		pm, _ := p["metadata"].(map[string]any)
		if !hadNS {
			delete(pm, "namespace")
		}
		tmpl["metadata"], tmpl["spec"] = pm, p["spec"]
		out, err := json.Marshal(tree)
		return res, out, err
	}
}

// check compares everything but the whole object.
func check(c *Case, res policies.Result, got []byte, r *CaseResult) {
	e := c.Expect
	fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }
	if e.Changed != nil && *e.Changed != res.Changed {
		fail("changed: want %v, got %v", *e.Changed, res.Changed)
	}
	if e.Denied != nil && *e.Denied != res.Denied {
		fail("denied: want %v, got %v (%s)", *e.Denied, res.Denied, res.Denial())
	}
	var tree any
	_ = json.Unmarshal(got, &tree) // got is the engine's own JSON
	for _, fe := range e.Fields {
		p, _ := parsePath(fe.Path) // checked by Load
		v, ok := lookup(tree, p)
		switch {
		case fe.Absent && ok:
			fail("%s: want absent, got %s", fe.Path, compact(v))
		case !fe.Absent && !ok:
			fail("%s: want %s, got absent", fe.Path, compact(fe.Value))
		case !fe.Absent && !sameJSON(fe.Value, v):
			fail("%s: want %s, got %s", fe.Path, compact(fe.Value), compact(v))
		}
	}
	if e.Applied != nil {
		var applied []string
		for _, p := range res.Applied {
			applied = append(applied, refOf(p))
		}
		setDiff("applied", e.Applied, applied, fail)
	}
	if e.LeftOut != nil {
		var want, gotRefs []string
		for _, l := range e.LeftOut {
			want = append(want, l.Policy)
		}
		for _, sk := range res.Skipped {
			gotRefs = append(gotRefs, refOf(sk.Policy))
		}
		setDiff("leftOut", want, gotRefs, fail)
		for _, l := range e.LeftOut {
			for _, sk := range res.Skipped {
				if refOf(sk.Policy) == l.Policy && l.Reason != "" && sk.Violation.Rule != l.Reason && !strings.Contains(sk.Violation.String(), l.Reason) {
					fail("leftOut %s: want reason %q, got %s", l.Policy, l.Reason, sk.Violation)
				}
			}
		}
	}
	if e.Findings != nil {
		var ids []string
		for _, f := range res.Findings {
			ids = append(ids, f.Check)
		}
		setDiff("findings", e.Findings, ids, fail)
	}
	if e.Warnings != nil {
		left := slices.Clone(res.Warnings)
		for _, w := range e.Warnings {
			i := slices.IndexFunc(left, func(s string) bool { return strings.Contains(s, w) })
			if i < 0 {
				fail("warnings: no warning contains %q (got %d: %s)", w, len(res.Warnings), strings.Join(res.Warnings, " | "))
				continue
			}
			left = slices.Delete(left, i, i+1)
		}
		for _, w := range left {
			fail("warnings: unexpected %q", w)
		}
	}
}

func setDiff(what string, want, got []string, fail func(string, ...any)) {
	for _, w := range want {
		if !slices.Contains(got, w) {
			fail("%s: want %s, missing (got [%s])", what, w, strings.Join(got, ", "))
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			fail("%s: unexpected %s", what, g)
		}
	}
}

// wholeObject compares expect.object / expect.objectFile, and with o.Update rewrites the file.
func (s *suite) wholeObject(c *Case, got []byte, r *CaseResult, o Options) error {
	e := c.Expect
	if e.Object == nil && e.ObjectFile == "" {
		return nil
	}
	gotY, err := yaml.JSONToYAML(got)
	if err != nil {
		return err
	}
	var wantJSON []byte
	if e.Object != nil {
		if wantJSON, err = json.Marshal(e.Object); err != nil {
			return err
		}
	} else {
		data, err := s.root.read(c.want.show, c.want.name, &s.budget)
		switch {
		case errors.Is(err, fs.ErrNotExist) && o.Update:
		case err != nil:
			return s.caseErr(c, "expect.objectFile: %v (run podpatch test --update to write it)", err)
		default:
			docs, err := policies.SplitDocuments(bytes.NewReader(data))
			if err != nil || len(docs) != 1 {
				return s.caseErr(c, "expect.objectFile %s: want one YAML document (%v)", e.ObjectFile, err)
			}
			wantJSON = docs[0].JSON
		}
	}
	var want, have any
	_ = json.Unmarshal(got, &have)
	if wantJSON != nil {
		if err := json.Unmarshal(wantJSON, &want); err != nil {
			return err
		}
		if reflect.DeepEqual(want, have) {
			return nil
		}
	}
	if o.Update {
		if e.ObjectFile == "" {
			r.Failures = append(r.Failures, "--update does not rewrite an inline expect.object (comments and layout would be lost): move it to expect.objectFile")
			return nil
		}
		header := fmt.Sprintf("# The patched object of case %q of %s (podpatch test --update).\n", c.Name, filepath.Base(s.path))
		if err := s.root.write(c.want.name, append([]byte(header), gotY...)); err != nil {
			return s.caseErr(c, "--update: %s: %v", c.want.show, err)
		}
		r.Updated = c.want.show
		return nil
	}
	wantY, _ := yaml.JSONToYAML(wantJSON)
	d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(string(wantY)), B: difflib.SplitLines(string(gotY)),
		FromFile: "want", ToFile: "got", Context: 2})
	lines := strings.Split(strings.TrimRight(d, "\n"), "\n")
	if len(lines) > MaxDiffLines {
		lines = append(lines[:MaxDiffLines], fmt.Sprintf("… %d more diff lines", len(lines)-MaxDiffLines))
	}
	r.Failures = append(r.Failures, "object differs:\n"+strings.Join(lines, "\n"))
	return nil
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var x, y any
	_ = json.Unmarshal(ja, &x)
	_ = json.Unmarshal(jb, &y)
	return reflect.DeepEqual(x, y)
}

// parsePath splits a.b[key].c: dots separate keys; [x] is a key that may hold dots, or on a
// list the item named x, or the item at index x.
func parsePath(p string) ([]string, error) {
	if p == "" {
		return nil, fmt.Errorf("path is required")
	}
	var out []string
	for p != "" {
		switch {
		case p[0] == '[':
			end := strings.IndexByte(p, ']')
			if end < 2 {
				return nil, fmt.Errorf("path: unclosed or empty [ in %q", p)
			}
			out, p = append(out, p[1:end]), p[end+1:]
			p = strings.TrimPrefix(p, ".")
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			if end == 0 {
				return nil, fmt.Errorf("path: empty key in %q", p)
			}
			out, p = append(out, p[:end]), p[end:]
			if strings.HasPrefix(p, ".") {
				p = p[1:]
				if p == "" {
					return nil, fmt.Errorf("path ends with a dot")
				}
			}
		}
	}
	return out, nil
}

func lookup(v any, path []string) (any, bool) {
	for _, k := range path {
		switch t := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = t[k]; !ok {
				return nil, false
			}
		case []any:
			found := false
			for _, it := range t {
				if m, ok := it.(map[string]any); ok && m["name"] == k {
					v, found = it, true
					break
				}
			}
			if !found {
				i, err := strconv.Atoi(k)
				if err != nil || i < 0 || i >= len(t) {
					return nil, false
				}
				v = t[i]
			}
		default:
			return nil, false
		}
	}
	return v, true
}
