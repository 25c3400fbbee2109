package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/internal/report"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// hostileString is a string of about n bytes with what breaks output: control characters,
// terminal escapes, tabs, newlines, multi-byte runes.
func hostileString(rng *rand.Rand, n int) string {
	parts := []string{"x", "\x1b]0;owned\x07", "\t", "\n", "é", "😀", "\r", "\x00", "y"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	return b.String()
}

// hostilePod is a Dask worker with huge, hostile strings in every field the audit reports:
// name, UID, the cluster and group labels, the owner's apiVersion, kind, name and UID, the
// provenance annotation (long entries, many entries), and container and env names, which end
// up in the differing field paths.
func hostilePod(rng *rand.Rand, ns string, i int, plausibleOwner bool) []byte {
	big := func() string { return hostileString(rng, 1000+rng.IntN(100_000)) }
	var applied []string
	for j := range 200 + rng.IntN(2000) {
		applied = append(applied, fmt.Sprintf("ns/cm/p%d@%s", j, hostileString(rng, rng.IntN(2000))))
	}
	var containers []any
	for j := range 20 + rng.IntN(20) {
		var env []any
		for k := range 5 {
			env = append(env, map[string]any{"name": fmt.Sprintf("E%d%s", k, hostileString(rng, rng.IntN(3000))), "value": "v"})
		}
		containers = append(containers, map[string]any{"name": fmt.Sprintf("c%d-%s", j, hostileString(rng, rng.IntN(3000))), "image": "dask", "env": env})
	}
	owner := map[string]any{"apiVersion": "x.example.com/" + big(), "kind": big(), "name": big(), "uid": big(), "controller": true}
	if plausibleOwner {
		owner = map[string]any{"apiVersion": "kubernetes.dask.org/v1", "kind": "DaskCluster", "name": "c", "uid": "u", "controller": true}
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": fmt.Sprintf("p%d-%s", i, big()), "namespace": ns, "uid": fmt.Sprintf("u%d-%s", i, big()),
			"labels":          map[string]any{"dask.org/component": "worker", "dask.org/cluster-name": big(), "dask.org/workergroup-name": big()},
			"annotations":     map[string]any{policies.AppliedAnnotation: strings.Join(applied, ",")},
			"ownerReferences": []any{owner}},
		"spec": map[string]any{"containers": containers}}
	b, err := json.Marshal(pod)
	if err != nil {
		panic(err)
	}
	return b
}

// requireBoundedStrings walks a JSON value: every string at most report.MaxString bytes, every list
// of strings at most MaxRecordList long.
func requireBoundedStrings(t *testing.T, v any, path string) {
	t.Helper()
	switch v := v.(type) {
	case string:
		require.LessOrEqual(t, len(v), report.MaxString, "%s", path)
	case []any:
		if len(v) > 0 {
			if _, ok := v[0].(string); ok {
				require.LessOrEqual(t, len(v), MaxRecordList, "%s", path)
			}
		}
		for i, e := range v {
			requireBoundedStrings(t, e, fmt.Sprintf("%s[%d]", path, i))
		}
	case map[string]any:
		for k, e := range v {
			require.LessOrEqual(t, len(k), report.MaxString, "%s key", path)
			requireBoundedStrings(t, e, path+"."+k)
		}
	}
}

