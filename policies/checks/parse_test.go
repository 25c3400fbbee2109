package checks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies/profiles"
)

func TestShellWords(t *testing.T) {
	for in, want := range map[string][]string{
		`ulimit -n 65536; ray start  --memory=1073741824  --num-cpus=1 `: {"ulimit", "-n", "65536", "ray", "start", "--memory=1073741824", "--num-cpus=1"},
		`ray start --resources='{"TPU": 4}' --num-gpus="2"`:              {"ray", "start", `--resources={"TPU": 4}`, "--num-gpus=2"},
		`a\ b "c \"d\"" 'e`: {"a b", `c "d"`, "e"},
		`x && y|z`:          {"x", "y", "z"},
		`"unterminated`:     {"unterminated"},
		``:                  nil,
	} {
		require.Equal(t, want, shellWords(nil, in, maxCheckTokens), in)
	}
	long := strings.Repeat("a ", maxCheckTokens*4)
	require.Len(t, shellWords(nil, long, maxCheckTokens), maxCheckTokens)
}

func TestSizeParsers(t *testing.T) {
	for _, c := range []struct {
		s     string
		units map[string]float64
		bare  float64
		want  int64
		ok    bool
	}{
		{"4G", daskUnits, 1, 4e9, true}, {"4GiB", daskUnits, 1, 4 << 30, true}, {"2147483648", daskUnits, 1, 2147483648, true},
		{"5.4 kB", daskUnits, 1, 5400, true}, {"1e6", daskUnits, 1, 1e6, true}, {"auto", daskUnits, 1, 0, false},
		{"2048m", jvmUnits, 1, 2048 << 20, true}, {"1728 mb", jvmUnits, 1, 1728 << 20, true}, {"1024", jvmUnits, 1 << 20, 1024 << 20, true},
		{"-1g", jvmUnits, 1, 0, false}, {"1e400", jvmUnits, 1, 0, false}, {"NaN", jvmUnits, 1, 0, false}, {"9999999999t", jvmUnits, 1, 0, false},
		{strings.Repeat("9", 100), jvmUnits, 1, 0, false},
	} {
		got, ok := parseSize(c.s, c.units, c.bare)
		require.Equal(t, c.ok, ok, c.s)
		require.Equal(t, c.want, got, c.s)
	}
	props := propertyValues([]string{"-D", "taskmanager.memory.process.size=2048m", "-Djobmanager.memory.process.size=1g"},
		"taskmanager.memory.process.size: 4g\ntaskmanager.numberOfTaskSlots: 2", []string{"taskmanager.memory.process.size", "jobmanager.memory.process.size", "taskmanager.numberOfTaskSlots"})
	require.Equal(t, map[string]string{"taskmanager.memory.process.size": "2048m", "jobmanager.memory.process.size": "1g", "taskmanager.numberOfTaskSlots": "2"}, props)
	require.Equal(t, map[string]string{"--memory-limit": "3G", "--nthreads": "2"},
		flagValues([]string{"dask-worker", "--memory-limit", "$(MEM)", "--nthreads=2", "--nthreads", "9"}, []string{"--memory-limit", "--nthreads"}, func() map[string]string { return map[string]string{"MEM": "3G"} }))
}

// FuzzCommandLine feeds hostile command lines to every manager's parsers (`ray start`, dask-worker
// flags, Flink and Spark properties, sizes, `--resources` JSON): they must not panic and must stay
// within their bounds. Seeded with the KubeRay worker's own `ray start` line and hostile ones;
// FuzzRayStartCommand (package policies) feeds them through a whole admission.
func FuzzCommandLine(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", "kuberay", "worker-pod.yaml"))
	require.NoError(f, err)
	var pod corev1.Pod
	require.NoError(f, yaml.Unmarshal(b, &pod))
	for _, s := range []string{pod.Spec.Containers[0].Args[0], `ray start --num-gpus=1e999 --memory=-1 --resources='{"TPU": "x"}'`,
		`ray start --num-cpus --num-gpus`, `"ray" 'start' --memory=$(X) \`, "ray start --resources='" + strings.Repeat("{", 5000)} {
		f.Add(s, "--num-gpus=2")
	}
	f.Fuzz(func(t *testing.T, command, arg string) {
		words := commandWords([]string{command, arg, command}, nil)
		require.LessOrEqual(t, len(words), maxCheckTokens)
		words = commandWords([]string{command}, []string{arg})
		require.LessOrEqual(t, len(words), maxCheckTokens)
		_ = propertyValues(words, command, profiles.SizesOf(profiles.ManagerFlink).Properties)
		_ = flagValues(words, []string{"--memory-limit", "--nthreads", "--nworkers"}, func() map[string]string { return map[string]string{"X": arg} })
		_, _ = parseSize(arg, daskUnits, 1)
		_, _ = parseSize(command, jvmUnits, 1<<20)
		_ = rayResources(arg)
	})
}
