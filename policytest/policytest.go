// Package policytest is `podpatch test` (reference §4): declarative tests of policy ConfigMaps
// that platform teams keep in git. A PolicyTest file names policy files or folders, objects as
// the cluster managers make them, the context (namespace and its labels), and per object what
// must hold once patched: the whole object or listed fields, the policies applied and left out,
// the findings by check id, the admission warnings, and — given the cluster's Nodes in the
// context — whether a Pod has a place to run and which Nodes take it. Every object goes through
// policies.Set.Apply, the path the webhook and `render` take, so a passing test is what
// admission does; placement goes through the placement package, as `diff` and `explain` do.
// A suite comes with a pull request and runs in CI, so it reads and writes only in its Root.
package policytest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/checks"
)

// APIVersion and Kind identify a test file.
const (
	APIVersion = "podpatch.io/v1alpha1"
	Kind       = "PolicyTest"
)

// File is a PolicyTest as written.
type File struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   Metadata `yaml:"metadata"`
	Spec       Spec     `yaml:"spec"`
}

// Metadata names the suite.
type Metadata struct {
	Name string `yaml:"name"`
}

// Spec is what a suite tests.
type Spec struct {
	// Policies are policy ConfigMap files or folders, relative to the test file; like every
	// file a suite names, they must lie in the Root.
	Policies []string `yaml:"policies"`
	// PlatformNamespace is the namespace whose policies apply everywhere (default podpatch-system).
	PlatformNamespace string  `yaml:"platformNamespace"`
	Context           Context `yaml:"context"`
	Cases             []Case  `yaml:"cases"`

	policyLines []int
}

// Context is what the webhook learns from the request and the cluster, and what the cluster
// offers Pods.
type Context struct {
	// Namespace is the namespace of objects that have none (default "default").
	Namespace       string            `yaml:"namespace"`
	NamespaceLabels map[string]string `yaml:"namespaceLabels"`
	// Nodes are the cluster's Nodes, and the Karpenter NodePools and GKE ComputeClasses that
	// could create more, for the `unschedulable` check (reference §8) that `diff` and `explain`
	// run against a cluster: given them, every Pod case (and workload pod template) gets that
	// check, and may expect schedulable, fitsNodes, fitsNodePools and unschedulableReason.
	Nodes Nodes `yaml:"nodes"`
	// KubernetesVersion is reserved: version-specific behaviour arrives with the version work,
	// and any value is refused until then.
	KubernetesVersion string `yaml:"kubernetesVersion"`

	nodesLine int
}

// Nodes are what the unschedulable check places Pods on: files or folders of v1 Nodes,
// `karpenter.sh/v1` NodePools and `cloud.google.com/v1` ComputeClasses (one or more documents,
// or a v1 List as `kubectl get nodes -o yaml` writes it), relative to the test file, and such
// objects inline. At most MaxNodes objects and MaxNodeBytes of files.
type Nodes struct {
	Files   []string         `yaml:"files"`
	Objects []map[string]any `yaml:"objects"`

	raw       []json.RawMessage
	fileLines []int
}

// given says whether the context has any Nodes (or NodePools, ComputeClasses) to place Pods on.
func (n *Nodes) given() bool { return len(n.Files)+len(n.Objects) > 0 }

// Case is one object and what must hold once it is patched.
type Case struct {
	Name string `yaml:"name"`
	// File is the object's file (one document), relative to the test file; Object is inline.
	File   string         `yaml:"file"`
	Object map[string]any `yaml:"object"`
	// Namespace and NamespaceLabels override the suite's context for this case.
	Namespace       string            `yaml:"namespace"`
	NamespaceLabels map[string]string `yaml:"namespaceLabels"`
	Expect          Expect            `yaml:"expect"`

	line, fileLine, objectFileLine int
	// in and want are File and Expect.ObjectFile placed in the root.
	in, want found
}

