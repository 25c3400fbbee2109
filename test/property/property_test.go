package property

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/lint"
	"github.com/podpatch/podpatch/policies"
)

// TestValidInValidOut is reference §8's promise as a property: pairs of (random policy set that
// lint accepts, real manager object that the API server accepts); the object patched by
// podpatch's engine is created with server-side dry run next to its unpatched control, and
// a refusal counts only when the control is accepted.
//
// Environment:
//
//	PODPATCH_PROPERTY_PAIRS    how many pairs (default 2000)
//	PODPATCH_PROPERTY_SEED     the seed (default: the time; always printed); pair i uses (seed, i)
//	PODPATCH_PROPERTY_ONLY     run only these comma-separated pair indexes (reproduce one)
//	PODPATCH_PROPERTY_WORKERS  concurrent pairs (default 4)
//	PODPATCH_PROPERTY_REPORT   a file to write the report to (markdown), besides the test log
//
// Every refusal fails the test, with the report (classes, shrunk reproducers) in the log.
// `make test` runs it with a seed derived from the commit (Makefile PROPERTY_SEED), so a CI
// failure reproduces from the commit alone.
func TestValidInValidOut(t *testing.T) {
	needCluster(t)
	pairs := envInt(t, "PODPATCH_PROPERTY_PAIRS", 2000)
	workers := envInt(t, "PODPATCH_PROPERTY_WORKERS", 4)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PODPATCH_PROPERTY_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("PODPATCH_PROPERTY_SEED: %v", err)
		}
	}
	t.Logf("PODPATCH_PROPERTY_SEED=%d PODPATCH_PROPERTY_PAIRS=%d", seed, pairs)
	fmt.Fprintf(os.Stderr, "property: PODPATCH_PROPERTY_SEED=%d PODPATCH_PROPERTY_PAIRS=%d\n", seed, pairs)

	indexes := make([]int, 0, pairs)
	if only := os.Getenv("PODPATCH_PROPERTY_ONLY"); only != "" {
		for _, s := range strings.Split(only, ",") {
			i, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				t.Fatalf("PODPATCH_PROPERTY_ONLY: %v", err)
			}
			indexes = append(indexes, i)
		}
	} else {
		for i := range pairs {
			indexes = append(indexes, i)
		}
	}

	start := time.Now()
	r := newRunner()
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r.run(t, seed, i)
			}
		}()
	}
	for _, i := range indexes {
		next <- i
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		return
	}
	r.shrinkAll(t, workers)
	report := r.report(seed, time.Since(start))
	t.Log("\n" + report)
	if path := os.Getenv("PODPATCH_PROPERTY_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Errorf("write report: %v", err)
		}
	}
	if r.stats.tested < len(indexes)/4 {
		t.Errorf("only %d of %d pairs were tested (the rest discarded or unmatched): the generator no longer makes useful policies", r.stats.tested, len(indexes))
	}
	if r.stats.controlRefused > 0 {
		t.Errorf("%d control objects were refused: the fixtures or the test cluster are broken (%s)", r.stats.controlRefused, r.controlMsg)
	}
	if len(r.classes) > 0 {
		t.Errorf("%d patched objects refused by the API server, in %d classes (see the report above)", r.stats.refused, len(r.classes))
	}
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, s)
	}
	return n
}

// pair is one generated case.
type pair struct {
	index int
	fx    *fixture
	ns    string
	// docs are the accepted documents, each with its scope.
	docs []scopedDoc
}

type scopedDoc struct {
	scope policies.Scope
	doc   map[string]any
}

// outcome is what happened to one pair.
type outcome struct {
	discarded int
	unmatched bool
	// lintRefused says lint refuses the set as a whole (its selection can oscillate).
	lintRefused bool
	// skipped are the policies the engine left out to keep the object valid (reference §8).
	skipped   []policies.Skipped
	engineErr error
	patched   []byte
	jsonPatch []byte
	refusal   error
}

// stats are the counts of the run.
type stats struct {
	pairs, tested, accepted, refused, unmatched, engineErrors, controlRefused, lintRefused int
	discardedDocs, acceptedDocs                                                            int
	byScopeMode                                                                            map[string]int
}

// class is one kind of refusal, with its first (then shrunk) example.
type class struct {
	key     string
	count   int
	example pair
	message string
	shrunk  *pair
	patched []byte
	jsonPat []byte
}

type runner struct {
	mu         sync.Mutex
	stats      stats
	classes    map[string]*class
	coverage   map[string]int
	controls   map[string]error
	controlMsg string
}

