package chart

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/test/cluster"
)

// With default values the chart's webhook objectSelectors select what the managers' profiles
// recognise, each entry for a manager that exists (cluster.WebhookSelectorProblems).
func TestChartWebhookSelectorsFollowTheProfiles(t *testing.T) {
	r, err := renderChart(t, "podpatch", "podpatch-system", nil)
	require.NoError(t, err)
	require.Empty(t, cluster.WebhookSelectorProblems(webhookEntries(t, r.objects)))

	// A manager turned off is a manager whose objects no entry selects: the check sees it.
	r, err = renderChart(t, "podpatch", "podpatch-system", map[string]any{"mutatingWebhook": map[string]any{
		"managers": map[string]any{"flink": map[string]any{"services": map[string]any{"enabled": false}}}}})
	require.NoError(t, err)
	require.NotEmpty(t, cluster.WebhookSelectorProblems(webhookEntries(t, r.objects)))
}
