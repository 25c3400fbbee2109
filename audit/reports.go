package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
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

	"github.com/podpatch/podpatch/internal/report"
)

// The Reports podpatch writes.
const (
	// ReportName is the name of podpatch's Report in each namespace.
	ReportName = "podpatch-drift"
	// ReportSource is the source of the Report and of its results.
	ReportSource = "podpatch"
	// managedByLabel marks podpatch's Reports, so that it lists and deletes only its own.
	managedByLabel = "app.kubernetes.io/managed-by"
	// MaxReportResults bounds the results of one Report (failures first), as MaxReportBytes
	// bounds its size: a namespace of thousands of Pods must not make a Report beyond what etcd
	// stores (1.5 MiB). The summary still counts every result.
	MaxReportResults = 1000
	// OmittedPolicy is the policy of the one result that says how many results a Report
	// leaves out (result skip, properties omitted, omittedFail, omittedPass); the summary
	// does not count it.
	OmittedPolicy = "podpatch/omitted-results"
	// maxProperty bounds a property's value (the differing fields of one object).
	maxProperty = 1024
)

// The results a Report holds.
const (
	resultPass openreportsv1alpha1.Result = "pass"
	resultFail openreportsv1alpha1.Result = "fail"
	resultSkip openreportsv1alpha1.Result = "skip"
)

// reportWriter keeps one OpenReports Report per namespace in step with the audit: created
// when a namespace has results, updated only when its results change, deleted when it has
// none. Without the OpenReports CRDs it writes nothing and says so once.
type reportWriter struct {
	client openreports.Interface
	log    logr.Logger
	now    func() time.Time
	// failed is told of every namespace whose Report could not be written or deleted; the
	// other namespaces' are written all the same.
	failed func(namespace string, err error)
	// installed is what the last round found: nil before the first.
	installed *bool
}

// writes counts what one sync did.
type writes struct{ created, updated, deleted, unchanged, failed int }

