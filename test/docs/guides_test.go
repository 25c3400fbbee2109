package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The guides' transcripts, run as written: a ```console block is a terminal session in `make dev`:
// lines starting with "$ " are commands (a line ending in "\" continues on the next), the lines
// after one are what it prints (stdout and stderr, as a terminal shows them). TestGuidesRun runs
// every console block of README.md and docs/*.md, file by file in name order and block by block,
// in one `make dev` lab, and requires the output the guide shows. A guide that needs more than the
// lab has creates it in its own transcript (and removes it at the end), so the reader can follow.
//
// What may differ between two runs is normalised on both sides (normalise): runs of spaces,
// resourceVersions (`@123`), policy generations (16 hex digits), the random suffixes of generated
// names, Event ages. A line that is only "…", "..." or "[…]" stands for any number of lines.
//
// Commands run with bash in the repository root, with KUBECONFIG set to the lab and on PATH first
// the podpatch built for the test (`bin/podpatch` in a command is that binary), then bin/ (kubectl
// of the control plane's version, built by `make control-plane`). `make …` commands are not run:
// the lab is what `make dev` starts, and the test builds what it needs.

// TestTranscriptsAreRun: a "$ " prompt appears only in console blocks, so every transcript a
// guide shows is one that TestGuidesRun runs. A command synopsis (```sh) shows no prompt.
func TestTranscriptsAreRun(t *testing.T) {
	for _, file := range markdownFiles(t) {
		for _, b := range parseMarkdown(t, file).blocks {
			if b.lang == "console" {
				continue
			}
			for i, line := range strings.Split(b.text, "\n") {
				if strings.HasPrefix(line, "$ ") {
					t.Errorf("%s:%d: a command transcript in a %q block, which no test runs: make it a console block that runs in make dev (TestGuidesRun), or show the command without a prompt", file, b.line+1+i, b.lang)
				}
			}
		}
	}
}

// step is one command of a transcript and the output the guide shows for it.
type step struct {
	file    string
	line    int // of the command in the file
	command string
	want    []string
}

// transcript splits a console block into its steps.
func transcript(b block) []step {
	var out []step
	lines := strings.Split(strings.TrimSuffix(b.text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			s := step{file: b.file, line: b.line + 1 + i}
			for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
				i++
				cmd += "\n" + lines[i] // bash reads the backslash-newline as a continuation
			}
			s.command = cmd
			out = append(out, s)
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].want = append(out[len(out)-1].want, line)
		}
	}
	return out
}

var (
	spaces          = regexp.MustCompile(`\s+`)
	resourceVersion = regexp.MustCompile(`@[0-9]+\b`)
	generation      = regexp.MustCompile(`\b[0-9a-f]{16}\b`)
	// generatedSuffix is the suffix the API server and the controllers add to a generated name
	// (their alphabet has no vowels and no 0, 1 or 3).
	generatedSuffix = regexp.MustCompile(`-[bcdfghjklmnpqrstvwxz2456789]{5}\b`)
	age             = regexp.MustCompile(`\b([0-9]+[smhd])+\b`)
)

// normalise is a line as compared: what differs between two runs of the same lab replaced.
func normalise(line string) string {
	line = strings.TrimSpace(spaces.ReplaceAllString(line, " "))
	line = resourceVersion.ReplaceAllString(line, "@N")
	line = generation.ReplaceAllString(line, "GENERATION")
	line = generatedSuffix.ReplaceAllString(line, "-XXXXX")
	return age.ReplaceAllString(line, "AGE")
}

// isElision reports whether a line of a guide's output stands for any number of lines.
func isElision(line string) bool {
	switch strings.TrimSpace(line) {
	case "…", "...", "[…]":
		return true
	}
	return false
}

// matches reports whether got is what want shows: want's lines in order, each elision standing
// for any number of lines, the others equal after normalise. Blank lines at either end do not count.
func matches(want, got []string) bool {
	norm := func(ls []string) []string {
		var out []string
		for _, l := range ls {
			out = append(out, normalise(l))
		}
		for len(out) > 0 && out[len(out)-1] == "" {
			out = out[:len(out)-1]
		}
		for len(out) > 0 && out[0] == "" {
			out = out[1:]
		}
		return out
	}
	var w []string
	var elided []bool // before w[i]
	gap := false
	for _, l := range want {
		if isElision(l) {
			gap = true
			continue
		}
		w = append(w, l)
		elided = append(elided, gap)
		gap = false
	}
	w = norm(w)
	elided = elided[:len(w)]
	if len(w) == 0 {
		return gap || len(norm(got)) == 0
	}
	return matchFrom(w, elided, gap, norm(got))
}

