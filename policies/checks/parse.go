package checks

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Bounds of what the manager-aware checks read of a tenant's container (reference §8): every
// string, list and parse is capped, so a check costs at most a fixed amount per object whatever
// the object holds.
const (
	// maxCheckArgs is how many items of a container's command and args are read.
	maxCheckArgs = 64
	// maxShellString is how many bytes of one command or args item are tokenised; the managers
	// write theirs in a few hundred (KubeRay's `ray start …` string).
	maxShellString = 8 << 10
	// maxCheckTokens is how many words of a container's command line are kept.
	maxCheckTokens = 512
	// maxCheckEnv is how many env entries of a container are read.
	maxCheckEnv = 256
	// maxSizeValue is the longest size string parsed ("2147483648", "4GiB", "0.5").
	maxSizeValue = 64
	// maxResourcesJSON is the longest `ray start --resources` JSON parsed.
	maxResourcesJSON = 4 << 10
	// maxPropertiesEnv is how many bytes of a properties env variable (FLINK_PROPERTIES) are read.
	maxPropertiesEnv = 16 << 10
)

// shellWords splits a command line as a POSIX shell would split a simple command, enough to
// read the flags the managers write: blanks separate words, ; & | ( ) and newlines separate
// commands (and words), single quotes are literal, double quotes and backslash escape. An
// unterminated quote ends at the end of the string. At most maxShellString bytes of s are read
// and words are appended to out until it holds max.
func shellWords(out []string, s string, max int) []string {
	if len(s) > maxShellString {
		s = s[:maxShellString]
	}
	var b strings.Builder
	inWord := false
	flush := func() {
		if inWord && len(out) < max {
			out = append(out, b.String())
		}
		b.Reset()
		inWord = false
	}
	for i := 0; i < len(s) && len(out) < max; i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')':
			flush()
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				b.WriteString(s[i+1:])
				i = len(s)
				break
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				b.WriteByte(s[i])
			}
		case c == '\\':
			inWord = true
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		default:
			inWord = true
			b.WriteByte(c)
		}
	}
	flush()
	return out
}

// commandWords returns the words of a container's command and args: an item holding blanks (the
// script of `bash -c`) is split as a shell would, others are one word each. Bounded by
// maxCheckArgs items and maxCheckTokens words.
func commandWords(command, args []string) []string {
	var out []string
	n := 0
	for _, list := range [][]string{command, args} {
		for _, s := range list {
			if n == maxCheckArgs || len(out) >= maxCheckTokens {
				return out
			}
			n++
			if strings.ContainsAny(s, " \t\n;&|") {
				out = shellWords(out, s, maxCheckTokens)
			} else {
				out = append(out, s)
			}
		}
	}
	return out
}

// flagValues reads the flags named in names from words: `--flag=value` and `--flag value`. The
// first occurrence wins for each (the managers write each once). A value `$(VAR)` is expanded
// from env (read only then), as the kubelet expands it.
func flagValues(words []string, names []string, env func() map[string]string) map[string]string {
	var out map[string]string
	for i, w := range words {
		if !strings.HasPrefix(w, "--") {
			continue
		}
		name, value, hasValue := strings.Cut(w, "=")
		if !containsString(names, name) {
			continue
		}
		if !hasValue {
			if i+1 >= len(words) {
				continue
			}
			value = words[i+1]
		}
		if out == nil {
			out = make(map[string]string, len(names))
		}
		if _, seen := out[name]; !seen {
			out[name] = expandEnvRef(value, env)
		}
	}
	return out
}

