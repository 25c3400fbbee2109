// Package policyfiles reads what podpatch's commands and its --policy-dir feed take from files:
// the policy ConfigMaps of manifest files and folders (ReadConfigMaps; lint's variant skips the
// other objects of a folder of manifests), any file or standard input within the engine's
// bound (Read), and the manifest files of a folder (Files). Every document goes through the
// engine's one bounded front end (policies.SplitDocuments). It sits above the engine; admission
// never reads a file.
package policyfiles

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	jsonstrict "sigs.k8s.io/json"

	"github.com/podpatch/podpatch/internal/yamljson"
	"github.com/podpatch/podpatch/policies"
)

// ReadConfigMaps reads ConfigMaps from files and directories (recursively: *.yaml, *.yml
// and *.json, skipping kustomization files), in a stable order. A ConfigMap without
// metadata.namespace gets defaultNamespace, as `kubectl apply` would give it. "-" reads stdin.
func ReadConfigMaps(paths []string, defaultNamespace string, stdin io.Reader) ([]policies.SourcedConfigMap, error) {
	out, _, err := readConfigMaps(paths, defaultNamespace, stdin, false)
	return out, err
}

// ReadConfigMapsSkipping is ReadConfigMaps for a directory of manifests that holds
// other objects too (what `podpatch lint` reads): a document of another kind (an apiVersion
// and kind that are not a v1 ConfigMap or a List) is skipped, not an error, and named in
// skipped as "FILE: document N: APIVERSION KIND NAME". A document without apiVersion or kind
// is still an error.
func ReadConfigMapsSkipping(paths []string, defaultNamespace string, stdin io.Reader) (cms []policies.SourcedConfigMap, skipped []string, err error) {
	return readConfigMaps(paths, defaultNamespace, stdin, true)
}

func readConfigMaps(paths []string, defaultNamespace string, stdin io.Reader, skipOthers bool) ([]policies.SourcedConfigMap, []string, error) {
	var out []policies.SourcedConfigMap
	var skipped []string
	for _, p := range paths {
		files, err := Files(p)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range files {
			var skip *[]string
			var here []string
			if skipOthers {
				skip = &here
			}
			cms, err := readConfigMapFile(f, defaultNamespace, stdin, skip)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f, err)
			}
			for _, s := range here {
				skipped = append(skipped, f+": "+s)
			}
			out = append(out, cms...)
		}
	}
	return out, skipped, nil
}

// Files lists the manifest files of a path, in a stable order: the path itself ("-" for
// standard input), or the *.yaml, *.yml and *.json files under a folder but kustomization files
// and hidden ones: the policy ConfigMap files (ReadConfigMaps) and podpatch test's context.nodes.
func Files(p string) ([]string, error) {
	if p == "-" {
		return []string{p}, nil
	}
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() || strings.HasPrefix(name, "kustomization.") || strings.HasPrefix(name, ".") {
			return nil
		}
		switch filepath.Ext(name) {
		case ".yaml", ".yml", ".json":
			files = append(files, path)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// Read reads a file, or stdin for "-", of at most policies.MaxFileBytes.
func Read(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		if stdin == nil {
			return nil, errors.New("no standard input")
		}
		return readBounded(stdin, policies.MaxFileBytes)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f, policies.MaxFileBytes)
}

// Documents reads a file, or stdin for "-", within Read's bound, and splits it into its
// documents by the engine's one bounded front end: the objects of `render -f`, `lint
// --objects`, `diff -f` and `--nodes`. A splitting error names the file.
func Documents(path string, stdin io.Reader) ([]policies.RawDocument, error) {
	data, err := Read(path, stdin)
	if err != nil {
		return nil, err
	}
	docs, err := policies.SplitDocuments(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return docs, nil
}

// readConfigMapFile reads the ConfigMaps of one file; with skip set, documents of another kind
// are named in *skip instead of failing the file.
func readConfigMapFile(path, defaultNamespace string, stdin io.Reader, skip *[]string) ([]policies.SourcedConfigMap, error) {
	data, err := Read(path, stdin)
	if err != nil {
		return nil, err
	}
	docs, err := policies.SplitDocuments(strings.NewReader(string(data)))
	if err != nil {
		return nil, err
	}
	var out []policies.SourcedConfigMap
	offset := 0 // of the next document's text in data
	for _, d := range docs {
		start := 0 // the line before the document's first, in the file
		if i := bytes.Index(data[offset:], d.Text); len(d.Text) > 0 && i >= 0 {
			start = bytes.Count(data[:offset+i], []byte("\n"))
			offset += i + len(d.Text)
		}
		if skip != nil {
			if other := otherKind(d.JSON); other != "" {
				*skip = append(*skip, fmt.Sprintf("document %d: %s", d.Index, other))
				continue
			}
		}
		cms, err := decodeConfigMaps(d.JSON)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", d.Index, err)
		}
		for _, cm := range cms {
			if cm.Namespace == "" {
				cm.Namespace = defaultNamespace
			}
			sc := policies.SourcedConfigMap{File: path, ConfigMap: cm}
			if len(cms) == 1 && len(d.Text) > 0 {
				sc.KeyLines = yamljson.KeyLines(d.Text, "data")
				for k, kl := range sc.KeyLines {
					kl.Line += start
					sc.KeyLines[k] = kl
				}
			}
			out = append(out, sc)
		}
	}
	return out, nil
}

// otherKind names a document that has an apiVersion and a kind other than a v1 ConfigMap or a
// List ("apps/v1 Deployment NAME"), or returns "" (a ConfigMap, a List, or a document too
// malformed to skip, which decodeConfigMaps reports).
func otherKind(js []byte) string {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(js, &head) != nil || head.APIVersion == "" || head.Kind == "" {
		return ""
	}
	if head.Kind == "List" || head.Kind == "ConfigMapList" || head.Kind == "ConfigMap" && head.APIVersion == "v1" {
		return ""
	}
	return strings.TrimSpace(head.APIVersion + " " + head.Kind + " " + head.Metadata.Name)
}

// decodeConfigMaps decodes a ConfigMap, or a List of them, strictly.
func decodeConfigMaps(js []byte) ([]*corev1.ConfigMap, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := jsonstrict.UnmarshalCaseSensitivePreserveInts(js, &head); err != nil {
		return nil, err
	}
	switch {
	case head.Kind == "ConfigMap" && head.APIVersion == "v1":
		cm := &corev1.ConfigMap{}
		if err := strictInto(js, cm); err != nil {
			return nil, err
		}
		return []*corev1.ConfigMap{cm}, nil
	case head.Kind == "List" || head.Kind == "ConfigMapList":
		var list struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   map[string]any    `json:"metadata"`
			Items      []json.RawMessage `json:"items"`
		}
		if err := strictInto(js, &list); err != nil {
			return nil, err
		}
		var out []*corev1.ConfigMap
		for i, it := range list.Items {
			cms, err := decodeConfigMaps(it)
			if err != nil {
				return nil, fmt.Errorf("items[%d]: %w", i, err)
			}
			out = append(out, cms...)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("expected a v1 ConfigMap, got %s %s", head.APIVersion, head.Kind)
	}
}

// strictInto decodes JSON into v, rejecting unknown and duplicate fields.
func strictInto(js []byte, v any) error {
	strict, err := jsonstrict.UnmarshalStrict(js, v)
	if err != nil {
		return err
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

// readBounded reads at most limit bytes, and fails with ErrTooLarge beyond.
func readBounded(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", policies.ErrTooLarge, limit)
	}
	return b, nil
}
