package policystore

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies"
)

// TestStoreHeapProfile writes heap profiles of a store holding 1,000 and 10,000 policy
// ConfigMaps (storeConfigMaps) into $PODPATCH_HEAP_PROFILES, for docs/benchmarks (`make
// bench`: where the bytes of a compiled policy set go). The ConfigMaps stay alive, as in the
// informer's cache, so the profile and the heap held count only the store's own. Skipped
// without the variable.
//
//	PODPATCH_HEAP_PROFILES=/tmp/heap go test ./webhook/policystore -run TestStoreHeapProfile -v
func TestStoreHeapProfile(t *testing.T) {
	dir := os.Getenv("PODPATCH_HEAP_PROFILES")
	if dir == "" {
		t.Skip("PODPATCH_HEAP_PROFILES is not set")
	}
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 512 // every 512 bytes: a profile of what is held, not a sample
	defer func() { runtime.MemProfileRate = old }()
	for _, n := range []int{1000, 10000} {
		cms := storeConfigMaps(n)
		base := heapLive()
		s := New(policies.DefaultOptions(), newTestMetrics(t), nil)
		for _, cm := range cms {
			s.Upsert(cm)
		}
		s.MarkSynced()
		held := heapLive() - base
		t.Logf("configmaps=%d: the store holds %.2f MiB, %.0f bytes per ConfigMap", n, held/(1<<20), held/float64(n))
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("store-%d.heap.pprof", n)))
		require.NoError(t, err)
		runtime.GC() // the profile is of the last completed cycle
		require.NoError(t, pprof.Lookup("heap").WriteTo(f, 0))
		require.NoError(t, f.Close())
		runtime.KeepAlive(s)
		runtime.KeepAlive(cms)
	}
}