// propertyValues reads the configuration properties named in names from words (`-D name=value`,
// `-Dname=value`, `--conf name=value`) and from a properties text (`name: value` or
// `name=value`, one a line, as FLINK_PROPERTIES holds them). Words win over the text, as
// Flink's dynamic properties win over its configuration.
func propertyValues(words []string, text string, names []string) map[string]string {
	var out map[string]string
	set := func(k, v string) {
		if !containsString(names, k) {
			return
		}
		if out == nil {
			out = make(map[string]string, len(names))
		}
		if _, seen := out[k]; !seen {
			out[k] = strings.TrimSpace(v)
		}
	}
	for i, w := range words {
		var kv string
		switch {
		case (w == "-D" || w == "--conf") && i+1 < len(words):
			kv = words[i+1]
		case strings.HasPrefix(w, "-D") && len(w) > 2:
			kv = w[2:]
		default:
			continue
		}
		if k, v, ok := strings.Cut(kv, "="); ok {
			set(k, v)
		}
	}
	if len(text) > maxPropertiesEnv {
		text = text[:maxPropertiesEnv]
	}
	for line := range strings.SplitSeq(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ek, ev, eok := strings.Cut(line, "="); eok && (!ok || len(ek) < len(k)) {
			k, v, ok = ek, ev, true
		}
		if ok {
			set(strings.TrimSpace(k), v)
		}
	}
	return out
}

// expandEnvRef expands a value that is exactly `$(VAR)` from env, as the kubelet does.
func expandEnvRef(v string, env func() map[string]string) string {
	if strings.HasPrefix(v, "$(") && strings.HasSuffix(v, ")") {
		if x, ok := env()[v[2:len(v)-1]]; ok {
			return x
		}
	}
	return v
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parseSize reads a size with an optional unit suffix: a number (integer, decimal or with an
// exponent) and a unit looked up case-insensitively in units; a bare number is multiplied by
// bare. false for anything else, for NaN, infinities, negatives and sizes beyond 2^62 bytes.
func parseSize(s string, units map[string]float64, bare float64) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxSizeValue {
		return 0, false
	}
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' || s[i] == 'e' && i > 0 && i+1 < len(s) && (s[i+1] >= '0' && s[i+1] <= '9' || s[i+1] == '+' || s[i+1] == '-') || (s[i] == '+' || s[i] == '-') && i > 0 && s[i-1] == 'e') {
		i++
	}
	n, err := strconv.ParseFloat(s[:i], 64)
	if err != nil || n < 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, false
	}
	unit := strings.ToLower(strings.TrimSpace(s[i:]))
	mult := bare
	if unit != "" {
		var ok bool
		if mult, ok = units[unit]; !ok {
			return 0, false
		}
	}
	v := n * mult
	if v >= 1<<62 {
		return 0, false
	}
	return int64(v), true
}

// daskUnits are dask.utils.parse_bytes' units: decimal kB…PB, binary KiB…PiB, their first
// letters (decimal) and the binary ones without the B.
var daskUnits = map[string]float64{
	"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15,
	"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50,
	"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40, "pi": 1 << 50,
}

// jvmUnits are the units of Flink's MemorySize and of Spark's byte strings: all binary.
var jvmUnits = map[string]float64{
	"b": 1, "bytes": 1,
	"k": 1 << 10, "kb": 1 << 10, "kibibytes": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mebibytes": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gibibytes": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tebibytes": 1 << 40,
	"p": 1 << 50, "pb": 1 << 50,
}

// checkQuantity reads a Kubernetes quantity from a decoded JSON scalar (a string or a number).
func checkQuantity(v any) (resource.Quantity, bool) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = string(x)
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return resource.Quantity{}, false
	}
	if s == "" || len(s) > maxSizeValue {
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() < 0 {
		return resource.Quantity{}, false
	}
	return q, true
}

// rayResources reads `ray start --resources` JSON ({"TPU": 4}); nil when it is not a JSON
// object of numbers within maxResourcesJSON bytes.
func rayResources(s string) map[string]float64 {
	s = strings.Trim(strings.TrimSpace(s), "'\"`")
	if s == "" || len(s) > maxResourcesJSON {
		return nil
	}
	var m map[string]float64
	if json.Unmarshal([]byte(s), &m) != nil {
		return nil
	}
	return m
}