// matchFrom matches want (each line with whether an elision comes before it, and trailing
// whether one ends it) against got, trying every place an elision may end.
func matchFrom(want []string, elided []bool, trailing bool, got []string) bool {
	if len(want) == 0 {
		return trailing || len(got) == 0
	}
	if !elided[0] {
		return len(got) > 0 && got[0] == want[0] && matchFrom(want[1:], elided[1:], trailing, got[1:])
	}
	for i := range got {
		if got[i] == want[0] && matchFrom(want[1:], elided[1:], trailing, got[i+1:]) {
			return true
		}
	}
	return false
}

func TestMatches(t *testing.T) {
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{"a\nb", "a\nb", true},
		{"a\nb", "a\nb\nc", false},
		{"a\n…", "a\nb\nc", true},
		{"…\nc", "a\nb\nc", true},
		{"a\n[…]\nc", "a\nb\nb2\nc", true},
		{"a\n...\nc", "a\nc", true},
		{"a\n…\nc", "a\nb", false},
		{"b\n…", "a\nb", false},
		{"Pod x-bcdf5 @12  ok", "Pod   x-fbtjt @418 ok", true},
		{"policy generation 10f1e3494a84be3a", "policy generation a22969e4463ec03f", true},
		{"Normal  X  22s  podpatch", "Normal X 3m4s podpatch", true},
		{"limit 1", "limit 2", false},
		{"", "", true},
		{"…", "anything\nat all", true},
	} {
		if got := matches(strings.Split(c.want, "\n"), strings.Split(c.got, "\n")); got != c.ok {
			t.Errorf("matches(%q, %q) = %v, want %v", c.want, c.got, got, c.ok)
		}
	}
}

// TestGuidesRun runs every console block of the guides in one `make dev` lab and compares what
// each command prints with what the guide shows.
func TestGuidesRun(t *testing.T) {
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var steps []step
	for _, file := range markdownFiles(t) {
		for _, b := range parseMarkdown(t, file).blocks {
			if b.lang == "console" {
				steps = append(steps, transcript(b)...)
			}
		}
	}
	if len(steps) < 10 {
		t.Fatalf("only %d transcript commands found in the guides: the extraction is broken", len(steps))
	}
	for _, bin := range []string{"kube-apiserver", "kubectl"} {
		if _, err := os.Stat(filepath.Join(abs, "bin", bin)); err != nil {
			if os.Getenv("PODPATCH_E2E") == "required" {
				t.Fatalf("bin/%s: %v (make control-plane builds it)", bin, err)
			}
			t.Skipf("no bin/%s: `make test` runs the guides", bin)
		}
	}
	kubeconfig, binDir := startDevLab(t, abs)

	for _, s := range steps {
		if strings.HasPrefix(s.command, "make ") {
			continue
		}
		command := strings.ReplaceAll(s.command, "bin/podpatch", "podpatch")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", command)
		cmd.Dir = abs
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+strings.Join([]string{binDir, filepath.Join(abs, "bin"), os.Getenv("PATH")}, string(os.PathListSeparator)))
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Errorf("%s:%d: %s: did not end in 2 minutes", s.file, s.line, s.command)
			continue
		}
		var exit *exec.ExitError // a command may fail where the guide shows it failing
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%s:%d: %s: %v", s.file, s.line, s.command, err)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if !matches(s.want, got) {
			t.Errorf("%s:%d: `%s` prints what the guide does not show.\nthe guide shows:\n%s\nit prints:\n%s",
				s.file, s.line, s.command, strings.Join(s.want, "\n"), out)
		}
	}
}

// startDevLab builds podpatch and runs `make dev`'s lab (test/demo --keep) until the test ends;
// it returns the lab's kubeconfig and the directory holding the podpatch binary.
func startDevLab(t *testing.T, abs string) (kubeconfig, binDir string) {
	t.Helper()
	tmp := t.TempDir()
	binDir = filepath.Join(tmp, "bin")
	for pkg, out := range map[string]string{"./cmd/podpatch": filepath.Join(binDir, "podpatch"), "./test/demo": filepath.Join(tmp, "demo")} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Dir = abs
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	kubeconfig = filepath.Join(tmp, "kubeconfig")
	demo := exec.Command(filepath.Join(tmp, "demo"), "--root", abs, "--keep",
		"--kubeconfig-out", kubeconfig, "--podpatch", filepath.Join(binDir, "podpatch"))
	demo.Dir = abs
	stdout, err := demo.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	demo.Stderr = &stderr
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	var log bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if !sent {
				log.WriteString(sc.Text() + "\n")
			}
			if !sent && strings.HasPrefix(sc.Text(), "The cluster keeps running") {
				ready <- true
				sent = true
			}
		}
		if !sent {
			ready <- false
		}
	}()
	t.Cleanup(func() {
		_ = demo.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- demo.Wait() }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = demo.Process.Kill()
			<-done
		}
	})
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("make dev's lab ended before it was ready:\n%s%s", log.String(), stderr.String())
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("make dev's lab not ready in 5 minutes:\n%s", stderr.String())
	}
	return kubeconfig, binDir
}
