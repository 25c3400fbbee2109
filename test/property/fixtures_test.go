package property

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies/profiles"
)

// fixtureDirs hold real managers' objects: those `make fixtures` captures from the managers in
// test/managers (policies/testdata/fixtures) and the earlier hand-written shapes of the same
// objects, which differ (fewer API-server defaults, older manager versions).
var fixtureDirs = []string{"policies/testdata/fixtures", "test/property/testdata/handwritten"}

// fixtures are every Pod and Service of fixtureDirs, loaded by TestMain.
var fixtures []*fixture

// fixture is one manager object and what the generator needs to know about it to address its
// parts by name.
type fixture struct {
	path string
	kind profiles.Kind
	id   profiles.Identity
	// obj is the object as decoded JSON; never modified (copy it).
	obj map[string]any
	// Names found in the object, for the generator's pools.
	containers, initContainers, volumes, mountPaths, portNames, envNames []string
	ports                                                                []int
	serviceAccount                                                       string
	// instances are the object's JSON per test namespace.
	instances map[string][]byte
}

// loadFixtures reads every Pod and Service YAML of fixtureDirs that a profile recognises.
func loadFixtures() ([]*fixture, error) {
	var out []*fixture
	for _, dir := range fixtureDirs {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			var obj map[string]any
			if err := yaml.Unmarshal(b, &obj); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			rel, _ := filepath.Rel(repoRoot, path)
			f, ok := newFixture(rel, obj)
			if !ok {
				return nil
			}
			out = append(out, f)
			return f.makeInstances()
		})
		if err != nil {
			return nil, err
		}
	}
	if len(out) < 20 {
		return nil, fmt.Errorf("only %d manager objects found in %v", len(out), fixtureDirs)
	}
	return out, nil
}

func newFixture(path string, obj map[string]any) (*fixture, bool) {
	f := &fixture{path: path, obj: obj}
	switch obj["kind"] {
	case "Pod":
		f.kind = profiles.KindPod
	case "Service":
		f.kind = profiles.KindService
	default:
		return nil, false
	}
	meta, _ := obj["metadata"].(map[string]any)
	spec, _ := obj["spec"].(map[string]any)
	var selector map[string]string
	if f.kind == profiles.KindService {
		selector = strMap(spec["selector"])
	}
	id, ok := profiles.Recognise(f.kind, strMap(meta["labels"]), selector)
	if !ok {
		return nil, false
	}
	f.id = id
	names := func(list any, key string) []string {
		var out []string
		items, _ := list.([]any)
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				if s, ok := m[key].(string); ok && !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		}
		return out
	}
	if f.kind == profiles.KindPod {
		f.containers = names(spec["containers"], "name")
		f.initContainers = names(spec["initContainers"], "name")
		f.volumes = names(spec["volumes"], "name")
		f.serviceAccount, _ = spec["serviceAccountName"].(string)
		for _, list := range []string{"containers", "initContainers"} {
			items, _ := spec[list].([]any)
			for _, it := range items {
				c, _ := it.(map[string]any)
				f.mountPaths = append(f.mountPaths, names(c["volumeMounts"], "mountPath")...)
				f.portNames = append(f.portNames, names(c["ports"], "name")...)
				f.envNames = append(f.envNames, names(c["env"], "name")...)
				ports, _ := c["ports"].([]any)
				for _, p := range ports {
					if pm, ok := p.(map[string]any); ok {
						if n, ok := pm["containerPort"].(float64); ok {
							f.ports = append(f.ports, int(n))
						}
					}
				}
			}
		}
	} else {
		f.portNames = names(spec["ports"], "name")
		ports, _ := spec["ports"].([]any)
		for _, p := range ports {
			if pm, ok := p.(map[string]any); ok {
				if n, ok := pm["port"].(float64); ok {
					f.ports = append(f.ports, int(n))
				}
			}
		}
	}
	return f, true
}

// instance returns the fixture's JSON in namespace ns (one of testNamespaces), ready for a
// dry-run create: server-set fields are dropped, and an object with only generateName keeps
// it (the API server generates the name).
func (f *fixture) instance(ns string) []byte { return f.instances[ns] }

// makeInstances encodes the fixture once for every test namespace.
func (f *fixture) makeInstances() error {
	f.instances = map[string][]byte{}
	for _, ns := range testNamespaces {
		obj := deepCopyJSON(f.obj).(map[string]any)
		meta, _ := obj["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			obj["metadata"] = meta
		}
		meta["namespace"] = ns
		for _, k := range []string{"resourceVersion", "uid", "creationTimestamp", "managedFields", "selfLink"} {
			delete(meta, k)
		}
		delete(obj, "status")
		b, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("%s: %w", f.path, err)
		}
		f.instances[ns] = b
	}
	return nil
}

func strMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

func deepCopyJSON(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, v := range t {
			m[k] = deepCopyJSON(v)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, v := range t {
			l[i] = deepCopyJSON(v)
		}
		return l
	default:
		return v
	}
}
