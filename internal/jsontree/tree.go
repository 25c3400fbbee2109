package jsontree

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// The object being patched is decoded lazily: an object or list is decoded one level at a time,
// when the merge first looks inside it, and its members stay raw JSON (json.RawMessage) until
// then. Scalars are decoded with their parent. Subtrees no policy touches are never decoded,
// and the JSONPatch is computed by walking only what was decoded (jsonpatch.go).

// Expand decodes raw JSON one level: objects to map[string]any and lists to []any whose
// object and list members stay raw (sub-slices of the input, not copies); scalars fully. The
// input was validated once, as a whole, so the scan here does not validate again. Anything
// that is not raw JSON is returned as it is.
func Expand(v any) any {
	raw, ok := v.(json.RawMessage)
	if !ok {
		return v
	}
	raw = bytes.TrimSpace(raw)
	switch firstByte(raw) {
	case '{':
		out := make(map[string]any, 8)
		i := 1
		for {
			i = skipSpace(raw, i)
			if i >= len(raw) || raw[i] == '}' {
				return out
			}
			if raw[i] == ',' {
				i = skipSpace(raw, i+1)
			}
			kEnd := skipValue(raw, i)
			key := unquoteKey(raw[i:kEnd])
			i = skipSpace(raw, kEnd)
			if i < len(raw) && raw[i] == ':' {
				i = skipSpace(raw, i+1)
			}
			vEnd := skipValue(raw, i)
			out[key] = scalarOrRaw(raw[i:vEnd])
			i = vEnd
		}
	case '[':
		out := make([]any, 0, 4)
		i := 1
		for {
			i = skipSpace(raw, i)
			if i >= len(raw) || raw[i] == ']' {
				return out
			}
			if raw[i] == ',' {
				i = skipSpace(raw, i+1)
			}
			end := skipValue(raw, i)
			out = append(out, scalarOrRaw(raw[i:end]))
			i = end
		}
	default:
		return scalarOrRaw(raw)
	}
}

// scalarOrRaw decodes a scalar and keeps objects and lists raw.
func scalarOrRaw(r json.RawMessage) any {
	switch firstByte(r) {
	case '{', '[':
		return r
	case '"':
		if len(r) >= 2 {
			if v, ok := commonValues[string(r[1:len(r)-1])]; ok {
				return v
			}
		}
		return unquote(r)
	case 't':
		return true
	case 'f':
		return false
	case 'n':
		return nil
	default:
		return json.Number(r)
	}
}

// unquote decodes a JSON string; strings without escapes (and valid UTF-8, which
// encoding/json would otherwise repair) are copied directly.
func unquote(r []byte) string {
	if len(r) >= 2 && bytes.IndexByte(r, '\\') < 0 && utf8.Valid(r) {
		return string(r[1 : len(r)-1])
	}
	var s string
	if json.Unmarshal(r, &s) != nil {
		return string(r)
	}
	return s
}

// unquoteKey is unquote for a member name: the names of Kubernetes objects' fields are shared
// strings rather than a copy per decoded member.
func unquoteKey(r []byte) string {
	if len(r) >= 2 {
		if k, ok := fieldNames[string(r[1:len(r)-1])]; ok {
			return k
		}
	}
	return unquote(r)
}

// commonValues are string values frequent in Pods and Services (Kubernetes' enumerations and
// defaults, all plain ASCII), boxed once: decoding one costs no allocation, where a copy of the
// string and its box in an interface cost two (on the hot path of every admission).
var commonValues = func() map[string]any {
	values := strings.Fields(`Always IfNotPresent Never OnFailure TCP UDP SCTP File FallbackToLogsOnError
		/dev/termination-log ClusterFirst ClusterFirstWithHostNet Default None default-scheduler
		Exists Equal NoSchedule PreferNoSchedule NoExecute PreemptLowerPriority
		RuntimeDefault Unconfined Localhost In NotIn DoesNotExist Gt Lt ClusterIP NodePort
		LoadBalancer ExternalName SingleStack PreferDualStack RequireDualStack IPv4 IPv6 Cluster
		Local HTTP HTTPS http https kubernetes.io/hostname topology.kubernetes.io/zone
		ScheduleAnyway DoNotSchedule Honor Ignore v1 Pod Service true false ALL`)
	m := make(map[string]any, len(values))
	for _, v := range values {
		m[v] = v
	}
	return m
}()

