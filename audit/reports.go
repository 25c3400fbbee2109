package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	openreports "github.com/openreports/reports-api/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The Reports podpatch writes.
const (
	// ReportName is the name of podpatch's Report in each namespace.
	ReportName = "podpatch-drift"
	// ReportSource is the source of the Report and of its results.
	ReportSource = "podpatch"
	// managedByLabel marks podpatch's Reports, so that it lists and deletes only its own.
	managedByLabel = "app.kubernetes.io/managed-by"
	// MaxReportResults bounds the results of one Report (failures first): a namespace of
	// thousands of Pods must not make a Report beyond what etcd stores (1.5 MiB). The summary
	// still counts every result.
	MaxReportResults = 1000
	// maxProperty bounds a property's value (the differing fields of one object).
	maxProperty = 1024
)

// The results a Report holds.
const (
	resultPass openreportsv1alpha1.Result = "pass"
	resultFail openreportsv1alpha1.Result = "fail"
)

// reportWriter keeps one OpenReports Report per namespace in step with the audit: created
// when a namespace has results, updated only when its results change, deleted when it has
// none. Without the OpenReports CRDs it writes nothing and says so once.
type reportWriter struct {
	client openreports.Interface
	log    logr.Logger
	now    func() time.Time
	// installed is what the last round found: nil before the first.
	installed *bool
}

// writes counts what one sync did.
type writes struct{ created, updated, deleted, unchanged int }

// sync writes the Reports of a round: findings by namespace.
func (w *reportWriter) sync(ctx context.Context, byNS map[string][]Finding) (writes, error) {
	var n writes
	existing, err := w.list(ctx)
	if apierrors.IsNotFound(err) {
		if w.installed == nil || *w.installed {
			w.log.Info("OpenReports CRDs are not installed: drift is reported as metrics and Events only")
		}
		w.installed = new(bool)
		return n, nil
	}
	if err != nil {
		return n, err
	}
	if w.installed != nil && !*w.installed {
		w.log.Info("OpenReports CRDs found: writing Reports")
	}
	yes := true
	w.installed = &yes
	now := w.now()
	for _, ns := range slices.Sorted(maps.Keys(byNS)) {
		old := existing[ns]
		want := buildReport(ns, byNS[ns], old, now)
		reports := w.client.OpenreportsV1alpha1().Reports(ns)
		switch {
		case old == nil:
			if _, err := reports.Create(ctx, want, metav1.CreateOptions{}); err != nil {
				return n, fmt.Errorf("create Report %s/%s: %w", ns, ReportName, err)
			}
			n.created++
		case sameReport(old, want):
			n.unchanged++
		default:
			want.ResourceVersion = old.ResourceVersion
			if _, err := reports.Update(ctx, want, metav1.UpdateOptions{}); err != nil {
				return n, fmt.Errorf("update Report %s/%s: %w", ns, ReportName, err)
			}
			n.updated++
		}
	}
	for ns := range existing {
		if _, ok := byNS[ns]; ok {
			continue
		}
		err := w.client.OpenreportsV1alpha1().Reports(ns).Delete(ctx, ReportName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("delete Report %s/%s: %w", ns, ReportName, err)
		}
		n.deleted++
	}
	return n, nil
}

// list returns podpatch's Reports by namespace, a page at a time.
func (w *reportWriter) list(ctx context.Context) (map[string]*openreportsv1alpha1.Report, error) {
	out := map[string]*openreportsv1alpha1.Report{}
	opts := metav1.ListOptions{LabelSelector: managedByLabel + "=" + ReportSource, Limit: DefaultPageSize}
	for {
		page, err := w.client.OpenreportsV1alpha1().Reports("").List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range page.Items {
			if r := &page.Items[i]; r.Name == ReportName {
				out[r.Namespace] = r
			}
		}
		if page.Continue == "" {
			return out, nil
		}
		opts.Continue = page.Continue
	}
}

