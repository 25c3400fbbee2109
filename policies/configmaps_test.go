package policies

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// readConfigMaps reads the policy ConfigMaps of files and folders (their *.yaml files but
// kustomization files) for the engine's own tests, which cannot import podpatch's file reader
// (policies/files imports the engine): a ConfigMap or a List of them per document, in namespace
// default unless it names one.
func readConfigMaps(paths ...string) ([]*corev1.ConfigMap, error) {
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		in, err := filepath.Glob(filepath.Join(p, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range in {
			if !strings.HasPrefix(filepath.Base(f), "kustomization.") {
				files = append(files, f)
			}
		}
	}
	var out []*corev1.ConfigMap
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		docs, err := SplitDocuments(strings.NewReader(string(b)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, d := range docs {
			var list struct {
				Kind  string            `json:"kind"`
				Items []json.RawMessage `json:"items"`
			}
			if err := json.Unmarshal(d.JSON, &list); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			items := []json.RawMessage{d.JSON}
			if list.Kind == "List" || list.Kind == "ConfigMapList" {
				items = list.Items
			}
			for _, it := range items {
				cm := &corev1.ConfigMap{}
				if err := json.Unmarshal(it, cm); err != nil {
					return nil, fmt.Errorf("%s: %w", f, err)
				}
				if cm.Kind != "ConfigMap" {
					return nil, fmt.Errorf("%s: a %s, not a ConfigMap", f, cm.Kind)
				}
				if cm.Namespace == "" {
					cm.Namespace = "default"
				}
				out = append(out, cm)
			}
		}
	}
	return out, nil
}