func newRunner() *runner {
	return &runner{classes: map[string]*class{}, coverage: map[string]int{}, controls: map[string]error{},
		stats: stats{byScopeMode: map[string]int{}}}
}

// generate builds pair i of seed: a fixture, a namespace and 1-3 documents that lint accepts
// (each document is tried up to 30 times; the rejected attempts are counted).
func generate(seed uint64, i int, coverage map[string]int) (pair, int) {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	p := pair{index: i, fx: fixtures[r.IntN(len(fixtures))], ns: testNamespaces[r.IntN(len(testNamespaces))]}
	discarded := 0
	n := 1 + r.IntN(3)
	for d := range n {
		scope := policies.ScopePlatform
		if r.Float64() < 0.3 {
			scope = policies.ScopeNamespace
		}
		for range 30 {
			g := newGen(r, p.fx, scope, coverage)
			doc := g.document(docName(d))
			if _, err := parseDocs(p.ns, []scopedDoc{{scope, doc}}); err != nil {
				discarded++
				continue
			}
			p.docs = append(p.docs, scopedDoc{scope, doc})
			break
		}
	}
	return p, discarded
}

// docMode is a document's mode, merge when it gives none.
func docMode(d scopedDoc) string {
	if mode, _ := d.doc["spec"].(map[string]any)["mode"].(string); mode != "" {
		return mode
	}
	return string(policies.ModeMerge)
}

// configMaps returns the policy ConfigMaps of a pair: the platform's and the namespace's.
func configMaps(ns string, docs []scopedDoc) ([]*corev1.ConfigMap, error) {
	var out []*corev1.ConfigMap
	for _, scope := range []policies.Scope{policies.ScopePlatform, policies.ScopeNamespace} {
		var texts []string
		for _, d := range docs {
			if d.scope != scope {
				continue
			}
			b, err := yaml.Marshal(d.doc)
			if err != nil {
				return nil, fmt.Errorf("policy %v: %w", d.doc["metadata"], err)
			}
			texts = append(texts, string(b))
		}
		if len(texts) == 0 {
			continue
		}
		cmNS := policies.DefaultPlatformNamespace
		if scope == policies.ScopeNamespace {
			cmNS = ns
		}
		out = append(out, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: cmNS, Name: "prop-" + string(scope),
				Labels: map[string]string{policies.PolicyLabel: "true"}},
			Data: map[string]string{"policies.yaml": strings.Join(texts, "---\n")},
		})
	}
	return out, nil
}

// parseDocs compiles the documents as the webhook's store would, or returns lint's problems.
func parseDocs(ns string, docs []scopedDoc) (*policies.Set, error) {
	cms, err := configMaps(ns, docs)
	if err != nil {
		return nil, err
	}
	var all []*policies.Policy
	var probs policies.Problems
	for _, cm := range cms {
		ps, pr := policies.ParseConfigMap(cm, policies.DefaultOptions())
		probs = append(probs, pr...)
		all = append(all, ps...)
	}
	if len(probs) > 0 {
		return nil, probs
	}
	set := policies.NewSet(all)
	// lint refuses a set whose selection can oscillate (reference §3's fixed point), as
	// `podpatch lint` does after compiling each ConfigMap: such a set is no lint-valid one.
	sourced := make([]policies.SourcedConfigMap, len(cms))
	for i, cm := range cms {
		sourced[i] = policies.SourcedConfigMap{ConfigMap: cm}
	}
	if fps := lint.SelectionProblems(set, sourced); len(fps) > 0 {
		return nil, fmt.Errorf("%w: %s", errSelection, policies.ProblemLines(fps))
	}
	return set, nil
}

// errSelection is lint's refusal of a set whose selection can oscillate.
var errSelection = errors.New("lint: the selection can oscillate")

// apply patches the pair's object with its policies through the engine.
func apply(p pair) outcome {
	var o outcome
	set, err := parseDocs(p.ns, p.docs)
	if errors.Is(err, errSelection) {
		o.lintRefused = true
		return o
	}
	if err != nil {
		o.engineErr = fmt.Errorf("lint: %w", err)
		return o
	}
	res, err := set.Apply(policies.Input{Kind: p.fx.kind, Object: p.fx.instance(p.ns), Namespace: p.ns,
		NamespaceLabels: namespaceLabels[p.ns], Lookups: refCaches})
	if err != nil {
		o.engineErr = err
		return o
	}
	o.skipped = res.Skipped
	if !res.Changed {
		o.unmatched = true
		return o
	}
	o.patched, o.jsonPatch = res.Object, res.Patch
	return o
}

