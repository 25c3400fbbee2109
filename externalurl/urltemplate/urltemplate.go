// Package urltemplate is the language of the external URL template (reference §6): Go
// text/template over the fields of a Service (Fields), Helm-safe ${name} tokens, the
// spark-operator's {{$appName}} / {{$appNamespace}} aliases, and the check of what podpatch may
// write as an external URL (CheckURL). It is a leaf: the policy validation (policies) and the
// resolver (externalurl) both import it, and it imports neither.
package urltemplate

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
)

// Bounds of a URL template: the template is written by whoever can annotate a Service, and it
// runs inside the webhook's process, so neither its size nor what it produces may grow
// without limit.
const (
	// MaxTemplateBytes bounds a template's text.
	MaxTemplateBytes = 4096
	// MaxURLBytes bounds a rendered URL and every intermediate value of a template.
	MaxURLBytes = 2048
)

// Fields are the values a URL template may use: the Service, what its profile recognised,
// the port, and the load-balancer or node address when one is known (Host empty otherwise).
// Port is the port that goes with Host: the Service port for a load balancer or no address,
// the node port for a node address.
type Fields struct {
	Name, Namespace, Cluster, Group, Manager, Role string
	Port                                           int32
	Host                                           string
}

// urlTokens maps the Helm-safe ${name} tokens to template fields. appName and appNamespace are
// the spark-operator's uiIngress.urlFormat names.
var urlTokens = map[string]string{
	"name": "Name", "namespace": "Namespace", "cluster": "Cluster", "group": "Group",
	"manager": "Manager", "role": "Role", "port": "Port", "host": "Host",
	"appName": "Cluster", "appNamespace": "Namespace",
}

// urlFields are the fields of Fields, by name.
var urlFields = map[string]bool{"Name": true, "Namespace": true, "Cluster": true, "Group": true,
	"Manager": true, "Role": true, "Port": true, "Host": true}

// sparkOperatorAliases declares the spark-operator's {{$appName}} and {{$appNamespace}}
// variables in front of every template. On line 1, so parse errors keep their line numbers.
const sparkOperatorAliases = "{{$appName := .Cluster}}{{$appNamespace := .Namespace}}"

var tokenPattern = regexp.MustCompile(`\$\{([^}]*)\}`)

// Template is a parsed, checked URL template.
type Template struct {
	tmpl *template.Template
	uses map[string]bool
}

// Parse parses a URL template: Go text/template with the fields of Fields
// ({{.Cluster}}), Helm-safe ${name} tokens for the same fields (${cluster}, ${namespace}, …,
// written so because Helm's own templating consumes {{ }}), and the spark-operator's
// {{$appName}} / {{$appNamespace}}. Only conditionals and a few string functions are allowed:
// no range, no nested templates, no printf, and every value is bounded by MaxURLBytes, so a
// hostile template can neither loop nor exhaust memory. The template writes the scheme, http://
// or https://, as text at its start, and what it renders must pass CheckURL.
func Parse(text string) (*Template, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("empty template")
	}
	if len(text) > MaxTemplateBytes {
		return nil, fmt.Errorf("template of %d bytes: the limit is %d", len(text), MaxTemplateBytes)
	}
	var unknown []string
	expanded := tokenPattern.ReplaceAllStringFunc(text, func(tok string) string {
		name := tok[2 : len(tok)-1]
		f, ok := urlTokens[name]
		if !ok {
			unknown = append(unknown, tok)
			return tok
		}
		return "{{." + f + "}}"
	})
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown token %s: known are %s", strings.Join(unknown, ", "), knownTokens())
	}
	t, err := template.New("url").Funcs(urlFuncs).Parse(sparkOperatorAliases + expanded)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if len(t.Templates()) > 1 {
		return nil, errors.New("define, block and template actions are not allowed")
	}
	ut := &Template{tmpl: t, uses: map[string]bool{}}
	if err := ut.check(t.Root); err != nil {
		return nil, err
	}
	if !writesScheme(t.Root) {
		return nil, errors.New("the URL must start with http:// or https://, written in the template (in every branch of a leading conditional), so that no value can change its scheme")
	}
	return ut, nil
}

func knownTokens() string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(urlTokens)) {
		out = append(out, "${"+k+"}")
	}
	return strings.Join(out, ", ")
}

// UsesHost says whether the template reads the load-balancer or node address, so it cannot be
// rendered before one is known.
func (t *Template) UsesHost() bool { return t.uses["Host"] }

// UsesPort says whether the template reads the port.
func (t *Template) UsesPort() bool { return t.uses["Port"] }

// Execute renders the template and checks that the result is an absolute URL.
func (t *Template) Execute(f Fields) (string, error) {
	w := &boundedWriter{}
	if err := t.tmpl.Execute(w, f); err != nil {
		return "", fmt.Errorf("execute: %w", err)
	}
	out := strings.TrimSpace(w.b.String())
	if err := checkRendered(out); err != nil {
		return "", err
	}
	return out, nil
}