// fieldNames are the member names most frequent in Pods and Services (all plain ASCII, so
// unquote would return them as they are).
var fieldNames = func() map[string]string {
	names := strings.Fields(`apiVersion kind metadata name namespace generateName labels annotations
		ownerReferences uid controller blockOwnerDeletion spec status containers initContainers
		ephemeralContainers image imagePullPolicy command args workingDir env value valueFrom
		fieldRef fieldPath secretKeyRef configMapKeyRef key optional envFrom ports containerPort
		hostPort protocol resources requests limits cpu memory volumeMounts mountPath readOnly
		subPath volumes emptyDir configMap secret secretName defaultMode items path
		persistentVolumeClaim claimName livenessProbe readinessProbe startupProbe httpGet tcpSocket
		exec port scheme initialDelaySeconds periodSeconds timeoutSeconds failureThreshold
		successThreshold lifecycle securityContext runAsUser runAsGroup runAsNonRoot fsGroup
		privileged capabilities drop add allowPrivilegeEscalation readOnlyRootFilesystem
		seccompProfile type terminationMessagePath terminationMessagePolicy stdin tty
		restartPolicy dnsPolicy enableServiceLinks preemptionPolicy priority priorityClassName
		schedulerName serviceAccountName serviceAccount automountServiceAccountToken nodeName
		nodeSelector affinity nodeAffinity podAffinity podAntiAffinity tolerations operator effect
		tolerationSeconds terminationGracePeriodSeconds hostname subdomain hostNetwork
		imagePullSecrets topologySpreadConstraints topologyKey whenUnsatisfiable maxSkew
		labelSelector matchLabels matchExpressions values selector clusterIP clusterIPs
		ipFamilies ipFamilyPolicy sessionAffinity targetPort nodePort internalTrafficPolicy
		externalTrafficPolicy projected sources serviceAccountToken expirationSeconds
		downwardAPI resourceFields`)
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = n
	}
	return m
}()

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the (valid) JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
			j++
		}
		return j
	}
}

// skipString returns the end of the string starting at b[i] (a quote): the next quote that
// an even number of backslashes precede.
func skipString(b []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		j += k
		escapes := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			escapes++
		}
		if escapes%2 == 0 {
			return j + 1
		}
		j++
	}
}

// Tree tracks the lazy decoding of one object: for every node it decodes, the node's
// original members, so that the JSONPatch is computed without decoding anything twice.
type Tree struct {
	origins map[*byte]any
	indexes map[indexKey]*Index
	// keyed counts the list items ever indexed (Indexed).
	keyed int
}

// Indexed counts the list items this tree ever indexed: linear merging keeps it within the
// items of the object's lists and the patches'.
func (t *Tree) Indexed() int { return t.keyed }

// New returns a tree for decoding one object.
func New() *Tree {
	return &Tree{origins: make(map[*byte]any, 16)}
}

// Decode expands raw JSON one level and remembers the original members.
func (t *Tree) Decode(raw json.RawMessage) any {
	v := Expand(raw)
	if len(raw) > 0 {
		switch x := v.(type) {
		case map[string]any:
			t.origins[&raw[0]] = maps.Clone(x)
		case []any:
			t.origins[&raw[0]] = slices.Clone(x)
		}
	}
	return v
}

// original returns the original members of a raw node, decoding it if the merge never did.
func (t *Tree) original(v any) any {
	if raw, ok := v.(json.RawMessage); ok && len(raw) > 0 {
		if o, seen := t.origins[&raw[0]]; seen {
			return o
		}
	}
	return Expand(v)
}

// Get returns m[k] decoded one level, storing the decoded form back.
func (t *Tree) Get(m map[string]any, k string) (any, bool) {
	v, ok := m[k]
	if !ok {
		return nil, false
	}
	if raw, isRaw := v.(json.RawMessage); isRaw {
		v = t.Decode(raw)
		m[k] = v
	}
	return v, true
}

// GetMap returns m[k] when it is an object, decoded one level.
func (t *Tree) GetMap(m map[string]any, k string) (map[string]any, bool) {
	v, _ := t.Get(m, k)
	out, ok := v.(map[string]any)
	return out, ok
}

// At returns l[i] decoded one level, storing the decoded form back.
func (t *Tree) At(l []any, i int) any {
	if raw, isRaw := l[i].(json.RawMessage); isRaw {
		l[i] = t.Decode(raw)
	}
	return l[i]
}

// ExpandAll decodes a tree completely, in place where it can, and returns it.
func ExpandAll(v any) any {
	switch t := Expand(v).(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = ExpandAll(x)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = ExpandAll(x)
		}
		return t
	default:
		return t
	}
}

// firstByte is the first byte of JSON text after white space, 0 if none.
func firstByte(r []byte) byte {
	r = bytes.TrimLeft(r, " \t\r\n")
	if len(r) == 0 {
		return 0
	}
	return r[0]
}

// Index maps the keys of a list's items to the position of the first item with that key, so
// that merging a patch list into an object list is linear in both.
type Index struct {
	key Key
	// Pos is the position of the first item with each key.
	Pos map[string]int
	// Dups are the positions of the later items of a key that more than one item has (nil
	// when none has): the API server lets some keyed lists carry duplicates (env,
	// imagePullSecrets, hostAliases, ports), and the kubelet reads the last of an env name.
	Dups map[string][]int
	n    int // items indexed
}

// All calls f with the position of every item with key k, the first first.
func (x *Index) All(k string, f func(i int)) {
	i, ok := x.Pos[k]
	if !ok {
		return
	}
	f(i)
	for _, j := range x.Dups[k] {
		f(j)
	}
}

