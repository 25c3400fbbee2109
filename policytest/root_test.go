package policytest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// tree makes files (content "x") and symbolic links (a value starting with "->") under a new
// temporary folder, and returns it.
func tree(t *testing.T, entries map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range entries {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(v, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(v), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestResolve: a path is followed through its symbolic links as the kernel follows it, and one
// that leaves the root (by a link's "..", an absolute link, a loop) or leads into .git is an
// *escape naming the link; a link that stays inside is followed.
func TestResolve(t *testing.T) {
	outside := tree(t, map[string]string{"secret.yaml": "x"})
	dir := tree(t, map[string]string{
		"root/a/b.yaml":      "x",
		"root/c/x.yaml":      "x",
		"root/chain1":        "->chain2",
		"root/chain2":        "->a/b.yaml",
		"root/d":             "->a",
		"root/a/up":          "->../c",
		"root/loop1":         "->loop2",
		"root/loop2":         "->loop1",
		"root/abs":           "->" + filepath.Join(outside, "secret.yaml"),
		"root/out":           "->../../" + filepath.Base(outside) + "/secret.yaml",
		"root/a/deep/parent": "->../../..",
		"root/g":             "->.git",
		"root/.git/config":   "x",
	})
	r := openRoot(t, filepath.Join(dir, "root"))
	for _, tc := range []struct {
		name string
		last bool
		want string // the path it leads to, or a part of the escape
	}{
		{"a/b.yaml", true, "a/b.yaml"},
		{"chain1", true, "a/b.yaml"},
		{"chain1", false, "chain1"}, // the file --update replaces is the link
		{"d/b.yaml", true, "a/b.yaml"},
		{"a/up/x.yaml", true, "c/x.yaml"},
		{"new/dir/x.yaml", true, "new/dir/x.yaml"},
		{".", true, "."},
		{"loop1", true, "escape: more than 8 symlinks"},
		{"abs", true, "escape: the symlink abs points to the absolute path " + outside},
		{"out", true, "escape: the symlink out (-> ../../"},
		{"a/deep/parent/x", true, "escape: the symlink a/deep/parent (-> ../../..) leads out of it"},
		{".git/config", true, "escape: it leads into .git"},
		{"g/config", true, "escape: it leads into .git"},
		{"d/../.GIT/config", true, "escape: it leads into .git"},
	} {
		got, err := r.resolve(tc.name, tc.last)
		var e *escape
		if errors.As(err, &e) {
			got = "escape: " + e.msg
		} else if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("resolve(%q, %v) = %q, want %q", tc.name, tc.last, got, tc.want)
		}
	}
}

// TestWithin: a path a suite names is refused when absolute or when its ".." lead out of the
// root, however it gets there; otherwise it is relative to the test file.
func TestWithin(t *testing.T) {
	for p, want := range map[string]string{
		"x.yaml":               "tests/x.yaml",
		"../policies":          "policies",
		"a/../x":               "tests/x",
		"../..":                "escape",
		"../../x":              "escape",
		"a/../../../x":         "escape",
		"/etc/passwd":          "escape",
		"./../../etc/passwd":   "escape",
		"a/b/../../../../etc/": "escape",
	} {
		got, err := within("tests/s.yaml", p)
		var e *escape
		if errors.As(err, &e) {
			got = "escape"
		}
		if got != want {
			t.Errorf("within(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
}

// TestWriteNeverThroughALink: --update's write replaces a file through a new file renamed over
// it, creates its folders, leaves no temporary file, and refuses a symbolic link in its place
// (the file it points to unchanged).
func TestWriteNeverThroughALink(t *testing.T) {
	dir := tree(t, map[string]string{"root/want/real.yaml": "kept", "root/want/link.yaml": "->real.yaml"})
	r := openRoot(t, filepath.Join(dir, "root"))
	if err := r.write("want/new/a.yaml", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := r.write("want/real.yaml", []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	err := r.write("want/link.yaml", []byte("through"))
	if err == nil || !strings.Contains(err.Error(), "is a symlink, and --update never writes through one") {
		t.Errorf("write through a link: %v", err)
	}
	for name, want := range map[string]string{"want/new/a.yaml": "new", "want/real.yaml": "replaced"} {
		if b, err := os.ReadFile(filepath.Join(dir, "root", name)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", name, b, err, want)
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, "root/want/link.yaml")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "root/want/*/.podpatch-test-*"))
	more, _ := filepath.Glob(filepath.Join(dir, "root/want/.podpatch-test-*"))
	if len(left)+len(more) > 0 {
		t.Errorf("temporary files left: %v %v", left, more)
	}
}

// TestReadIsBoundedPerSuite: a file beyond what is left of the suite's budget is refused, and
// the budget counts what was read; a folder, a FIFO or a device is not read at all.
func TestReadIsBoundedPerSuite(t *testing.T) {
	dir := tree(t, map[string]string{"a.yaml": "0123456789"})
	r := openRoot(t, dir)
	budget := int64(25)
	for range 2 {
		if _, err := r.read("a.yaml", "a.yaml", &budget); err != nil {
			t.Fatal(err)
		}
	}
	if budget != 5 {
		t.Errorf("budget %d, want 5", budget)
	}
	if _, err := r.read("a.yaml", "a.yaml", &budget); err == nil || !strings.Contains(err.Error(), "more than 64 MiB together") {
		t.Errorf("beyond the budget: %v", err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	budget = MaxSuiteBytes
	for _, name := range []string{".", "fifo.yaml"} { // opening the FIFO would block
		if _, err := r.read(name, name, &budget); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