// TestHostileObjectsGiveBoundedOutput: Pods with huge strings in every field that reaches the
// output give Findings whose strings are bounded, a Report within MaxReportBytes, a table whose
// rows are at most eight clipped cells wide and hold no control character, JSON and YAML of
// bounded strings, lines of at most report.MaxTableLine bytes, and Events that are short — or none, for an owner that cannot exist.
func TestHostileObjectsGiveBoundedOutput(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	set := setOf(t, workerPolicies)
	rep := &Report{APIVersion: policies.APIVersion, Kind: "AuditReport", Objects: []Record{}}
	for i := range 9 {
		js := hostilePod(rng, "team-a", i, i%3 == 0)
		require.Greater(t, len(js), 100_000)
		f, ok, err := Check(set, Object{Kind: profiles.KindPod, JSON: js})
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, f.Drift)
		require.Greater(t, len(f.Fields), 0)
		rep.Objects = append(rep.Objects, f)
		rep.Stats.Checked++
		rep.Stats.Drifted++
	}

	for _, f := range rep.Objects {
		var v any
		require.NoError(t, json.Unmarshal(mustJSON(t, f), &v))
		requireBoundedStrings(t, v, "finding")
	}

	r := buildReport("team-a", rep.Objects, nil, time.Unix(0, 0))
	for _, res := range r.Results {
		require.LessOrEqual(t, len(res.Description), maxProperty)
		require.LessOrEqual(t, len(res.Policy), report.MaxString)
		for k, v := range res.Properties {
			require.LessOrEqual(t, len(v), maxProperty, "property %s", k)
		}
		for _, s := range res.Subjects {
			for _, v := range []string{s.APIVersion, s.Kind, s.Namespace, s.Name, string(s.UID)} {
				require.LessOrEqual(t, len(v), report.MaxString)
			}
		}
	}
	size := len(mustJSON(t, r))
	require.LessOrEqual(t, size, MaxReportBytes-reportSlack)
	t.Logf("report of %d hostile objects: %d results, %d bytes", len(rep.Objects), len(r.Results), size)

	for _, format := range Formats {
		var out bytes.Buffer
		require.NoError(t, Write(&out, rep, format))
		switch format {
		case "table":
			lines := strings.Split(out.String(), "\n")
			for i, line := range lines[:len(rep.Objects)+1] { // the header and one row per object
				require.LessOrEqual(t, utf8.RuneCountInString(line), 8*(MaxTableCell+2), "row %d", i)
			}
			for i, line := range lines {
				require.LessOrEqual(t, len(line), report.MaxTableLine, "line %d", i)
			}
			for _, c := range out.String() {
				require.False(t, c < 0x20 && c != '\n' || c == 0x7f, "a control character %q reaches the terminal", c)
			}
		case "json":
			var v any
			require.NoError(t, json.Unmarshal(out.Bytes(), &v))
			requireBoundedStrings(t, v, "json")
		}
		t.Logf("%s: %d bytes for %d objects", format, out.Len(), len(rep.Objects))
		// Each Record holds at most 1+len(Policies) lists of MaxRecordList strings and a few
		// more strings; JSON may escape a byte into six.
		require.Less(t, out.Len(), len(rep.Objects)*(3+len(rep.Objects[0].Policies))*MaxRecordList*6*report.MaxString)
	}

	// As if the owner walk had read every owner: the plausibility bound is what is tested here.
	for i := range rep.Objects {
		rep.Objects[i].Cluster.ownerExists = true
	}
	rec := record.NewFakeRecorder(100)
	newOwnerEvents(kube.NewRecorder(rec)).update(rep.Objects)
	require.Len(t, rec.Events, 1, "one Event for the plausible owner; none for owners that cannot exist")
	msg := <-rec.Events
	require.LessOrEqual(t, len(msg), kube.MaxEventMessage+len("Warning PolicyDrift "))
	require.Contains(t, msg, "3 object(s) drift")
}

