package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// Stats counts what one audit read and found.
type Stats struct {
	// Pods and Services are the objects listed (Pods are listed by the profiles' selectors).
	Pods     int `json:"pods"`
	Services int `json:"services"`
	// Checked are the recognised objects that policies match.
	Checked int `json:"checked"`
	Drifted int `json:"drifted"`
	// Errors are objects the engine could not patch (the webhook would admit them unchanged).
	Errors int `json:"errors"`
}

// Audit checks every recognised Pod and Service of the cluster, or of a namespace, against a
// policy set, one page of objects at a time.
type Audit struct {
	Reader *Reader
	Set    *policies.Set
	// NamespaceLabels gives a namespace's labels, for match.namespaceSelector.
	NamespaceLabels func(namespace string) map[string]string
	// Lookups answers what objects reference (see Object.Lookups); nil: unknown.
	Lookups validity.Lookups
	// Owners, when set, resolves owners one level up (see Owners).
	Owners *Owners
	// OnRecord gets every audited object, drifting or not.
	OnRecord func(Record)
	// OnError gets every object that could not be checked; the audit goes on.
	OnError func(error)
	// Progress, when set, is told the counts after every page.
	Progress func(Stats)
}

// Run audits a namespace ("" for every namespace).
func (a *Audit) Run(ctx context.Context, namespace string) (Stats, error) {
	var st Stats
	n := 0
	err := a.Reader.EachObject(ctx, namespace, func(kind profiles.Kind, raw json.RawMessage) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		a.check(ctx, &st, kind, raw)
		if n++; a.Progress != nil && n%100 == 0 {
			a.Progress(st)
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	if a.Progress != nil {
		a.Progress(st)
	}
	return st, nil
}

// check audits one object and counts it.
func (a *Audit) check(ctx context.Context, st *Stats, kind profiles.Kind, raw json.RawMessage) {
	if kind == profiles.KindPod {
		st.Pods++
	} else {
		st.Services++
	}
	obj := Object{Kind: kind, JSON: raw, Lookups: a.Lookups}
	if a.NamespaceLabels != nil {
		obj.NamespaceLabels = a.NamespaceLabels(metaOf(raw).Namespace)
	}
	f, ok, err := Check(a.Set, obj)
	if err != nil {
		st.Errors++
		if a.OnError != nil {
			a.OnError(err)
		}
		return
	}
	if !ok {
		return
	}
	st.Checked++
	if f.Drift {
		st.Drifted++
	}
	f.Cluster.Owner, f.Cluster.ownerExists = a.Owners.Resolve(ctx, f.Namespace, f.Cluster.Manager, f.Cluster.Owner)
	if a.OnRecord != nil {
		a.OnRecord(f)
	}
}

// EachObject calls fn with every Pod a profile's selector selects (each once, however many
// select it) and every Service of a namespace ("" for every namespace), a page at a time: the
// objects the audit reads, as the API server returns them. A Pod is valid only during the call.
func (r *Reader) EachObject(ctx context.Context, namespace string, fn func(profiles.Kind, json.RawMessage) error) error {
	seen := map[string]bool{} // Pod UIDs: a Pod two profiles' selectors select is read once
	for _, sel := range profiles.ObjectSelectors() {
		err := r.Each(ctx, "pods", namespace, sel.String(), func(raw json.RawMessage) error {
			if uid := metaOf(raw).UID; uid != "" {
				if seen[uid] {
					return nil
				}
				seen[uid] = true
			}
			return fn(profiles.KindPod, raw)
		})
		if err != nil {
			return err
		}
	}
	return r.Each(ctx, "services", namespace, "", func(raw json.RawMessage) error { return fn(profiles.KindService, raw) })
}

// metaOf reads an object's UID and namespace.
func metaOf(raw json.RawMessage) (m struct{ UID, Namespace string }) {
	var v struct {
		Metadata struct {
			UID       string `json:"uid"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if json.Unmarshal(raw, &v) == nil {
		m.UID, m.Namespace = v.Metadata.UID, v.Metadata.Namespace
	}
	return m
}

// Report is what `podpatch audit` prints: the objects that drift, and what was read.
type Report struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Namespace is the audited namespace; empty for all.
	Namespace string `json:"namespace,omitempty"`
	// Generation identifies the policies audited against (as podpatch serve's /readyz does).
	Generation string   `json:"policyGeneration"`
	Stats      Stats    `json:"stats"`
	Objects    []Record `json:"objects"`
}

// ClusterAudit is one `podpatch audit`: it reads the policies and the objects of a cluster and
// reports the objects that drift.
type ClusterAudit struct {
	Reader *Reader
	// Options say how policy ConfigMaps are scoped; provenance entries are compared with
	// @resourceVersion whatever they say.
	Options policies.Options
	// Namespace is the namespace to audit, "" for all.
	Namespace string
	// Lookups answers what objects reference (see Object.Lookups); nil: unknown.
	Lookups validity.Lookups
	// Warn is told what the audit leaves out (invalid policy ConfigMaps, unpatchable objects).
	Warn     func(string)
	Progress func(Stats)
}

// Run reads the policies, audits the objects and returns the report.
func (c *ClusterAudit) Run(ctx context.Context) (*Report, error) {
	warn := c.Warn
	if warn == nil {
		warn = func(string) {}
	}
	set, err := c.policies(ctx, warn)
	if err != nil {
		return nil, err
	}
	labels, err := c.Reader.NamespaceLabels(ctx, c.Namespace)
	if err != nil {
		return nil, err
	}
	rep := &Report{APIVersion: policies.APIVersion, Kind: "AuditReport", Namespace: c.Namespace, Generation: set.Generation(),
		Objects: []Record{}}
	a := &Audit{Reader: c.Reader, Set: set, Owners: c.Reader.Owners(), Progress: c.Progress, Lookups: c.Lookups,
		NamespaceLabels: func(ns string) map[string]string { return labels[ns] },
		OnRecord: func(f Record) {
			if f.Drift {
				rep.Objects = append(rep.Objects, f)
			}
		},
		OnError: func(err error) { warn(err.Error()) },
	}
	if rep.Stats, err = a.Run(ctx, c.Namespace); err != nil {
		return nil, err
	}
	slices.SortFunc(rep.Objects, func(a, b Record) int {
		return strings.Compare(a.Namespace+"\x00"+string(a.Kind)+"\x00"+a.Name, b.Namespace+"\x00"+string(b.Kind)+"\x00"+b.Name)
	})
	return rep, nil
}

// policies compiles the policy ConfigMaps the audit needs (Reader.PolicySet).
func (c *ClusterAudit) policies(ctx context.Context, warn func(string)) (*policies.Set, error) {
	return c.Reader.PolicySet(ctx, c.Options, c.Namespace, warn)
}

// PolicySet compiles the policy ConfigMaps that apply to a namespace ("" for all) as podpatch
// serve does, for the audit and `podpatch explain`. One that fails to compile is left out, with
// a warning: the webhook serves its last good version, which a fresh reader cannot know.
// Provenance entries carry @resourceVersion whatever opts say.
func (r *Reader) PolicySet(ctx context.Context, opts policies.Options, namespace string, warn func(string)) (*policies.Set, error) {
	cms, err := r.PolicyConfigMaps(ctx, opts.PlatformNamespace, namespace)
	if err != nil {
		return nil, err
	}
	opts.WithResourceVersion = true
	sourced := make([]policies.SourcedConfigMap, len(cms))
	for i, cm := range cms {
		sourced[i] = policies.SourcedConfigMap{ConfigMap: cm}
	}
	// The engine's own compile: invalid ConfigMaps are left out whole, then those past their
	// namespace's limit (Set.Dropped), in that order.
	set, probs := policies.Compile(sourced, opts)
	dropped := map[string]bool{}
	for _, d := range set.Dropped() {
		dropped[d] = true
	}
	for _, fp := range probs {
		if dropped[fp.ConfigMap] {
			warn(fmt.Sprintf("policy ConfigMap %s: left out, beyond its namespace's %d policies (as podpatch serve does)", fp.ConfigMap, policies.MaxNamespacePolicies))
			continue
		}
		warn(fmt.Sprintf("policy ConfigMap %s fails to compile (%d problem(s); see podpatch lint): left out, as podpatch serve keeps serving its last good version",
			fp.ConfigMap, len(fp.Problems)))
	}
	return set, nil
}
