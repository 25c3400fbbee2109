package policies

// Every front end of the CLIs (lint, render -f, test, diff -f, --policy-dir) reads
// through SplitDocuments, bounded as the webhook is: a document beyond MaxYAMLNodes is refused
// before go-yaml composes its tree, and a JSON one before encoding/json decodes it.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	jsonstrict "sigs.k8s.io/json"

	"github.com/podpatch/podpatch/internal/hostiletest"
	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/internal/yamljson"
)

// frontEndShapes are the hostile-input shapes (files of a few megabytes that a parser would
// turn into a gigabyte tree), each filling a file (MaxFileBytes) with far more than
// MaxYAMLNodes nodes.
func frontEndShapes() map[string]string {
	size := MaxFileBytes - 64
	var mapping strings.Builder
	for i := 0; mapping.Len() < size-32; i++ {
		mapping.WriteString("k" + strconv.Itoa(i) + ": 0\n")
	}
	return map[string]string{
		"YAML flow list":              "x: [" + strings.Repeat("0,", size/2) + "0]\n",
		"YAML block list":             strings.Repeat("- 0\n", size/4),
		"YAML nested flow maps":       "x: [" + strings.Repeat("{a: {b: 0}},", size/12) + "0]\n",
		"YAML long mapping":           mapping.String(),
		"YAML mix":                    strings.Repeat("- a: [0, {b: 0}]\n  c: 0 # d\n", size/28),
		"YAML after a block scalar":   "a: |\n  - 0\n  - 0\nb:\n" + strings.Repeat("- [0, 0]\n", size/9),
		"YAML pairs in a flow list":   "x: [" + strings.Repeat("a: 0,", size/5) + "0]\n",
		"JSON list":                   "[" + strings.Repeat("0,", size/2) + "0]",
		"JSON pod":                    `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i","args":[` + strings.Repeat(`{"a":0},`, size/8-16) + `0]}]}}`,
		"JSON after a small document": "{}\n[" + strings.Repeat("0,", size/2-4) + "0]",
	}
}

// TestFrontEndShapesAreBounded reads each shape as lint, render, test and diff read a file
// (SplitDocuments): refused, naming the document, the line and the limit, having allocated a
// twice its text beyond what reading and splitting it takes, where go-yaml's tree alone took a gigabyte
// (go-yaml composes a few hundred bytes per node; encoding/json's maps as much).
func TestFrontEndShapesAreBounded(t *testing.T) {
	for name, text := range frontEndShapes() {
		t.Run(name, func(t *testing.T) {
			require.LessOrEqual(t, len(text), MaxFileBytes)
			var err error
			n := hostiletest.Allocated(func() { _, err = SplitDocuments(strings.NewReader(text)) })
			require.ErrorIs(t, err, ErrTooLarge)
			require.ErrorContains(t, err, fmt.Sprintf("more than %d YAML nodes", MaxYAMLNodes))
			require.Regexp(t, `^document [12]: .*line [0-9]+: more than`, err.Error())
			split := splitCost(text)
			require.Less(t, n, split+uint64(2*len(text)+(4<<20)), "%d bytes allocated for %d bytes of text, %d to split it", n, len(text), split)
		})
	}
}

// splitCost is what reading text and splitting it into documents allocates, converting none.
func splitCost(text string) uint64 {
	return hostiletest.Allocated(func() {
		s := yamljson.NewStream(strings.NewReader(text))
		if js, ok, _ := s.JSON(); ok {
			for v := jsontree.NewValues(js); ; {
				if _, err := v.Next(); err != nil {
					return
				}
			}
		}
		for {
			if _, err := s.Next(); err != nil {
				return
			}
		}
	})
}

// TestRealInputsWithinBounds keeps what users give podpatch working: `kubectl get pods -A -o
// yaml` of 1,000 Pods (one List document of about 312,000 nodes) and a policy ConfigMap of
// 1 MiB whose policies are block scalars.
func TestRealInputsWithinBounds(t *testing.T) {
	pod, err := os.ReadFile("testdata/frontend/listed-pod.yaml")
	require.NoError(t, err)
	var list strings.Builder
	list.WriteString("apiVersion: v1\nitems:\n")
	for i := range 1000 {
		list.WriteString(strings.ReplaceAll(string(pod), "INDEX", strconv.Itoa(i)))
	}
	list.WriteString("kind: List\nmetadata:\n  resourceVersion: \"\"\n")
	docs, err := SplitDocuments(strings.NewReader(list.String()))
	require.NoError(t, err)
	require.Len(t, docs, 1)
	obj, err := jsontree.DecodeObject(docs[0].JSON)
	require.NoError(t, err)
	require.Len(t, obj["items"], 1000)

	var cm strings.Builder
	cm.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\n  labels: {podpatch.io/policy: \"true\"}\ndata:\n")
	for k := 0; cm.Len() < MaxConfigMapBytes-(64<<10); k++ {
		fmt.Fprintf(&cm, "  p%d.yaml: |\n    apiVersion: podpatch.io/v1alpha1\n    kind: PodTemplatePatch\n    metadata: {name: p%d}\n    spec:\n      template:\n        metadata:\n          annotations:\n", k, k)
		for a := range 2000 {
			fmt.Fprintf(&cm, "            a%d: [v, {w: x}] # - y: z\n", a)
		}
	}
	docs, err = SplitDocuments(strings.NewReader(cm.String()))
	require.NoError(t, err)
	var big corev1.ConfigMap // decoded strictly, as podpatch's file reader decodes it (policyfiles)
	strict, err := jsonstrict.UnmarshalStrict(docs[0].JSON, &big)
	require.NoError(t, err)
	require.Empty(t, strict)
	require.Greater(t, len(big.Data), 10)
}