// dup records a later item of a key already indexed.
func (x *Index) dup(k string, i int) {
	if x.Dups == nil {
		x.Dups = map[string][]int{}
	}
	x.Dups[k] = append(x.Dups[k], i)
}

// Has reports whether an item with key k is indexed.
func (x *Index) Has(k string) bool {
	_, ok := x.Pos[k]
	return ok
}

// Add records an item appended at position i.
func (x *Index) Add(k string, i int) {
	if _, dup := x.Pos[k]; !dup {
		x.Pos[k] = i
	} else {
		x.dup(k, i)
	}
	x.n = i + 1
}

// extend indexes the items of list not indexed yet.
func (x *Index) extend(t *Tree, list []any) {
	t.keyed += len(list) - x.n
	for i := x.n; i < len(list); i++ {
		var k string
		switch item := list[i].(type) {
		case json.RawMessage:
			var ok bool
			if k, ok = x.key.OfRaw(item); !ok {
				continue
			}
		case map[string]any:
			k = x.key.Of(item)
		default:
			continue
		}
		if !x.Has(k) {
			x.Pos[k] = i
		} else {
			x.dup(k, i)
		}
	}
	x.n = len(list)
}

// indexKey identifies a list of the object by its backing array, and the kind of key.
type indexKey struct {
	first *any
	name  string
}

// Index returns the index of a list of the object under a key function named name, built once
// per apply (every policy of every layer merges into the same lists) and extended with the
// items appended since.
func (t *Tree) Index(list []any, name string, key Key) *Index {
	if len(list) > 0 {
		if x := t.indexes[indexKey{&list[0], name}]; x != nil && x.n <= len(list) {
			x.extend(t, list)
			return x
		}
	}
	x := &Index{key: key, Pos: make(map[string]int, len(list))}
	x.extend(t, list)
	t.Keep(list, name, x)
	return x
}

// Keep remembers an index for a list, which appends may have moved.
func (t *Tree) Keep(list []any, name string, x *Index) {
	if len(list) > 0 {
		if t.indexes == nil {
			t.indexes = make(map[indexKey]*Index)
		}
		t.indexes[indexKey{&list[0], name}] = x
	}
}

// eachMember calls f with the name and raw value of every member of a raw JSON object; the
// name is unquoted only when it has escapes or is not valid UTF-8, so that it reads as Expand
// reads it.
func eachMember(raw []byte, f func(name, value []byte)) {
	eachMemberWhile(raw, func(name, value []byte) bool { f(name, value); return true })
}

// eachMemberWhile is eachMember until f returns false: the rest of the object is not scanned.
func eachMemberWhile(raw []byte, f func(name, value []byte) bool) {
	raw = bytes.TrimSpace(raw)
	for i := 1; ; {
		i = skipSpace(raw, i)
		if i >= len(raw) || raw[i] == '}' {
			return
		}
		if raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
		kEnd := skipValue(raw, i)
		name := raw[i:kEnd]
		if len(name) >= 2 {
			name = name[1 : len(name)-1]
		}
		if bytes.IndexByte(name, '\\') >= 0 || !utf8.Valid(name) {
			name = []byte(unquote(raw[i:kEnd]))
		}
		i = skipSpace(raw, kEnd)
		if i < len(raw) && raw[i] == ':' {
			i = skipSpace(raw, i+1)
		}
		vEnd := skipValue(raw, i)
		if !f(name, raw[i:vEnd]) {
			return
		}
		i = vEnd
	}
}

// appendCanonical appends the canonical form of raw JSON — what encodeJSON writes for it once
// decoded: object members sorted by name, strings re-quoted — without decoding it into maps.
func appendCanonical(b, raw []byte) []byte {
	raw = bytes.TrimSpace(raw)
	switch firstByte(raw) {
	case '{':
		type member struct {
			name  string
			value []byte
		}
		var ms []member
		eachMember(raw, func(name, value []byte) {
			for i := range ms { // a repeated name: the last wins, as decoding does
				if ms[i].name == string(name) {
					ms[i].value = value
					return
				}
			}
			ms = append(ms, member{string(name), value})
		})
		slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.name, b.name) })
		b = append(b, '{')
		for i, m := range ms {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, m.name)
			b = append(b, ':')
			b = appendCanonical(b, m.value)
		}
		return append(b, '}')
	case '[':
		b = append(b, '[')
		for i, j := 1, 0; ; j++ {
			i = skipSpace(raw, i)
			if i >= len(raw) || raw[i] == ']' {
				return append(b, ']')
			}
			if raw[i] == ',' {
				i = skipSpace(raw, i+1)
			}
			end := skipValue(raw, i)
			if j > 0 {
				b = append(b, ',')
			}
			b = appendCanonical(b, raw[i:end])
			i = end
		}
	case '"':
		return AppendString(b, unquote(raw))
	default:
		return append(b, raw...)
	}
}