// sync writes the Reports of a round: findings by namespace. A Report that cannot be written
// (the API server refuses it, a webhook or quota denies it) is logged and counted, and the
// round goes on with the other namespaces, so that one namespace cannot keep the Reports of
// the others stale. The error is for the list of Reports, or a context done.
func (w *reportWriter) sync(ctx context.Context, byNS map[string][]Record) (writes, error) {
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
	fail := func(ns string, err error) {
		n.failed++
		if w.failed != nil {
			w.failed(ns, err)
		}
	}
	now := w.now()
	for _, ns := range slices.Sorted(maps.Keys(byNS)) {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		old := existing[ns]
		want := buildReport(ns, byNS[ns], old, now)
		reports := w.client.OpenreportsV1alpha1().Reports(ns)
		switch {
		case old == nil:
			if _, err := reports.Create(ctx, want, metav1.CreateOptions{}); err != nil {
				fail(ns, fmt.Errorf("create Report %s/%s: %w", ns, ReportName, err))
				continue
			}
			n.created++
		case sameReport(old, want):
			n.unchanged++
		default:
			want.ResourceVersion = old.ResourceVersion
			if _, err := reports.Update(ctx, want, metav1.UpdateOptions{}); err != nil {
				fail(ns, fmt.Errorf("update Report %s/%s: %w", ns, ReportName, err))
				continue
			}
			n.updated++
		}
	}
	for _, ns := range slices.Sorted(maps.Keys(existing)) {
		if _, ok := byNS[ns]; ok {
			continue
		}
		if err := ctx.Err(); err != nil {
			return n, err
		}
		err := w.client.OpenreportsV1alpha1().Reports(ns).Delete(ctx, ReportName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			fail(ns, fmt.Errorf("delete Report %s/%s: %w", ns, ReportName, err))
			continue
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
func buildReport(ns string, findings []Record, old *openreportsv1alpha1.Report, now time.Time) *openreportsv1alpha1.Report {
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
	previous := map[string]openreportsv1alpha1.ReportResult{}
	if old != nil {
		for _, res := range old.Results {
			previous[resultKey(res)] = res
		}
	}
	stamp := metav1.Timestamp{Seconds: now.Unix()}
	for i := range results {
		keepStamp(&results[i], previous, stamp)
	}
	if kept := fit(r, results); kept < len(results) {
		r.Configuration = &openreportsv1alpha1.ReportConfiguration{Limits: openreportsv1alpha1.Limits{MaxResults: MaxReportResults}}
		omitted := omittedResult(results[kept:])
		keepStamp(&omitted, previous, stamp)
		results = append(results[:kept:kept], omitted)
	}
	r.Results = results
	return r
}

// reportSlack is what the API server adds to a Report besides what podpatch sends: uid,
// creationTimestamp, generation, managedFields (results is an atomic list, one entry).
const reportSlack = 8 << 10

// fit says how many of the leading results a Report can hold: with the result that says how
// many were left out, at most MaxReportResults, and no more than keep the Report's JSON
// encoding, with that result and what the API server adds, within MaxReportBytes. Each result
// is measured as encoded.
func fit(r *openreportsv1alpha1.Report, results []openreportsv1alpha1.ReportResult) int {
	head := *r
	head.ResourceVersion = "18446744073709551615" // an update carries the old one
	head.Configuration = &openreportsv1alpha1.ReportConfiguration{Limits: openreportsv1alpha1.Limits{MaxResults: MaxReportResults}}
	head.Results = []openreportsv1alpha1.ReportResult{omittedResult(nil)}
	budget := MaxReportBytes - reportSlack - encodedSize(&head) - len(",")
	limit := len(results)
	if limit > MaxReportResults {
		limit = MaxReportResults - 1 // and the omitted result
	}
	used := 0
	for i := range results {
		if i == limit {
			return i
		}
		if used += encodedSize(&results[i]) + len(","); used > budget {
			return i
		}
	}
	return len(results)
}

// encodedSize is the length of v's JSON encoding (a Report or a result always encodes).
func encodedSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return MaxReportBytes // never happens; counts as too large
	}
	return len(b)
}

// omittedResult summarises the results a Report leaves out. Its counts are written as the
// largest they can be when measured for the budget (rest nil).
func omittedResult(rest []openreportsv1alpha1.ReportResult) openreportsv1alpha1.ReportResult {
	fail, pass := 0, 0
	for _, res := range rest {
		if res.Result == resultFail {
			fail++
		} else {
			pass++
		}
	}
	n, f, p := strconv.Itoa(len(rest)), strconv.Itoa(fail), strconv.Itoa(pass)
	if rest == nil {
		n, f, p = "9999999999", "9999999999", "9999999999"
	}
	return openreportsv1alpha1.ReportResult{
		Source: ReportSource, Policy: OmittedPolicy, Category: "podpatch drift", Result: resultSkip,
		Description: fmt.Sprintf("%s more result(s) omitted (%s fail, %s pass): a Report holds at most %d results and %d bytes, failures first; the summary counts them all and `podpatch audit` lists them",
			n, f, p, MaxReportResults, MaxReportBytes),
		Properties: map[string]string{"omitted": n, "omittedFail": f, "omittedPass": p},
	}
}

// keepStamp gives a result the time now, or the timestamp of the equal result of the previous
// Report, so that an unchanged namespace gives an equal Report.
func keepStamp(res *openreportsv1alpha1.ReportResult, previous map[string]openreportsv1alpha1.ReportResult, now metav1.Timestamp) {
	res.Timestamp = now
	if prev, ok := previous[resultKey(*res)]; ok {
		stamp := prev.Timestamp
		prev.Timestamp = now
		if equality.Semantic.DeepEqual(prev, *res) {
			res.Timestamp = stamp
		}
	}
}

// result is one policy's result for one object.
func result(f Record, p PolicyResult) openreportsv1alpha1.ReportResult {
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
		res.Properties["owner"] = report.Clip(o.String(), maxProperty)
		res.Properties["ownerAPIVersion"] = o.APIVersion
	}
	if p.Drift {
		fields := strings.Join(p.Fields, ", ")
		res.Result = resultFail
		res.Description = report.Clip(f.Reason.Text()+": "+fields, maxProperty)
		res.Properties["reason"] = string(f.Reason)
		res.Properties["fields"] = report.Clip(fields, maxProperty)
		res.Properties["policyVersion"] = rv
		res.Properties["appliedVersion"] = p.AppliedVersion
	}
	if len(p.ChangedBy) > 0 {
		changed := joinChanges(p.ChangedBy)
		res.Description = report.Clip(f.Reason.Text()+": "+changed, maxProperty)
		res.Properties["changedBy"] = report.Clip(changed, maxProperty)
	}
	if p.LeftOut != "" {
		res.Description = report.Clip(string(EnforceLeftOut)+": "+p.LeftOut, maxProperty)
		res.Properties["reason"] = string(EnforceLeftOut)
		res.Properties["leftOut"] = report.Clip(p.LeftOut, maxProperty)
	}
	return res
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