// checkRendered accepts what CheckURL accepts, naming the template in its error.
func checkRendered(s string) error {
	if s == "" {
		return errors.New("the template renders an empty URL")
	}
	if err := CheckURL(s); err != nil {
		return fmt.Errorf("the template renders %w", err)
	}
	return nil
}

// Schemes are the schemes an external URL may have (reference §6). The URL is written where
// users click it — the Service's annotations, Events on it and on its owner, dashboards that
// show them —, so javascript:, data:, file: and every other scheme are refused.
var Schemes = []string{"http", "https"}

// Error is the error of CheckURL: a URL that podpatch does not write. A template
// whose rendering gives one fails with it (wrapped), so that a caller can tell a URL the
// values made unsafe from a template that does not work.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

func urlError(format string, args ...any) error { return &Error{msg: fmt.Sprintf(format, args...)} }

// CheckURL accepts what podpatch may write as an external URL: at most MaxURLBytes of
// printable ASCII without spaces (an international host name is written in punycode), that
// url.Parse reads as an absolute http or https URL with a host and without user information
// (https://trusted.example.com@elsewhere.example.net reads as a host it is not). Its error
// quotes the URL (clipped), escaping what is not printable.
func CheckURL(s string) error {
	q := quoteURL(s)
	if len(s) > MaxURLBytes {
		return urlError("%s, a URL of %d bytes: the limit is %d", q, len(s), MaxURLBytes)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return urlError("%s: a URL is printable ASCII without spaces or control characters (an international host name is written in punycode)", q)
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return urlError("%s, not a URL: %v", q, errors.Unwrap(err))
	}
	if u.Scheme != "" && !slices.Contains(Schemes, u.Scheme) { // url.Parse lowercases the scheme
		return urlError("%s: the scheme %s is not allowed (only %s)", q, u.Scheme, strings.Join(Schemes, ", "))
	}
	if u.Scheme == "" || u.Opaque != "" || u.Hostname() == "" {
		return urlError("%s, not an absolute URL (http://host… or https://host…)", q)
	}
	if u.User != nil {
		return urlError("%s: user information (user@host) is not allowed in an external URL", q)
	}
	return nil
}

// quoteURL quotes a URL for an error message, its first 256 bytes at most.
func quoteURL(s string) string {
	const n = 256
	if len(s) > n {
		return strconv.Quote(strings.ToValidUTF8(s[:n], "")) + "…"
	}
	return strconv.Quote(s)
}

// writesScheme reports whether every output of a template begins with http:// or https://
// written in it as text (case aside, after leading space, which Execute trims): then no value
// a template reads — a cluster name from a label, a load balancer's host name — can give the
// URL another scheme. Actions that only declare variables, and comments, write nothing; a
// conditional at the start must write the scheme in each of its branches, else included.
func writesScheme(l *parse.ListNode) bool {
	if l == nil {
		return false
	}
	var text strings.Builder
	for _, n := range l.Nodes {
		switch n := n.(type) {
		case *parse.CommentNode:
			continue
		case *parse.ActionNode:
			if n.Pipe != nil && len(n.Pipe.Decl) > 0 {
				continue
			}
			return false
		case *parse.TextNode:
			text.Write(n.Text)
			prefix := strings.ToLower(strings.TrimLeft(text.String(), " \t\r\n"))
			if strings.HasPrefix(prefix, "http://") || strings.HasPrefix(prefix, "https://") {
				return true
			}
			if !strings.HasPrefix("https://", prefix) && !strings.HasPrefix("http://", prefix) {
				return false
			}
		case *parse.IfNode:
			if strings.TrimSpace(text.String()) != "" {
				return false
			}
			return writesScheme(n.List) && writesScheme(n.ElseList)
		case *parse.WithNode:
			if strings.TrimSpace(text.String()) != "" {
				return false
			}
			return writesScheme(n.List) && writesScheme(n.ElseList)
		default:
			return false
		}
	}
	return false
}

// check walks the parse tree: it keeps out what can loop or recurse and records which
// fields the template reads.
func (t *Template) check(n parse.Node) error {
	switch n := n.(type) {
	case nil:
		return nil
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := t.check(c); err != nil {
				return err
			}
		}
		return nil
	case *parse.TextNode, *parse.CommentNode, *parse.DotNode, *parse.StringNode,
		*parse.NumberNode, *parse.BoolNode, *parse.NilNode:
		return nil
	case *parse.ActionNode:
		return t.check(n.Pipe)
	case *parse.PipeNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Cmds {
			if err := t.check(c); err != nil {
				return err
			}
		}
		return nil
	case *parse.CommandNode:
		for _, a := range n.Args {
			if err := t.check(a); err != nil {
				return err
			}
		}
		return nil
	case *parse.IdentifierNode:
		if _, ok := urlFuncs[n.Ident]; !ok && !urlBuiltins[n.Ident] {
			return fmt.Errorf("function %q is not allowed in a URL template: use %s", n.Ident, allowedFuncs())
		}
		return nil
	case *parse.FieldNode:
		return t.field(n.Ident)
	case *parse.VariableNode:
		if len(n.Ident) > 1 && n.Ident[0] == "$" {
			return t.field(n.Ident[1:])
		}
		return nil
	case *parse.ChainNode:
		return errors.New("field chains are not allowed in a URL template")
	case *parse.IfNode:
		return t.branch(&n.BranchNode)
	case *parse.WithNode:
		return t.branch(&n.BranchNode)
	case *parse.RangeNode:
		return errors.New("range is not allowed in a URL template")
	case *parse.TemplateNode:
		return errors.New("define, block and template actions are not allowed in a URL template")
	default:
		return fmt.Errorf("%q is not allowed in a URL template", n.String())
	}
}