// Expect is what must hold. A list that is absent is not checked; an empty list means none.
type Expect struct {
	// Object is the whole patched object, inline; ObjectFile the file that holds it (--update
	// writes it).
	Object     map[string]any `yaml:"object"`
	ObjectFile string         `yaml:"objectFile"`
	// Fields are single fields: a value, or absent.
	Fields []FieldExpect `yaml:"fields"`
	// Changed says whether any policy changed the object.
	Changed *bool `yaml:"changed"`
	// Denied says whether admission denies the object: a platform enforce policy that matches
	// it cannot be applied (reference §5); leftOut names it and why.
	Denied *bool `yaml:"denied"`
	// Applied are the policies applied (namespace/configmap/name), as podpatch.io/applied lists them.
	Applied []string `yaml:"applied"`
	// LeftOut are the policies left out because they would make the object invalid.
	LeftOut []LeftOut `yaml:"leftOut"`
	// Findings are the reference §8 checks that fire, by id.
	Findings []string `yaml:"findings"`
	// Warnings are admission warnings: each entry a substring of one warning.
	Warnings []string `yaml:"warnings"`
	// Schedulable says whether the patched Pod has a place to run among context.nodes: the
	// unschedulable check of reference §8 does (true) or does not (false) fire. The placement
	// expectations below need context.nodes, and a Pod or a workload's pod template.
	Schedulable *bool `yaml:"schedulable"`
	// FitsNodes are the Nodes of context.nodes that take the patched Pod, exactly (any order);
	// FitsNodePools the Karpenter NodePools of context.nodes that could create one.
	FitsNodes     []string `yaml:"fitsNodes"`
	FitsNodePools []string `yaml:"fitsNodePools"`
	// UnschedulableReason is a part of the unschedulable finding's message (schedulable: false).
	UnschedulableReason string `yaml:"unschedulableReason"`
}

// placementGiven names the placement expectations given (the unschedulable finding among them).
func (e *Expect) placementGiven() []string {
	var out []string
	if e.Schedulable != nil {
		out = append(out, "schedulable")
	}
	if e.FitsNodes != nil {
		out = append(out, "fitsNodes")
	}
	if e.FitsNodePools != nil {
		out = append(out, "fitsNodePools")
	}
	if e.UnschedulableReason != "" {
		out = append(out, "unschedulableReason")
	}
	if slices.Contains(e.Findings, checks.Unschedulable) {
		out = append(out, "findings: "+checks.Unschedulable)
	}
	return out
}

// FieldExpect is one field of the patched object: Path as in findings
// (metadata.labels[cost-center], spec.containers[worker].resources.requests.cpu), then Value,
// or Absent.
type FieldExpect struct {
	Path   string `yaml:"path"`
	Value  any    `yaml:"value"`
	Absent bool   `yaml:"absent"`

	hasValue bool
}

// LeftOut is a policy left out and, optionally, a substring of the reason (the rule id or message).
type LeftOut struct {
	Policy string `yaml:"policy"`
	Reason string `yaml:"reason"`
}

// Error is a wrong test file: exit status 2.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return e.File + ": " + e.Msg
}

// IsTest reports whether a file's first document is a PolicyTest (the discovery rule).
func IsTest(data []byte) bool {
	var head struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
	}
	docs, err := policies.SplitDocuments(bytes.NewReader(data))
	if err != nil || len(docs) == 0 {
		return bytes.Contains(data, []byte(Kind)) // unreadable: an error only if it looks like a test
	}
	if json.Unmarshal(docs[0].JSON, &head) != nil {
		return false
	}
	return head.Kind == Kind
}

