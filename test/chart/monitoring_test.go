package chart

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/podpatch/podpatch/test/cluster"
)

// pendingMetrics are used by the dashboard but exported by a change that is not in this tree
// yet (the request budget). The test fails once one is exported, so that it leaves this list.
var pendingMetrics = map[string]string{
	"podpatch_budget_exceeded_total": "the request budget (--request-budget)",
}

// TestRulesFile checks files/prometheus-rules.yaml as Prometheus loads a rule file: known
// fields only, every expression and template valid.
func TestRulesFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "files", "prometheus-rules.yaml"))
	require.NoError(t, err)
	groups, errs := rulefmt.Parse(b, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	require.Empty(t, errs)
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			require.NotEmpty(t, r.Labels["severity"], r.Alert)
		}
	}
	require.ElementsMatch(t, []string{"PodpatchWebhookFailingOpen", "PodpatchInvalidPolicies", "PodpatchCertificateExpiringSoon",
		"PodpatchPolicyGenerationsDiffer", "PodpatchNoReadyReplica", "PodpatchMemoryNearLimit"}, alerts)
}

// requireMonitoringMetrics checks that every metric a dashboard panel, a dashboard variable or
// an alert uses is exported by podpatch (the release's p and a second podpatch that serves an
// invalid policy, so that warnings are counted) or by kube-apiserver, which has called
// podpatch's webhooks and failed open before podpatch ran.
func requireMonitoringMetrics(t *testing.T, p *cluster.Podpatch) {
	t.Helper()
	used := map[string][]string{} // metric -> where it is used
	for where, expr := range monitoringExpressions(t) {
		for _, name := range metricNames(t, expr) {
			used[name] = append(used[name], where)
		}
	}
	require.NotEmpty(t, used)

	exported := map[string]bool{}
	for _, body := range [][]byte{scrape(t, "http://"+p.MetricsAddr+"/metrics"), scrape(t, "http://"+warningPodpatch(t).MetricsAddr+"/metrics"), apiserverMetrics(t)} {
		for name, typ := range metricFamilies(t, body) {
			exported[name] = true
			if typ == "histogram" || typ == "summary" {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					exported[name+suffix] = true
				}
			}
		}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range used {
			if !yield(k) {
				return
			}
		}
	}) {
		if by, pending := pendingMetrics[name]; pending {
			if exported[name] {
				t.Errorf("%s is exported now: remove it from pendingMetrics", name)
			} else {
				t.Logf("%s (used by %s) is provided by another change: %s", name, strings.Join(used[name], ", "), by)
			}
			continue
		}
		require.True(t, exported[name], "%s, used by %s, is exported neither by podpatch nor by kube-apiserver", name, strings.Join(used[name], ", "))
	}
	t.Logf("%d metrics used by the dashboard and alerts", len(used))
}

// monitoringExpressions returns every PromQL expression of the dashboard (panels and
// variables) and of the rules, keyed by where it is.
func monitoringExpressions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	b, err := os.ReadFile(filepath.Join(chartDir, "files", "grafana-dashboard.json"))
	require.NoError(t, err)
	var dash struct {
		Panels     []dashboardPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(b, &dash))
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out[fmt.Sprintf("panel %q (%s)", p.Title, tg.RefID)] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	labelValues := regexp.MustCompile(`^label_values\(\s*([^,]+),\s*\w+\s*\)$`)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		s, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(s)
		require.NotNil(t, m, "variable %s: %q is not label_values(selector, label)", v.Name, s)
		out["variable "+v.Name] = m[1]
	}
	rb, err := os.ReadFile(filepath.Join(chartDir, "files", "prometheus-rules.yaml"))
	require.NoError(t, err)
	groups, errs := rulefmt.Parse(rb, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	require.Empty(t, errs)
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert] = r.Expr
		}
	}
	return out
}

type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// grafanaVariables are replaced by values PromQL can parse.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "${namespace}", ".*", "$namespace", ".*")

// metricNames parses a PromQL expression (after Grafana's variables) and returns the metric
// names it selects.
func metricNames(t *testing.T, expr string) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVariables.Replace(expr))
	require.NoError(t, err, expr)
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			require.NotEmpty(t, vs.Name, "%s: every selector names its metric", expr)
			names = append(names, vs.Name)
		}
		return nil
	})
	require.NotEmpty(t, names, expr)
	return names
}

func scrape(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return b
}

func apiserverMetrics(t *testing.T) []byte {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restConfig)
	require.NoError(t, err)
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(t, err)
	return raw
}

// metricFamilies returns the metric families of an exposition and their types.
func metricFamilies(t *testing.T, body []byte) map[string]string {
	t.Helper()
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err)
	out := map[string]string{}
	for name, f := range families {
		if len(f.GetMetric()) > 0 {
			out[name] = strings.ToLower(f.GetType().String())
		}
	}
	return out
}

// warningPodpatch runs a podpatch that serves a policy directory holding an invalid policy
// ConfigMap and sends it one AdmissionReview of a Pod in that namespace, so that its admission
// warning is counted. It stops when the test ends.
func warningPodpatch(t *testing.T) *cluster.Podpatch {
	t.Helper()
	policies := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(policies, "broken.yaml"), []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: broken, namespace: default, labels: {podpatch.io/policy: "true"}}
data:
  p.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: broken}
    spec: {template: {spec: {tolerations: [{key: spot, operator: Exits}]}}}
`), 0o600))
	certDir := t.TempDir()
	ca, err := cluster.ServingCerts(certDir)
	require.NoError(t, err)
	p, err := cluster.StartPodpatch(podpatchBin, kubeconfig, certDir, 0, "--policy-dir", policies)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("podpatch: %v\n%s", err, p.Output)
		}
	})
	pod, err := json.Marshal(daskWorker("warned"))
	require.NoError(t, err)
	review := fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1",`+
		`"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},`+
		`"namespace":"default","operation":"CREATE","object":%s}}`, pod)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca))
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Post(p.URL()+"/mutate", "application/json", strings.NewReader(review))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(body), "fail to compile", "the answer carries the invalid-policy warning")
	return p
}