func (r *runner) run(t *testing.T, seed uint64, i int) {
	cov := map[string]int{}
	p, discarded := generate(seed, i, cov)
	o := outcome{discarded: discarded}
	if len(p.docs) > 0 {
		ao := apply(p)
		ao.discarded = discarded
		o = ao
		if o.patched != nil {
			o.refusal = dryRun(t, o.patched)
		}
	}
	var controlErr error
	if o.refusal != nil {
		controlErr = r.control(t, p.fx, p.ns)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range cov {
		r.coverage[k] += v
	}
	s := &r.stats
	s.pairs++
	s.discardedDocs += o.discarded
	s.acceptedDocs += len(p.docs)
	for _, d := range p.docs {
		s.byScopeMode[string(d.scope)+"/"+docMode(d)]++
	}
	switch {
	case o.lintRefused:
		s.lintRefused++
	case len(p.docs) == 0 || o.unmatched:
		s.unmatched++
	case o.engineErr != nil:
		s.engineErrors++
		r.addClass("engine error: "+normalize(o.engineErr.Error()), p, o, o.engineErr.Error())
	case o.refusal == nil:
		s.tested++
		s.accepted++
	case controlErr != nil:
		s.controlRefused++
		r.controlMsg = p.fx.path + " in " + p.ns + ": " + controlErr.Error()
	default:
		s.tested++
		s.refused++
		r.addClass(classify(o.refusal), p, o, o.refusal.Error())
	}
}

func (r *runner) addClass(key string, p pair, o outcome, msg string) {
	c := r.classes[key]
	if c == nil {
		c = &class{key: key, example: p, message: msg, patched: o.patched, jsonPat: o.jsonPatch}
		r.classes[key] = c
	}
	c.count++
}

// control dry-runs the unpatched object once per fixture and namespace.
func (r *runner) control(t *testing.T, fx *fixture, ns string) error {
	key := fx.path + "@" + ns
	r.mu.Lock()
	err, ok := r.controls[key]
	r.mu.Unlock()
	if ok {
		return err
	}
	err = dryRun(t, fx.instance(ns))
	r.mu.Lock()
	r.controls[key] = err
	r.mu.Unlock()
	return err
}

// dryRun creates the object with dryRun=All and returns the API server's refusal, or nil.
// Errors that are not a refusal of the object fail the test.
func dryRun(t *testing.T, obj []byte) error {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(obj); err != nil {
		return fmt.Errorf("the patched object does not decode: %w", err)
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = k8s.Create(ctx, u.DeepCopy(), client.DryRunAll)
		cancel()
		if err == nil {
			return nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) {
			return err
		}
		// Timeouts and throttling on a loaded machine: try again.
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	t.Errorf("dry-run create failed for another reason than the object: %v", err)
	return nil
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	number     = regexp.MustCompile(`\b\d+(\.\d+)?[a-zA-Z]*\b`)
	bracketed  = regexp.MustCompile(`\[[^\]]*\]`)
	objectName = regexp.MustCompile(`^(pods|services) \S+ is (invalid|forbidden): `)
	testNS     = regexp.MustCompile(`\bprop-(plain|limits|baseline)\b`)
)

// normalize drops the values from a message, keeping its shape.
func normalize(s string) string {
	s = testNS.ReplaceAllString(s, "NAMESPACE")
	s = quoted.ReplaceAllString(s, "…")
	s = number.ReplaceAllString(s, "N")
	s = bracketed.ReplaceAllString(s, "[*]")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// classify names a refusal by its first cause's field and message with the values left out.
func classify(err error) string {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return "other: " + normalize(err.Error())
	}
	status := st.Status()
	if status.Details != nil && len(status.Details.Causes) > 0 {
		var keys []string
		for _, c := range status.Details.Causes {
			k := normalize(c.Field + ": " + c.Message)
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		return string(status.Reason) + ": " + keys[0]
	}
	msg := objectName.ReplaceAllString(status.Message, "")
	return string(status.Reason) + ": " + normalize(msg)
}

// shrinkAll shrinks the first example of every class: documents are dropped, then members of
// the remaining documents, while lint accepts the set, it matches, and the API server refuses
// the object for the same class.
func (r *runner) shrinkAll(t *testing.T, workers int) {
	var wg sync.WaitGroup
	next := make(chan *class)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				s := shrink(t, c.example, c.key, shrinkBudget)
				o := apply(s)
				c.shrunk, c.patched, c.jsonPat = &s, o.patched, o.jsonPatch
			}
		}()
	}
	for _, c := range r.classes {
		if !strings.HasPrefix(c.key, "engine error") {
			next <- c
		}
	}
	close(next)
	wg.Wait()
}