// TestBuildReportIsBoundedInBytes: 1,000 and 5,000 results per namespace, short or as long as
// a result can be, give a Report whose encoding is within MaxReportBytes (and what the API
// server adds), failures first, with one result that counts what was left out, a summary of
// every result, and the same Report again for the same findings.
func TestBuildReportIsBoundedInBytes(t *testing.T) {
	long := strings.Repeat("f", report.MaxString)
	for _, c := range []struct {
		objects int
		fields  int
		field   string
	}{{1000, 1, "metadata.labels.cc"}, {5000, 1, "metadata.labels.cc"}, {1000, MaxRecordList, long}, {5000, MaxRecordList, long}, {200, 3, "a"}} {
		t.Run(fmt.Sprintf("%d-objects-%d-fields-of-%d", c.objects, c.fields, len(c.field)), func(t *testing.T) {
			var fs []Record
			fails := 0
			for i := range c.objects {
				f := reportFindings()[i%2]
				f.Name = fmt.Sprintf("pod-%05d", i)
				if f.Drift {
					f.Fields = nil
					for j := range c.fields {
						f.Fields = append(f.Fields, fmt.Sprintf("%d%s", j, c.field))
					}
					f.Policies[0].Fields = f.Fields
					fails++
				}
				fs = append(fs, f)
			}
			total := fails + (c.objects - fails) + fails // each drifting object has two policies
			r := buildReport("ns", fs, nil, time.Unix(1000, 0))
			size := len(mustJSON(t, r))
			t.Logf("%d results kept of %d, %d bytes", len(r.Results), total, size)
			require.LessOrEqual(t, size, MaxReportBytes-reportSlack)
			require.LessOrEqual(t, len(r.Results), MaxReportResults)
			require.Equal(t, fails, r.Summary.Fail)
			require.Equal(t, total, r.Summary.Pass+r.Summary.Fail)
			if total <= len(r.Results) {
				require.Nil(t, r.Configuration)
				return
			}
			last := r.Results[len(r.Results)-1]
			require.Equal(t, OmittedPolicy, last.Policy)
			require.Equal(t, resultSkip, last.Result)
			kept := r.Results[:len(r.Results)-1]
			require.Equal(t, strconv.Itoa(total-len(kept)), last.Properties["omitted"])
			keptFail := 0
			for i, res := range kept {
				if res.Result == resultFail {
					require.Equal(t, i, keptFail, "failures first")
					keptFail++
				}
			}
			require.Equal(t, strconv.Itoa(fails-keptFail), last.Properties["omittedFail"])
			require.NotNil(t, r.Configuration)

			again := buildReport("ns", fs, r, time.Unix(5000, 0))
			require.True(t, sameReport(r, again), "an unchanged audit keeps the Report as it is")
		})
	}
}

// TestLongestValidNamesAreKept: report.MaxString is above every string the API server validates, so
// the longest valid names — a 253-byte Pod and owner name, a 317-byte owner apiVersion, a
// 63-byte kind and cluster name, a provenance entry of a 63-byte namespace, a 253-byte
// ConfigMap, a 63-byte policy and a 20-digit resourceVersion — reach the output whole.
func TestLongestValidNamesAreKept(t *testing.T) {
	label := func(c byte) string { return strings.Repeat(string(c), 63) }
	subdomain := func(c byte) string {
		return label(c) + "." + label(c) + "." + label(c) + "." + strings.Repeat(string(c), 61)
	}
	ns, cm, pol, rv := label('n'), subdomain('c'), label('p'), "18446744073709551615"
	require.Len(t, cm, 253)
	doc := "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: " + pol + "}\nspec:\n  match: {roles: [worker]}\n  template:\n    metadata: {labels: {team: a}}\n"
	cmObj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cm, ResourceVersion: rv,
		Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": doc}}
	opts := policies.DefaultOptions()
	opts.WithResourceVersion = true
	ps, probs := policies.ParseConfigMap(cmObj, opts)
	require.Empty(t, probs)
	set := policies.NewSet(ps)
	ref := ns + "/" + cm + "/" + pol + "@" + rv

	owner := Owner{APIVersion: subdomain('g') + "/" + label('v'), Kind: "K" + strings.Repeat("k", 62), Name: subdomain('o'), UID: "u"}
	require.Len(t, owner.APIVersion, 317)
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": subdomain('x'), "namespace": ns, "uid": "u",
			"labels":          map[string]any{"dask.org/component": "worker", "dask.org/cluster-name": label('z')},
			"annotations":     map[string]any{policies.AppliedAnnotation: ns + "/" + cm + "/" + pol + "@1"},
			"ownerReferences": []any{map[string]any{"apiVersion": owner.APIVersion, "kind": owner.Kind, "name": owner.Name, "uid": "u", "controller": true}}},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "worker", "image": "dask"}}}}
	f, ok, err := Check(set, Object{Kind: profiles.KindPod, JSON: mustJSON(t, pod)})
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, f.Drift)
	require.Equal(t, subdomain('x'), f.Name)
	require.Equal(t, label('z'), f.Cluster.Name)
	require.Equal(t, &owner, f.Cluster.Owner)
	require.Equal(t, []string{ns + "/" + cm + "/" + pol + "@1"}, f.Applied)
	require.Equal(t, ref, f.Policies[0].Ref)
	require.Equal(t, "1", f.Policies[0].AppliedVersion)
	require.Equal(t, OlderPolicyVersion, f.Reason)
	require.True(t, plausibleOwner(f.Cluster.Owner))
}
