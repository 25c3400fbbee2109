package policytest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/podpatch/podpatch/policies"
)

// MaxSuiteBytes bounds the files one suite reads together (its policies, Nodes, objects and
// expected objects, each at most policies.MaxFileBytes): a suite is not a way to make CI read
// without end.
const MaxSuiteBytes = 64 << 20

// maxSymlinks is how many symbolic links a path may go through, as os.Root allows.
const maxSymlinks = 8

// Root is the directory `podpatch test` is confined to: the test files it runs, and every
// file a suite names (spec.policies, context.nodes.files, a case's file and
// expect.objectFile), must lie in it after their symbolic links, and --update writes only
// there. A suite is as hostile as the pull request that brings it, and CI runs it: outside the
// root it could read the runner's files into the log, or overwrite them. Nothing under a .git
// folder is read either: a checkout's .git/config can hold the token CI checked out with.
type Root struct {
	abs  string // absolute, as messages name it
	real string // abs with its symbolic links resolved
	fs   *os.Root
}

// OpenRoot opens dir as the root: the directory `podpatch test` runs in, or its --root.
func OpenRoot(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		return nil, err
	}
	return &Root{abs: abs, real: real, fs: r}, nil
}

// Close releases the root's directory.
func (r *Root) Close() error { return r.fs.Close() }

// String is the root as messages name it: its absolute path.
func (r *Root) String() string { return r.abs }

// place names a path of the command line in the root, or says that it lies outside.
func (r *Root) place(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	for _, base := range []string{r.abs, r.real} {
		if rel, err := filepath.Rel(base, abs); err == nil && !leavesBy(rel) {
			return filepath.ToSlash(rel), nil
		}
	}
	return "", fmt.Errorf("%s is outside the root %s (the directory podpatch test runs in, or its --root): test files, and the files they name, must lie in it", p, r)
}

// leavesBy reports whether a cleaned relative path starts by leaving its directory.
func leavesBy(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, "../") || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// escapes says that the command-line path p leaves the root, when err is an *escape.
func (r *Root) escapes(p string, err error) error {
	var e *escape
	if errors.As(err, &e) {
		return fmt.Errorf("%s escapes the root %s: %s", p, r, e.msg)
	}
	return err
}

// within names a path a suite names in the root: p is relative to the test file, whose name in
// the root is suite. It returns an *escape when p is absolute or its ".." lead out of the root.
func within(suite, p string) (string, error) {
	if filepath.IsAbs(p) || path.IsAbs(filepath.ToSlash(p)) {
		return "", &escape{"it is an absolute path (name files relative to the test file)"}
	}
	name := path.Join(path.Dir(suite), filepath.ToSlash(p))
	if leavesBy(name) {
		return "", &escape{dotdot}
	}
	return name, nil
}

// dotdot says that a path's ".." lead out of the root, and what the root is: a suite run from
// a folder below the one its paths need says so too.
const dotdot = `its ".." lead out of it (the root is the directory podpatch test runs in, or its --root)`

// escape is a path that leaves the root, or goes where a suite may not (.git); its message ends
// the sentence "PATH escapes the suite's root ROOT: …".
type escape struct{ msg string }

func (e *escape) Error() string { return e.msg }

// resolve follows name (in the root, cleaned, not leaving it lexically) through its symbolic
// links as the kernel would and returns the path it leads to, or an *escape saying which link
// leaves the root (or is absolute), or that it leads into .git. With last false a final
// symbolic link is not followed: the file --update replaces is the link itself. A missing
// component ends nothing: the rest is taken as written, and opening it says it does not exist.
func (r *Root) resolve(name string, last bool) (string, error) {
	var done []string
	todo := strings.Split(name, "/")
	via, hops := "", 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 && via == "" {
				return "", &escape{dotdot}
			}
			if len(done) == 0 {
				return "", &escape{fmt.Sprintf("the symlink %s leads out of it", via)}
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(slices.Clone(done), c)...)
		if len(todo) == 0 && !last {
			done = append(done, c)
			break
		}
		fi, err := r.fs.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			done = append(done, c)
			continue
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink == 0:
			done = append(done, c)
			continue
		}
		if hops++; hops > maxSymlinks {
			return "", &escape{fmt.Sprintf("more than %d symlinks on the way", maxSymlinks)}
		}
		target, err := r.fs.Readlink(cur)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) || path.IsAbs(filepath.ToSlash(target)) {
			return "", &escape{fmt.Sprintf("the symlink %s points to the absolute path %s", cur, target)}
		}
		via = fmt.Sprintf("%s (-> %s)", cur, target)
		todo = append(strings.Split(filepath.ToSlash(target), "/"), todo...)
	}
	if slices.ContainsFunc(done, func(c string) bool { return strings.EqualFold(c, ".git") }) {
		return "", &escape{"it leads into .git, which a suite never reads (a checkout's .git/config can hold CI's credentials)"}
	}
	return path.Join(append([]string{"."}, done...)...), nil
}

