package urltemplate

import (
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestURLTemplate(t *testing.T) {
	fields := Fields{Name: "simple-scheduler", Namespace: "team-a", Cluster: "simple", Group: "",
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
		{name: "not a URL", text: "${cluster}.example.com", err: "must start with http:// or https://"},
		{name: "no host", text: "http://:${port}", err: "not an absolute URL"},
		{name: "print doubling is bounded", text: strings.Repeat(`{{$a := print "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}`, 1) +
			"https://" + strings.Repeat("{{$a = print $a $a}}", 10) + "{{$a}}.example.com", err: "over 2048 bytes"},
		{name: "replace growth is bounded", text: `https://{{replace "" "xxxxxxxxxxxxxxxxxxxxxxxx" (replace "" "xxxxxxxxxxxxxxxxxxxxxx" .Name)}}`, err: "over 2048 bytes"},
		{name: "too long", text: "https://" + strings.Repeat("a", MaxTemplateBytes), err: "the limit is 4096"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := Parse(c.text)
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

// urlCase is a generated URL and whether podpatch may write it: a prefix (spaces, control and
// invisible characters), a scheme in some case, a separator, a host and a rest.
type urlCase struct {
	prefix, scheme, sep, host, rest string
}

func (c urlCase) String() string { return c.prefix + c.scheme + c.sep + c.host + c.rest }

// allowed is the oracle: exactly an http or https scheme, in any case, directly followed by //
// and a host, with nothing before it.
func (c urlCase) allowed() bool {
	s := strings.ToLower(c.scheme)
	return c.prefix == "" && (s == "http" || s == "https") && c.sep == "://" && c.host != ""
}

var (
	urlPrefixes = []string{"", " ", "  ", "\t", "\n", "\x00", "\x01", "\x1f", "\x7f", "\u00a0", "\ufeff", "\u200b", "\u202e"}
	urlSchemes  = []string{"http", "https", "javascript", "data", "file", "vbscript", "ftp", "ws", "wss", "blob", "about",
		"gopher", "jar", "mailto", "chrome-extension", "view-source", "httpx", "http+unix", "h", "hxxp", "https2"}
	urlSeps  = []string{"://", ":", ":/", ":///", ":\\\\", ":%2f%2f", "//", " ://", ":\t//"}
	urlHosts = []string{"example.com", "203.0.113.7", "[2001:db8::1]", "alert(1)", "", "evil.example.com@example.com", "a b", "é.example.com"}
	urlRests = []string{"", "/", ":8787/status", "/x?y=1#z", "/%0ajavascript:alert(1)", "/\x00", "/a b"}
)

// randomCase flips the case of some letters: JavaScript, HTTPS, hTtP.
func randomCase(rng *rand.Rand, s string) string {
	b := []byte(s)
	for i, c := range b {
		if rng.IntN(2) == 0 && c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func randomURLCase(rng *rand.Rand) urlCase {
	pick := func(l []string) string { return l[rng.IntN(len(l))] }
	c := urlCase{prefix: pick(urlPrefixes), scheme: randomCase(rng, pick(urlSchemes)), sep: pick(urlSeps), host: pick(urlHosts), rest: pick(urlRests)}
	if rng.IntN(8) == 0 { // a scheme of random letters, digits, + . -
		const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-"
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		c.scheme = b.String()
	}
	return c
}

// hostOK says whether a generated host and rest make a URL podpatch writes (printable ASCII,
// no user information).
func (c urlCase) hostOK() bool {
	for _, s := range []string{c.host, c.rest} {
		for i := 0; i < len(s); i++ {
			if s[i] <= ' ' || s[i] >= 0x7f {
				return false
			}
		}
	}
	return !strings.Contains(c.host, "@")
}

// TestCheckExternalURLSchemes: of generated URLs — schemes in every case, leading spaces,
// control and invisible characters, odd separators, hosts with user information — only http
// and https URLs with a host are accepted; every other is refused, and the error says why.
func TestCheckExternalURLSchemes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	accepted := 0
	for range 20000 {
		c := randomURLCase(rng)
		err := CheckURL(c.String())
		if !c.allowed() {
			require.Error(t, err, "%q", c.String())
			continue
		}
		if !c.hostOK() {
			require.Error(t, err, "%q", c.String())
			continue
		}
		require.NoError(t, err, "%q", c.String())
		accepted++
		u, err := url.Parse(c.String())
		require.NoError(t, err)
		require.Contains(t, Schemes, u.Scheme)
	}
	require.Positive(t, accepted)
	for _, s := range []string{"javascript:alert(1)", "JavaScript:alert(1)", " javascript:alert(1)", "\x00javascript:alert(1)",
		"data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==", "file:///etc/passwd", "https:example.com",
		"https://" + strings.Repeat("a", MaxURLBytes), "https://user:pw@example.com/"} {
		require.Error(t, CheckURL(s), "%q", s)
	}
	require.ErrorContains(t, CheckURL("JavaScript://example.com/%0aalert(1)"), "the scheme javascript is not allowed (only http, https)")
}

// TestURLTemplateSchemes: a template is accepted only if it writes http:// or https:// at its
// start, so the same generated URLs as templates are accepted exactly when the oracle says,
// leading spaces aside (Execute trims them); conditionals must write the scheme in each branch.
func TestURLTemplateSchemes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	fields := sampleFields
	for range 5000 {
		c := randomURLCase(rng)
		text := c.String() + "/${cluster}"
		want := c
		if strings.TrimLeft(c.prefix, " \t\n") == "" {
			want.prefix = ""
		}
		tmpl, err := Parse(text)
		if err == nil {
			var got string
			got, err = tmpl.Execute(fields)
			if err == nil {
				require.True(t, want.allowed(), "%q gives %q", text, got)
				require.NoError(t, CheckURL(got))
				continue
			}
		}
		if strings.TrimSpace(text) == "" || !want.allowed() {
			continue
		}
		require.False(t, want.hostOK(), "%q: %v", text, err)
	}
	for _, c := range []struct{ text, err string }{
		{"{{if .Host}}https://{{.Host}}{{else}}javascript:alert(1){{end}}", "must start with http:// or https://"},
		{"{{if .Host}}https://{{.Host}}{{end}}", "must start with http:// or https://"},
		{"{{.Cluster}}://x.example.com", "must start with http:// or https://"},
		{"{{\"https\"}}://x.example.com", "must start with http:// or https://"},
		{"htt{{.Cluster}}p://x.example.com", "must start with http:// or https://"},
		{"{{/* c */}}{{$x := .Cluster}}{{if .Host}}HTTP://{{.Host}}{{else}}https://{{$x}}.example.com{{end}}", ""},
		{"ht{{$x := .Cluster}}tps://{{$x}}.example.com", ""},
	} {
		tmpl, err := Parse(c.text)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.text)
			continue
		}
		require.NoError(t, err, c.text)
		_, err = tmpl.Execute(fields)
		require.NoError(t, err, c.text)
	}
}

// TestURLTemplateInjectedValues: the values a template reads come from labels and statuses
// a user controls (cluster names, load-balancer host names). Whatever they hold, a template
// lint accepts renders a URL CheckURL accepts, with the template's own scheme, or an
// error — never javascript:, data:, a user@host or a control character.
func TestURLTemplateInjectedValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	templates := []string{"https://{{.Cluster}}.example.com/{{.Name}}", "http://${host}:${port}/${cluster}", "https://${cluster}",
		"https://{{.Cluster}}{{.Group}}", "HTTP://{{.Host}}", `https://{{replace "-" ":" .Cluster}}`, "https://{{urlquery .Cluster}}.example.com"}
	pieces := []string{"javascript:", "alert(1)", "//", "@", "evil.example.com", ":", "/", "\x00", "\n", " ", "%0a", "é", "\u202e",
		"data:text/html,", "?", "#", "[", "]", "x", "-", "."}
	value := func() string {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	written := 0
	for _, text := range templates {
		require.NoError(t, Validate(text), text)
		tmpl, err := Parse(text)
		require.NoError(t, err)
		scheme := strings.ToLower(text[:strings.Index(text, ":")])
		for range 3000 {
			f := Fields{Name: value(), Namespace: value(), Cluster: value(), Group: value(), Manager: "dask", Role: "scheduler",
				Port: 8787, Host: value()}
			got, err := tmpl.Execute(f)
			if err != nil {
				continue
			}
			written++
			require.NoError(t, CheckURL(got), "%q from %+v", got, f)
			u, err := url.Parse(got)
			require.NoError(t, err)
			require.Equal(t, scheme, u.Scheme, "%q from %+v", got, f)
			require.Nil(t, u.User)
		}
	}
	require.Positive(t, written)
}

// FuzzURLTemplate: whatever the template and the values it reads, Parse and Execute neither
// panic nor run away, and a URL they give is an http or https URL CheckURL accepts.
func FuzzURLTemplate(f *testing.F) {
	for _, s := range []string{"https://${cluster}.example.com", "{{if .Host}}http://{{.Host}}{{else}}https://x{{end}}",
		" JavaScript:alert(1)", "https://{{replace \"-\" \":\" .Cluster}}", "https://{{print .Cluster .Cluster}}/${port}",
		"http://${host}:${port}", "data:text/html,x"} {
		f.Add(s, "simple", "203.0.113.7")
	}
	f.Fuzz(func(t *testing.T, text, cluster, host string) {
		tmpl, err := Parse(text)
		if err != nil {
			return
		}
		got, err := tmpl.Execute(Fields{Name: cluster, Namespace: "ns", Cluster: cluster, Group: host, Manager: "dask",
			Role: "scheduler", Port: 8787, Host: host})
		if err != nil {
			return
		}
		if err := CheckURL(got); err != nil {
			t.Fatalf("%q rendered %q: %v", text, got, err)
		}
		u, err := url.Parse(got)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			t.Fatalf("%q rendered %q", text, got)
		}
	})
}