// buildReport is the Report of one namespace: one result per object and policy that matches
// it, failures first, at most MaxReportResults. A result equal to one of the old Report keeps
// its timestamp, so that an unchanged namespace gives an equal Report.
func buildReport(ns string, findings []Finding, old *openreportsv1alpha1.Report, now time.Time) *openreportsv1alpha1.Report {
	r := &openreportsv1alpha1.Report{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ReportName, Labels: map[string]string{managedByLabel: ReportSource}},
		Source:     ReportSource,
	}
	var results []openreportsv1alpha1.ReportResult
	for _, f := range findings {
		for _, p := range f.Policies {
			results = append(results, result(f, p))
		}
	}
	slices.SortStableFunc(results, func(a, b openreportsv1alpha1.ReportResult) int {
		if a.Result != b.Result {
			if a.Result == resultFail {
				return -1
			}
			return 1
		}
		return strings.Compare(resultKey(a), resultKey(b))
	})
	for _, res := range results {
		if res.Result == resultFail {
			r.Summary.Fail++
		} else {
			r.Summary.Pass++
		}
	}
	if len(results) > MaxReportResults {
		results = results[:MaxReportResults]
		r.Configuration = &openreportsv1alpha1.ReportConfiguration{Limits: openreportsv1alpha1.Limits{MaxResults: MaxReportResults}}
	}
	previous := map[string]openreportsv1alpha1.ReportResult{}
	if old != nil {
		for _, res := range old.Results {
			previous[resultKey(res)] = res
		}
	}
	stamp := metav1.Timestamp{Seconds: now.Unix()}
	for i := range results {
		results[i].Timestamp = stamp
		if prev, ok := previous[resultKey(results[i])]; ok {
			prev.Timestamp = stamp
			if equality.Semantic.DeepEqual(prev, results[i]) {
				results[i].Timestamp = previous[resultKey(results[i])].Timestamp
			}
		}
	}
	r.Results = results
	return r
}

// result is one policy's result for one object.
func result(f Finding, p PolicyResult) openreportsv1alpha1.ReportResult {
	ref, rv, _ := strings.Cut(p.Ref, "@")
	res := openreportsv1alpha1.ReportResult{
		Source: ReportSource, Policy: ref, Category: "podpatch drift", Result: resultPass, Scored: true,
		Subjects:    []corev1.ObjectReference{{APIVersion: "v1", Kind: string(f.Kind), Namespace: f.Namespace, Name: f.Name, UID: types.UID(f.UID)}},
		Description: "the object has what the policy sets",
		Properties:  map[string]string{"manager": string(f.Cluster.Manager), "role": string(f.Cluster.Role), "cluster": f.Cluster.Name},
	}
	if f.Cluster.Group != "" {
		res.Properties["group"] = f.Cluster.Group
	}
	if o := f.Cluster.Owner; o != nil {
		res.Properties["owner"] = o.String()
		res.Properties["ownerAPIVersion"] = o.APIVersion
	}
	if p.Drift {
		fields := strings.Join(p.Fields, ", ")
		res.Result = resultFail
		res.Description = clip(f.Reason.Text()+": "+fields, maxProperty)
		res.Properties["reason"] = string(f.Reason)
		res.Properties["fields"] = clip(fields, maxProperty)
		res.Properties["policyVersion"] = rv
		res.Properties["appliedVersion"] = appliedVersion(f.Applied, ref)
	}
	return res
}

// appliedVersion is the resourceVersion the object's provenance names for a policy: "" when
// it names none, "none" when the policy is missing from it.
func appliedVersion(applied []string, ref string) string {
	for _, e := range applied {
		if r, rv, _ := strings.Cut(e, "@"); r == ref {
			return rv
		}
	}
	return "none"
}

func resultKey(r openreportsv1alpha1.ReportResult) string {
	var subject string
	if len(r.Subjects) > 0 {
		s := r.Subjects[0]
		subject = s.Kind + "/" + s.Name
	}
	return subject + "\x00" + r.Policy
}

// sameReport reports whether a Report already says what want says.
func sameReport(old, want *openreportsv1alpha1.Report) bool {
	return old.Source == want.Source && old.Labels[managedByLabel] == ReportSource &&
		equality.Semantic.DeepEqual(old.Summary, want.Summary) &&
		equality.Semantic.DeepEqual(old.Configuration, want.Configuration) &&
		equality.Semantic.DeepEqual(normalResults(old.Results), normalResults(want.Results))
}

// normalResults treats nil and empty alike, as the API server's round trip does.
func normalResults(rs []openreportsv1alpha1.ReportResult) []openreportsv1alpha1.ReportResult {
	if len(rs) == 0 {
		return nil
	}
	return rs
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}