func (t *Template) branch(b *parse.BranchNode) error {
	for _, c := range []parse.Node{b.Pipe, b.List, b.ElseList} {
		if err := t.check(c); err != nil {
			return err
		}
	}
	return nil
}

func (t *Template) field(idents []string) error {
	if !urlFields[idents[0]] {
		return fmt.Errorf("unknown field .%s: known are %s", idents[0], knownFields())
	}
	if len(idents) > 1 {
		return fmt.Errorf(".%s has no fields", strings.Join(idents, "."))
	}
	t.uses[idents[0]] = true
	return nil
}

func knownFields() string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(urlFields)) {
		out = append(out, "."+k)
	}
	return strings.Join(out, " ")
}

// urlBuiltins are text/template's builtins a URL template may call: they only compare and
// choose, so no value grows.
var urlBuiltins = map[string]bool{"and": true, "or": true, "not": true, "eq": true, "ne": true,
	"lt": true, "le": true, "gt": true, "ge": true, "len": true}

// urlFuncs are the other functions a URL template may call. print and urlquery override the
// builtins of the same name so that no value can outgrow MaxURLBytes; the builtins left out
// (printf with its widths, html, js, index, slice, call) are refused by check.
var urlFuncs = template.FuncMap{
	"print":      boundedPrint,
	"urlquery":   func(s string) (string, error) { return bounded(url.QueryEscape(s)) },
	"lower":      strings.ToLower,
	"upper":      strings.ToUpper,
	"trimPrefix": func(prefix, s string) string { return strings.TrimPrefix(s, prefix) },
	"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
	"replace":    boundedReplace,
	"default": func(def, v any) any {
		if v == nil || v == "" {
			return def
		}
		return v
	},
}

// allowedFuncs lists what a URL template may call, for error messages.
func allowedFuncs() string {
	names := slices.Collect(maps.Keys(urlBuiltins))
	names = append(names, slices.Collect(maps.Keys(urlFuncs))...)
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func bounded(s string) (string, error) {
	if len(s) > MaxURLBytes {
		return "", fmt.Errorf("a value of %d bytes: the limit is %d", len(s), MaxURLBytes)
	}
	return s, nil
}

// boundedPrint is fmt.Sprint, refused before it is built when the arguments are too long.
func boundedPrint(args ...any) (string, error) {
	n := len(args) // at most one space between operands
	for _, a := range args {
		if s, ok := a.(string); ok {
			n += len(s)
		} else {
			n += 24 // numbers, booleans
		}
	}
	if n > MaxURLBytes {
		return "", fmt.Errorf("a value over %d bytes", MaxURLBytes)
	}
	return fmt.Sprint(args...), nil
}

// boundedReplace is strings.ReplaceAll(s, old, new) that refuses, before building it, a result
// over MaxURLBytes.
func boundedReplace(old, new, s string) (string, error) {
	n := len(s) + 1 // "" matches between every rune and at both ends; len+1 bounds it
	if old != "" {
		n = strings.Count(s, old)
	}
	if len(s)+n*(len(new)-len(old)) > MaxURLBytes {
		return "", fmt.Errorf("replace would give a value over %d bytes", MaxURLBytes)
	}
	return strings.ReplaceAll(s, old, new), nil
}

// boundedWriter fails once a template has written MaxURLBytes.
type boundedWriter struct{ b strings.Builder }

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > MaxURLBytes {
		return 0, fmt.Errorf("the URL would exceed %d bytes", MaxURLBytes)
	}
	return w.b.Write(p)
}

// sampleFields are what lint renders a template with: every field set, a documentation
// address (RFC 5737) as the host.
var sampleFields = Fields{Name: "service", Namespace: "namespace", Cluster: "cluster", Group: "group",
	Manager: "dask", Role: "scheduler", Port: 8787, Host: "203.0.113.10"}

// Validate parses a template and renders it with sample values, so that lint and the
// validating webhook catch what would fail on every Service.
func Validate(text string) error {
	t, err := Parse(text)
	if err != nil {
		return err
	}
	_, err = t.Execute(sampleFields)
	return err
}
