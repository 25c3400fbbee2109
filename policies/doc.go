// Package policies is the pure core of podpatch: it parses and validates PodTemplatePatch
// policies stored in ConfigMaps, compiles them into an immutable Set, selects the policies of an
// object that a cluster manager generated, and merges them into the object's raw JSON.
//
// It imports only the Kubernetes API types, apimachinery, the standard library and the engine's
// own packages below it: no HTTP, no API client, no logger and no globals, so the webhook
// (Set.Patch) and `podpatch render` (Set.Apply, render) share one code path.
//
// The files follow the pipeline; read them in this order:
//
//   - parse: a ConfigMap's documents, bounded (decode.go: SplitDocuments, the one front end;
//     limits.go), decoded and validated into policies (parse.go: ParseConfigMap; document.go:
//     the PodTemplatePatch as written; validate_fields.go and urlannotations.go: the Kubernetes
//     field rules and podpatch's annotations; ownrules.go: what a policy must get right by
//     itself of reference §8, found at parse time; the allow-lists of namespace policies are
//     policies/allowlist's);
//   - compile: a policy's match and patches in their compiled form (compile.go: compileMatch,
//     Compile of many ConfigMaps; compact.go: a patch as compact JSON, decoded on demand), and
//     the Set that indexes them by scope, namespace, manager, role and kind (set.go);
//   - select: the policies of one object, sorted into the layers of reference §3 (select.go);
//   - merge: one evaluation per admission (apply.go: Set.Apply and Set.Patch, the entry of every
//     admission; evaluation.go: the value whose methods are the stages), its strategies and
//     fallbacks (admit.go), the fixed point of the labels policies set (fixedpoint.go,
//     settle.go), one application of the layers in named steps (layers_apply.go) by the merge
//     rules of reference §3 (merge.go), Kueue's placement kept (policies/kueue), what the
//     Kubernetes version keeps (versioneffects.go);
//   - check: the patched object checked as the API server will check it, and what would make
//     it invalid left out (keepvalid.go, over policies/validity), then the manager-aware checks
//     (policies/checks);
//   - updates: an update's enforce policies alone (update.go), what a stored object holds of
//     them (holds.go, defaults.go), the ephemeral containers an update adds (ephemeral.go);
//   - result: what each policy changed, for `render --explain` and `podpatch explain`
//     (changes.go); the namespace policies a platform enforce policy would leave out, for
//     `lint` (conflicts.go).
//
// types.go holds the types every stage needs (Policy, Input, Result, …); the words for an object
// (Kind, Manager, Role, Identity) and the managers' profiles are policies/profiles'. The tools
// above the engine (policyfiles, render, lint, vap, native) read files, render, lint and
// compile admission objects through the Set's exported API.
package policies
