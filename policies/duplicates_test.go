package policies

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies/profiles"
)

// keyFieldValues are the values of every key field of a keyed list, for keyedItem.
var keyFieldValues = map[string]any{
	"name": "k", "mountPath": "/m", "devicePath": "/dev/d", "containerPort": json.Number("8080"), "protocol": "TCP",
	"resourceName": "cpu", "ip": "10.0.0.1", "conditionType": "example.com/ready", "topologyKey": "zone",
	"whenUnsatisfiable": "DoNotSchedule", "key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule", "port": json.Number("80"),
}

// keyedItem is an item of a keyed list with its key fields set (distinct: another key) and a
// member x-set that a patch sets.
func keyedItem(key listKey, distinct bool, set string) map[string]any {
	item := map[string]any{"x-set": set}
	for _, f := range key.fields {
		v := keyFieldValues[f]
		if distinct && f == key.fields[0] {
			switch x := v.(type) {
			case json.Number:
				v = json.Number(string(x) + "1")
			case string:
				v = x + "-other"
			}
		}
		item[f] = v
	}
	return item
}

// TestDuplicateKeysEveryList: in every keyed list, an enforced key defined more than once, in
// the first, middle or last places, gets the policy's value in every definition, whichever one
// a reader uses; the others are not touched, none is removed, and merging again changes nothing.
func TestDuplicateKeysEveryList(t *testing.T) {
	lists := map[string]listKey{}
	for name, k := range podLists {
		lists["pod "+name] = k
	}
	for name, k := range serviceLists {
		lists["service "+name] = k
	}
	names := slices.Sorted(maps.Keys(lists))
	for _, name := range names {
		key := lists[name]
		kind, field, _ := strings.Cut(name, " ")
		for _, places := range [][2]int{{0, 1}, {0, 2}, {1, 2}} {
			t.Run(fmt.Sprintf("%s duplicated at %v", name, places), func(t *testing.T) {
				list := make([]any, 3)
				for i := range list {
					list[i] = keyedItem(key, true, "other")
				}
				for _, i := range places {
					list[i] = keyedItem(key, false, fmt.Sprintf("user-%d", i))
				}
				patch := []any{keyedItem(key, false, "enforced")}
				merge := func(in []any) []any {
					raw, err := json.Marshal(in)
					require.NoError(t, err)
					tr := jsontree.New()
					dst := jsontree.ExpandAll(tr.Decode(raw)).([]any)
					k := profiles.KindPod
					if kind == "service" {
						k = profiles.KindService
					}
					m := newMerger(&applyState{t: tr}, k, false)
					out := m.mergeKeyed(field, dst, patch, key)
					require.NoError(t, m.st.err)
					return out
				}
				out := merge(list)
				require.Len(t, out, 3, "no definition removed, none added")
				for i, it := range out {
					want := "other"
					if slices.Contains(places[:], i) {
						want = "enforced"
					}
					require.Equal(t, want, it.(map[string]any)["x-set"], "item %d", i)
				}
				again := merge(out)
				a, _ := json.Marshal(out)
				b, _ := json.Marshal(again)
				require.JSONEq(t, string(a), string(b), "a fixed point")
			})
		}
	}
}