// read reads a regular file of the root, resolved, within policies.MaxFileBytes and what is left
// of *budget (which it lowers); errors name the file as show.
func (r *Root) read(show, name string, budget *int64) ([]byte, error) {
	fi, err := r.fs.Stat(name)
	if err != nil {
		return nil, pathError(show, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", show)
	}
	f, err := r.fs.Open(name)
	if err != nil {
		return nil, pathError(show, err)
	}
	defer f.Close()
	limit := min(int64(policies.MaxFileBytes), *budget)
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, pathError(show, err)
	}
	if int64(len(data)) > limit {
		if limit < policies.MaxFileBytes {
			return nil, fmt.Errorf("%s: the files of the suite hold more than %d MiB together", show, MaxSuiteBytes>>20)
		}
		return nil, fmt.Errorf("%s: %w: more than %d bytes", show, policies.ErrTooLarge, policies.MaxFileBytes)
	}
	*budget -= int64(len(data))
	return data, nil
}

// pathError names the file of an error from the root as show (the path the user wrote).
func pathError(show string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: %w", show, err)
}

// found is a file found under a folder: as messages name it, and in the root.
type found struct{ show, name string }

// list lists the manifest files of a resolved path: the path itself, or the *.yaml, *.yml (and
// with json, *.json) files under a folder but kustomization files and hidden ones, never going
// into .git, each resolved; show is how messages name the path.
func (r *Root) list(show, name string, json bool) ([]found, error) {
	fi, err := r.fs.Stat(name)
	if err != nil {
		return nil, pathError(show, err)
	}
	if !fi.IsDir() {
		return []found{{show, name}}, nil
	}
	var out []found
	err = fs.WalkDir(r.fs.FS(), name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		base := d.Name()
		if d.IsDir() {
			if strings.EqualFold(base, ".git") {
				return fs.SkipDir
			}
			return nil
		}
		ext := path.Ext(base)
		if strings.HasPrefix(base, "kustomization.") || strings.HasPrefix(base, ".") || ext != ".yaml" && ext != ".yml" && (!json || ext != ".json") {
			return nil
		}
		rel := strings.TrimPrefix(p, name+"/")
		if name == "." {
			rel = p
		}
		f := found{show: filepath.Join(show, filepath.FromSlash(rel))}
		if f.name, err = r.resolve(p, true); err != nil {
			var e *escape
			if errors.As(err, &e) {
				return &escape{fmt.Sprintf("%s: %s", f.show, e.msg)}
			}
			return err
		}
		out = append(out, f)
		return nil
	})
	if err != nil {
		var e *escape
		if errors.As(err, &e) {
			return nil, err
		}
		return nil, pathError(show, err)
	}
	slices.SortFunc(out, func(a, b found) int { return strings.Compare(a.show, b.show) })
	return out, nil
}

// write replaces the file name of the root (resolved but for its last component, which must not
// be a symbolic link) with data: through a new file in its folder, renamed over it, so that
// --update never writes through a link and a crash leaves the old file.
func (r *Root) write(name string, data []byte) error {
	if err := r.notALink(name); err != nil {
		return err
	}
	dir := path.Dir(name)
	if err := r.fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := path.Join(dir, ".podpatch-test-"+rand.Text())
	f, err := r.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer r.fs.Remove(tmp) // gone after the rename: this removes what a failed write left
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := r.notALink(name); err != nil {
		return err
	}
	return r.fs.Rename(tmp, name)
}

// notALink says why --update may not replace name: a symbolic link (or a folder) there.
func (r *Root) notALink(name string) error {
	fi, err := r.fs.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return errors.New("is a symlink, and --update never writes through one (put the expected file in its place)")
	case !fi.Mode().IsRegular():
		return errors.New("is not a regular file")
	}
	return nil
}