// shrinkBudget is how many dry runs shrinking one class's example may take.
const shrinkBudget = 120

// fails reports whether the pair is still lint-valid, matching, and refused for class key.
func fails(t *testing.T, p pair, key string) bool {
	if len(p.docs) == 0 {
		return false
	}
	if _, err := parseDocs(p.ns, p.docs); err != nil {
		return false
	}
	o := apply(p)
	if o.patched == nil {
		return false
	}
	err := dryRun(t, o.patched)
	return err != nil && classify(err) == key
}

func shrink(t *testing.T, p pair, key string, budget int) pair {
	try := func(c pair) bool {
		if budget <= 0 {
			return false
		}
		budget--
		return fails(t, c, key)
	}
	// Whole documents first.
	for i := 0; i < len(p.docs) && len(p.docs) > 1; {
		c := p
		c.docs = slices.Delete(slices.Clone(p.docs), i, i+1)
		if try(c) {
			p = c
			continue
		}
		i++
	}
	// Then members, outermost first, until nothing more can go.
	for changed := true; changed && budget > 0; {
		changed = false
		for d := range p.docs {
			for _, path := range memberPaths(p.docs[d].doc) {
				c := p
				c.docs = slices.Clone(p.docs)
				doc := deepCopyJSON(p.docs[d].doc).(map[string]any)
				if !deleteAt(doc, path) {
					continue
				}
				c.docs[d] = scopedDoc{p.docs[d].scope, doc}
				if try(c) {
					p, changed = c, true
					break
				}
			}
		}
	}
	return p
}

