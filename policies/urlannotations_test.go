package policies

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateExternalURLAnnotations(t *testing.T) {
	errs := validateExternalURLAnnotations(map[string]string{
		ProvideExternalURLAnnotation:       "yes",
		ExternalURLTemplateAnnotation:      "https://${nope}.example.com",
		ExternalURLPortAnnotation:          "Not_A_Port",
		ExternalURLAnnotation:              "https://forged.example.com",
		SparkResolvedExternalURIAnnotation: "",
		"unrelated":                        "{{",
	}, nil)
	var got []string
	for _, e := range errs {
		got = append(got, e.Field+": "+e.Type.String())
	}
	require.Equal(t, []string{
		"[podpatch.io/external-url]: Forbidden",
		"[podpatch.io/external-url-port]: Invalid value",
		"[podpatch.io/external-url-template]: Invalid value",
		"[podpatch.io/provide-external-url]: Invalid value",
		"[spark-job.alpha.apache.org/resolvedExternalUri]: Forbidden",
	}, got)
	require.Empty(t, validateExternalURLAnnotations(map[string]string{
		ProvideExternalURLAnnotation:  "true",
		ExternalURLTemplateAnnotation: "https://${cluster}.example.com",
		ExternalURLPortAnnotation:     "8787",
	}, nil))
	require.Empty(t, validateExternalURLAnnotations(map[string]string{ExternalURLPortAnnotation: "http-dashboard"}, nil))
}
