package policies

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestURLTemplate(t *testing.T) {
	fields := URLFields{Name: "simple-scheduler", Namespace: "team-a", Cluster: "simple", Group: "",
		Manager: "dask", Role: "scheduler", Port: 8787, Host: "203.0.113.7"}
	cases := []struct {
		name, text, want, err string
		usesHost              bool
	}{
		{name: "go template", text: "https://{{.Cluster}}-{{.Manager}}.{{.Namespace}}.apps.example.com",
			want: "https://simple-dask.team-a.apps.example.com"},
		{name: "helm-safe tokens", text: "https://${cluster}-${manager}.${namespace}.apps.example.com/${role}/${name}",
			want: "https://simple-dask.team-a.apps.example.com/scheduler/simple-scheduler"},
		{name: "host and port", text: "http://${host}:${port}/status", want: "http://203.0.113.7:8787/status", usesHost: true},
		{name: "host through $", text: "http://{{$.Host}}", want: "http://203.0.113.7", usesHost: true},
		{name: "spark-operator aliases", text: "https://{{$appName}}.{{$appNamespace}}.spark.example.com",
			want: "https://simple.team-a.spark.example.com"},
		{name: "spark-operator aliases as tokens", text: "https://${appName}.${appNamespace}.example.com",
			want: "https://simple.team-a.example.com"},
		{name: "functions and conditionals", text: `https://{{.Cluster | upper | lower}}{{if .Group}}-{{.Group}}{{end}}.{{.Group | default "nogroup"}}.example.com{{if eq .Port 8787}}/dashboard{{end}}`,
			want: "https://simple.nogroup.example.com/dashboard"},
		{name: "replace and trim", text: `https://{{replace "-" "." .Name | trimSuffix ".scheduler"}}.example.com`,
			want: "https://simple.example.com"},
		{name: "surrounding space trimmed", text: "  https://${cluster}.example.com\n", want: "https://simple.example.com"},

		{name: "empty", text: " ", err: "empty template"},
		{name: "unknown token", text: "https://${clustr}.example.com", err: "unknown token ${clustr}"},
		{name: "unknown field", text: "https://{{.Clustr}}.example.com", err: "unknown field .Clustr"},
		{name: "parse error", text: "https://{{.Cluster}.example.com", err: "parse:"},
		{name: "range", text: "https://{{range 1000000000}}x{{end}}.example.com", err: "range is not allowed"},
		{name: "define", text: `{{define "a"}}x{{end}}https://a.example.com`, err: "not allowed"},
		{name: "template", text: `https://{{template "url" .}}`, err: "not allowed"},
		{name: "printf", text: `https://{{printf "%0999999999d" 1}}.example.com`, err: `function "printf" is not allowed`},
		{name: "not a URL", text: "${cluster}.example.com", err: "not an absolute URL"},
		{name: "no host", text: "http://:${port}", err: "not an absolute URL"},
		{name: "print doubling is bounded", text: strings.Repeat(`{{$a := print "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}`, 1) +
			"https://" + strings.Repeat("{{$a = print $a $a}}", 10) + "{{$a}}.example.com", err: "over 2048 bytes"},
		{name: "replace growth is bounded", text: `https://{{replace "" "xxxxxxxxxxxxxxxxxxxxxxxx" (replace "" "xxxxxxxxxxxxxxxxxxxxxx" .Name)}}`, err: "over 2048 bytes"},
		{name: "too long", text: "https://" + strings.Repeat("a", MaxURLTemplateBytes), err: "the limit is 4096"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := ParseURLTemplate(c.text)
			if err == nil {
				var got string
				got, err = tmpl.Execute(fields)
				if c.err == "" {
					require.NoError(t, err)
					require.Equal(t, c.want, got)
					require.Equal(t, c.usesHost, tmpl.UsesHost())
					return
				}
			}
			require.ErrorContains(t, err, c.err)
		})
	}
}

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