// Find lists the test files under paths, which must lie in the root r: files named on the
// command line, and the *.yaml and *.yml files under folders (never .git) whose first document
// has kind PolicyTest. A path, or a file under a folder, that leads out of the root through a
// symbolic link is an error.
func Find(r *Root, paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		name, err := r.place(p)
		if err != nil {
			return nil, err
		}
		if name, err = r.resolve(name, true); err != nil {
			return nil, r.escapes(p, err)
		}
		info, err := r.fs.Stat(name)
		if err != nil {
			return nil, pathError(p, err)
		}
		if !info.IsDir() {
			out = append(out, p)
			continue
		}
		files, err := r.list(p, name, false)
		if err != nil {
			return nil, r.escapes(p, err)
		}
		for _, f := range files {
			budget := int64(policies.MaxFileBytes)
			data, err := r.read(f.show, f.name, &budget)
			if err != nil {
				return nil, err
			}
			if IsTest(data) {
				out = append(out, f.show)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// suite reads a test file of the command line from the root: its name there, and its text.
func (r *Root) suite(path string) (string, []byte, error) {
	name, err := r.place(path)
	if err != nil {
		return "", nil, &Error{File: path, Msg: err.Error()}
	}
	resolved, err := r.resolve(name, true)
	if err != nil {
		var e *escape
		if errors.As(err, &e) {
			return "", nil, &Error{File: path, Msg: fmt.Sprintf("the test file escapes the root %s: %s", r, e.msg)}
		}
		return "", nil, &Error{File: path, Msg: err.Error()}
	}
	budget := int64(policies.MaxFileBytes)
	data, err := r.read(path, resolved, &budget)
	if err != nil {
		return "", nil, &Error{File: path, Msg: strings.TrimPrefix(err.Error(), path+": ")}
	}
	return name, data, nil
}

// load reads and checks a test file through the bounded front end (policies.SplitDocuments:
// size, depth, node count; no aliases, anchors or duplicate keys), then strictly: unknown
// fields, wrong types and cases without expectations are errors with their line. The test file
// must lie in the root r.
func load(r *Root, path string) (*File, error) {
	_, data, err := r.suite(path)
	if err != nil {
		return nil, err
	}
	return parse(path, data)
}

// parse is Load of a test file's text.
func parse(path string, data []byte) (*File, error) {
	docs, err := policies.SplitDocuments(bytes.NewReader(data))
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	if len(docs) != 1 {
		return nil, &Error{File: path, Msg: fmt.Sprintf("holds %d documents; a test file holds one PolicyTest", len(docs))}
	}
	offset := bytes.Count(data[:max(0, bytes.Index(data, docs[0].Text))], []byte("\n"))
	dec := yaml.NewDecoder(bytes.NewReader(docs[0].Text))
	dec.KnownFields(true)
	f := &File{}
	if err := dec.Decode(f); err != nil {
		return nil, yamlError(path, offset, err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(docs[0].Text, &root); err != nil {
		return nil, yamlError(path, offset, err)
	}
	lineOf := func(keys ...any) int { return offset + nodeLine(&root, keys...) }
	e := func(line int, format string, args ...any) error {
		return &Error{File: path, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case f.APIVersion != APIVersion || f.Kind != Kind:
		return nil, e(lineOf("kind"), "want apiVersion %s, kind %s", APIVersion, Kind)
	case f.Metadata.Name == "":
		return nil, e(lineOf("metadata"), "metadata.name is required")
	case len(f.Spec.Policies) == 0:
		return nil, e(lineOf("spec"), "spec.policies is required: the policy files or folders under test")
	case f.Spec.Context.KubernetesVersion != "":
		return nil, e(lineOf("spec", "context", "kubernetesVersion"),
			"kubernetesVersion %q is not supported: this build tests with its own API rules only (version-specific behaviour arrives with the version work)", f.Spec.Context.KubernetesVersion)
	case len(f.Spec.Cases) == 0:
		return nil, e(lineOf("spec"), "spec.cases is empty: nothing to test")
	}
	// Inline objects and values are taken as the front end converted them (the YAML 1.2 core
	// schema render -f reads objects with), not as the struct decoder resolved them.
	var tree struct {
		Spec struct {
			Context struct {
				Nodes struct {
					Objects []json.RawMessage `json:"objects"`
				} `json:"nodes"`
			} `json:"context"`
			Cases []struct {
				Object json.RawMessage `json:"object"`
				Expect struct {
					Object json.RawMessage `json:"object"`
					Fields []struct {
						Value any `json:"value"`
					} `json:"fields"`
				} `json:"expect"`
			} `json:"cases"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(docs[0].JSON, &tree); err != nil || len(tree.Spec.Cases) != len(f.Spec.Cases) {
		return nil, &Error{File: path, Msg: fmt.Sprintf("spec.cases: %v", err)}
	}
	f.Spec.Context.Nodes.raw = tree.Spec.Context.Nodes.Objects
	f.Spec.Context.nodesLine = lineOf("spec", "context", "nodes")
	for i := range f.Spec.Policies {
		f.Spec.policyLines = append(f.Spec.policyLines, lineOf("spec", "policies", i))
	}
	for i := range f.Spec.Context.Nodes.Files {
		f.Spec.Context.Nodes.fileLines = append(f.Spec.Context.Nodes.fileLines, lineOf("spec", "context", "nodes", "files", i))
	}
	for i, tc := range tree.Spec.Cases {
		c := &f.Spec.Cases[i]
		if c.Object != nil {
			c.Object = nil
			if err := json.Unmarshal(tc.Object, &c.Object); err != nil {
				return nil, &Error{File: path, Line: lineOf("spec", "cases", i, "object"), Msg: err.Error()}
			}
		}
		if c.Expect.Object != nil {
			c.Expect.Object = nil
			if err := json.Unmarshal(tc.Expect.Object, &c.Expect.Object); err != nil {
				return nil, &Error{File: path, Line: lineOf("spec", "cases", i, "expect", "object"), Msg: err.Error()}
			}
		}
		for j := range c.Expect.Fields {
			if j < len(tc.Expect.Fields) {
				c.Expect.Fields[j].Value = tc.Expect.Fields[j].Value
			}
		}
	}
	names := map[string]int{}
	for i := range f.Spec.Cases {
		c := &f.Spec.Cases[i]
		c.line = lineOf("spec", "cases", i)
		c.fileLine = lineOf("spec", "cases", i, "file")
		c.objectFileLine = lineOf("spec", "cases", i, "expect", "objectFile")
		switch {
		case c.Name == "":
			return nil, e(c.line, "cases[%d]: name is required", i)
		case names[c.Name] > 0:
			return nil, e(c.line, "case %q: also at line %d", c.Name, names[c.Name])
		case (c.File == "") == (c.Object == nil):
			return nil, e(c.line, "case %q: give the object as file or object, one of them", c.Name)
		case c.Expect.Object != nil && c.Expect.ObjectFile != "":
			return nil, e(lineOf("spec", "cases", i, "expect"), "case %q: expect.object and expect.objectFile both given", c.Name)
		case reflect.DeepEqual(c.Expect, Expect{}):
			return nil, e(c.line, "case %q: no expectation (expect: object, objectFile, fields, changed, applied, leftOut, findings, warnings, schedulable, fitsNodes, fitsNodePools or unschedulableReason)", c.Name)
		}
		if key, msg := checkPlacement(&c.Expect, &f.Spec.Context.Nodes); msg != "" {
			return nil, e(lineOf("spec", "cases", i, "expect", key), "case %q: %s", c.Name, msg)
		}
		names[c.Name] = c.line
		for j := range c.Expect.Fields {
			fe := &c.Expect.Fields[j]
			fe.hasValue = fieldHasValue(&root, i, j)
			line := lineOf("spec", "cases", i, "expect", "fields", j)
			if _, err := parsePath(fe.Path); err != nil {
				return nil, e(line, "case %q: fields[%d]: %v", c.Name, j, err)
			}
			if fe.hasValue == fe.Absent {
				return nil, e(line, "case %q: fields[%d] %s: give value or absent: true, one of them", c.Name, j, fe.Path)
			}
		}
		for j, id := range c.Expect.Findings {
			if !knownCheck(id) {
				return nil, e(lineOf("spec", "cases", i, "expect", "findings", j), "case %q: unknown check id %q", c.Name, id)
			}
		}
	}
	return f, nil
}

// checkPlacement refuses placement expectations that no policy could make hold: without
// context.nodes the unschedulable check has nothing to place a Pod on, which must not pass as
// a silent skip. It returns the expect key at fault and why ("" when none).
func checkPlacement(e *Expect, nodes *Nodes) (key, msg string) {
	given := e.placementGiven()
	switch {
	case len(given) == 0:
		return "", ""
	case !nodes.given():
		key, _, _ = strings.Cut(given[0], ":")
		return key, fmt.Sprintf("expect.%s needs context.nodes: the Nodes (or Karpenter NodePools, GKE ComputeClasses) the Pod is placed on", given[0])
	case e.UnschedulableReason != "" && (e.Schedulable == nil || *e.Schedulable):
		return "unschedulableReason", "expect.unschedulableReason needs schedulable: false"
	case e.Schedulable != nil && !*e.Schedulable && len(e.FitsNodes)+len(e.FitsNodePools) > 0:
		return "schedulable", "expect.schedulable is false, but fitsNodes or fitsNodePools names what takes the Pod"
	case e.Schedulable != nil && e.Findings != nil && *e.Schedulable == slices.Contains(e.Findings, checks.Unschedulable):
		return "findings", fmt.Sprintf("expect.schedulable: %v contradicts expect.findings: the unschedulable finding fires exactly when the Pod is not schedulable", *e.Schedulable)
	}
	return "", ""
}

// Line is where a case starts in its file.
func (c *Case) Line() int { return c.line }

func fieldHasValue(root *yaml.Node, i, j int) bool {
	n := find(root, "spec", "cases", i, "expect", "fields", j)
	if n == nil || n.Kind != yaml.MappingNode {
		return false
	}
	for k := 0; k+1 < len(n.Content); k += 2 {
		if n.Content[k].Value == "value" {
			return true
		}
	}
	return false
}

// knownCheck reports whether id is a reference §8 check.
func knownCheck(id string) bool { return slices.Contains(checks.IDs, id) }

func yamlError(path string, offset int, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
	var line int
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		_, rest, _ := strings.Cut(msg, ":")
		return &Error{File: path, Line: offset + line, Msg: strings.TrimSpace(strings.ReplaceAll(rest, "\n  ", "; "))}
	}
	return &Error{File: path, Msg: msg}
}

// find walks a document node by mapping keys (string) and sequence indexes (int).
func find(root *yaml.Node, keys ...any) *yaml.Node {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, k := range keys {
		var next *yaml.Node
		switch k := k.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						next = n.Content[i+1]
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && k < len(n.Content) {
				next = n.Content[k]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// nodeLine is the line of the deepest node found along keys.
func nodeLine(root *yaml.Node, keys ...any) int {
	for len(keys) > 0 {
		if n := find(root, keys...); n != nil {
			return n.Line
		}
		keys = keys[:len(keys)-1]
	}
	return 1
}
