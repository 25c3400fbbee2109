package policystore

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policyfiles"
)

// DirFeed keeps a Store current from ConfigMap YAML files in a directory, for running without
// a cluster. It polls: ConfigMap volume mounts swap a symlink, which file-change notifications
// report unreliably, and a poll every few seconds costs nothing.
type DirFeed struct {
	Dir      string
	Interval time.Duration
	store    *Store
	log      logr.Logger
	files    map[string]string                 // file -> fingerprint (size, modification time) when read
	byFile   map[string][]types.NamespacedName // ConfigMaps each file defined
}

// NewDirFeed returns a feed for dir and the store it fills.
func NewDirFeed(dir string, interval time.Duration, opts policies.Options, m *Metrics, log logr.Logger) (*DirFeed, *Store) {
	f := &DirFeed{Dir: dir, Interval: interval, log: log, files: map[string]string{}, byFile: map[string][]types.NamespacedName{}}
	f.store = New(opts, m, func(cm *corev1.ConfigMap, probs policies.Problems) {
		log.Info("policy ConfigMap fails to compile; keeping its last good version, if any",
			"namespace", cm.Namespace, "name", cm.Name, "count", len(probs), "problems", ProblemLines("", probs))
	})
	return f, f.store
}

// Load scans the directory once, reads only the files that changed since the last scan, and
// publishes what changed. A file that cannot be read keeps the ConfigMaps it defined before.
func (f *DirFeed) Load() error {
	files, err := fingerprints(f.Dir)
	if err != nil {
		return err
	}
	var firstErr error
	next := make(map[string][]types.NamespacedName, len(files))
	seen := make(map[string]string, len(files))
	for _, file := range slices.Sorted(maps.Keys(files)) {
		if files[file] == f.files[file] {
			next[file], seen[file] = f.byFile[file], f.files[file]
			continue
		}
		cms, err := policyfiles.ReadConfigMaps([]string{file}, "default", nil)
		if err != nil {
			f.log.Error(err, "policy file unreadable; keeping what it defined before", "file", file)
			next[file], seen[file] = f.byFile[file], files[file] // read again once it changes
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		seen[file] = files[file]
		for _, s := range cms {
			f.store.Upsert(s.ConfigMap)
			next[file] = append(next[file], types.NamespacedName{Namespace: s.ConfigMap.Namespace, Name: s.ConfigMap.Name})
		}
	}
	live := map[types.NamespacedName]bool{}
	for _, keys := range next {
		for _, k := range keys {
			live[k] = true
		}
	}
	for _, keys := range f.byFile {
		for _, k := range keys {
			if !live[k] {
				f.store.Delete(k)
			}
		}
	}
	f.byFile, f.files = next, seen
	if !f.store.Synced() {
		f.store.MarkSynced()
	} else {
		f.store.Publish()
	}
	return firstErr
}

// Start loads the directory, then polls it until ctx is done.
func (f *DirFeed) Start(ctx context.Context) error {
	if err := f.Load(); err != nil && !f.store.Synced() {
		return fmt.Errorf("policy directory %s: %w", f.Dir, err)
	}
	t := time.NewTicker(f.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := f.Load(); err != nil {
				f.log.Error(err, "reloading policy directory", "dir", f.Dir)
			}
		}
	}
}

// fingerprints lists the policy files below dir with their sizes and modification times.
func fingerprints(dir string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != dir && strings.HasPrefix(name, ".") {
				return filepath.SkipDir // ConfigMap volumes keep old versions in ..data-like dirs
			}
			return nil
		}
		if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "kustomization.") {
			return nil
		}
		switch filepath.Ext(name) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		info, err := os.Stat(path) // follows symlinks
		if err != nil {
			return err
		}
		files[path] = fmt.Sprintf("%d:%d", info.Size(), info.ModTime().UnixNano())
		return nil
	})
	return files, err
}