// memberPaths lists the removable members of a document: everything under spec.match,
// spec.template and spec.service, and spec.mode and spec.priority, outermost first.
func memberPaths(doc map[string]any) [][]any {
	var out [][]any
	spec, _ := doc["spec"].(map[string]any)
	var walk func(v any, at []any)
	walk = func(v any, at []any) {
		switch t := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(t) {
				p := append(slices.Clone(at), k)
				out = append(out, p)
			}
			for _, k := range sortedKeys(t) {
				walk(t[k], append(slices.Clone(at), k))
			}
		case []any:
			for i := range t {
				out = append(out, append(slices.Clone(at), i))
			}
			for i := range t {
				walk(t[i], append(slices.Clone(at), i))
			}
		}
	}
	for _, k := range []string{"mode", "priority", "match", "template", "service"} {
		if v, ok := spec[k]; ok {
			out = append(out, []any{"spec", k})
			walk(v, []any{"spec", k})
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// deleteAt removes the member at path; false when it is not there.
func deleteAt(doc map[string]any, path []any) bool {
	var parent any = doc
	for _, seg := range path[:len(path)-1] {
		switch t := parent.(type) {
		case map[string]any:
			parent = t[seg.(string)]
		case []any:
			parent = t[seg.(int)]
		default:
			return false
		}
	}
	last := path[len(path)-1]
	switch t := parent.(type) {
	case map[string]any:
		k, ok := last.(string)
		if !ok {
			return false
		}
		if _, ok := t[k]; !ok {
			return false
		}
		delete(t, k)
		return true
	case []any:
		i, ok := last.(int)
		if !ok || i >= len(t) || len(t) < 2 {
			return false
		}
		// Lists are replaced in the parent: find the parent's parent.
		return deleteListItem(doc, path)
	}
	return false
}

func deleteListItem(doc map[string]any, path []any) bool {
	var parent any = doc
	for _, seg := range path[:len(path)-2] {
		switch t := parent.(type) {
		case map[string]any:
			parent = t[seg.(string)]
		case []any:
			parent = t[seg.(int)]
		}
	}
	key, i := path[len(path)-2], path[len(path)-1].(int)
	switch t := parent.(type) {
	case map[string]any:
		l := t[key.(string)].([]any)
		t[key.(string)] = slices.Delete(slices.Clone(l), i, i+1)
	case []any:
		l := t[key.(int)].([]any)
		t[key.(int)] = slices.Delete(slices.Clone(l), i, i+1)
	}
	return true
}

// report renders the run's counts and every class with its reproducer.
func (r *runner) report(seed uint64, took time.Duration) string {
	var b strings.Builder
	s := r.stats
	fmt.Fprintf(&b, "# podpatch property run\n\nseed %d, %d pairs in %v\n\n", seed, s.pairs, took.Round(time.Second))
	fmt.Fprintf(&b, "- tested (lint-valid set, matched, control accepted): %d\n", s.tested)
	fmt.Fprintf(&b, "- patched object accepted: %d\n- patched object refused (control accepted): %d\n", s.accepted, s.refused)
	fmt.Fprintf(&b, "- unmatched (no policy applied): %d\n- sets lint refuses as a whole (selection can oscillate): %d\n- engine errors: %d\n- control refused: %d\n",
		s.unmatched, s.lintRefused, s.engineErrors, s.controlRefused)
	fmt.Fprintf(&b, "- documents: %d accepted by lint, %d generated and discarded by lint\n", s.acceptedDocs, s.discardedDocs)
	fmt.Fprintf(&b, "- accepted documents by scope/mode: %v\n", s.byScopeMode)
	missing := r.uncovered()
	fmt.Fprintf(&b, "- schema fields generated: %d; never generated: %d %v\n\n", len(r.coverage), len(missing), missing)
	keys := make([]string, 0, len(r.classes))
	for k := range r.classes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return r.classes[b].count - r.classes[a].count })
	byFamily := map[string]int{}
	classesOf := map[string]int{}
	for _, k := range keys {
		byFamily[familyOf(k)] += r.classes[k].count
		classesOf[familyOf(k)]++
	}
	fams := make([]string, 0, len(byFamily))
	for f := range byFamily {
		fams = append(fams, f)
	}
	slices.SortFunc(fams, func(a, b string) int { return byFamily[b] - byFamily[a] })
	fmt.Fprintf(&b, "## refusals by family (root cause)\n\n| family | refused pairs | message classes |\n|---|---|---|\n")
	for _, f := range fams {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", f, byFamily[f], classesOf[f])
	}
	slices.SortStableFunc(keys, func(a, b string) int { return strings.Compare(familyOf(a), familyOf(b)) })
	fmt.Fprintf(&b, "\n## %d refusal classes\n\n", len(keys))
	for _, k := range keys {
		c := r.classes[k]
		ex := c.example
		if c.shrunk != nil {
			ex = *c.shrunk
		}
		fmt.Fprintf(&b, "### [%s] %s\n\ncount %d; reproduce: PODPATCH_PROPERTY_SEED=%d PODPATCH_PROPERTY_ONLY=%d\n", familyOf(c.key), c.key, c.count, seed, c.example.index)
		fmt.Fprintf(&b, "object: %s in namespace %s\nserver: %s\n", ex.fx.path, ex.ns, c.message)
		fmt.Fprintf(&b, "policies (shrunk):\n```yaml\n")
		cms, err := configMaps(ex.ns, ex.docs)
		if err != nil {
			fmt.Fprintf(&b, "# %v\n", err)
		}
		for _, cm := range cms {
			fmt.Fprintf(&b, "# ConfigMap %s/%s\n%s", cm.Namespace, cm.Name, cm.Data["policies.yaml"])
		}
		fmt.Fprintf(&b, "```\npodpatch's JSONPatch: %s\n\n", c.jsonPat)
	}
	return b.String()
}

// uncovered lists the policy schema's fields (of PodSpec and ServiceSpec, recursively) that no
// generated document set.
func (r *runner) uncovered() []string {
	var out []string
	seen := map[string]bool{}
	var walk func(typeName string, fs []jsonField)
	walk = func(typeName string, fs []jsonField) {
		if seen[typeName] {
			return
		}
		seen[typeName] = true
		for _, f := range fs {
			if skipTypes[derefType(f.typ)] {
				continue
			}
			k := f.owner + "." + f.goName
			if r.coverage[k] == 0 {
				out = append(out, k)
			}
			et := derefType(f.typ)
			for et.Kind() == reflect.Slice || et.Kind() == reflect.Map {
				et = derefType(et.Elem())
			}
			if et.Kind() == reflect.Struct && !leafStructs[et] && !skipTypes[et] {
				walk(et.String(), fieldsOf(et))
			}
		}
	}
	walk("PodSpec", fieldsOf(reflect.TypeFor[corev1.PodSpec]()))
	walk("ServiceSpec", fieldsOf(reflect.TypeFor[corev1.ServiceSpec]()))
	slices.Sort(out)
	return out
}
