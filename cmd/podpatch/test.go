package main

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/pflag"

	"github.com/podpatch/podpatch/internal/report"
	"github.com/podpatch/podpatch/policytest"
)

// testOptions are the flags of `podpatch test` (reference §4).
type testOptions struct {
	Output string
	Run    string
	Update bool
	Root   string
}

func (o *testOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.Output, "output", "o", "text", "text, json or junit")
	fs.StringVar(&o.Run, "run", "", "run only the cases whose SUITE/CASE name matches this regular expression")
	fs.BoolVar(&o.Update, "update", false, "write the observed patched objects to the cases' expect.objectFile, and say which")
	fs.StringVar(&o.Root, "root", ".", "the directory the suites are confined to: every test file, and every file a suite names, must lie in it (after symbolic links, never in .git); --update writes only there")
}

// runTest is `podpatch test PATH…`: exit 0 when every case passes, 1 when one fails, 2 when a
// test file is wrong (it says which, with its line) — naming a file outside the root is one way.
func runTest(args []string, stdout, stderr io.Writer) error {
	o := &testOptions{}
	paths, err := parseCommand("test", args, stderr, true, o)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return usageError{errors.New("at least one PATH (a PolicyTest file or a folder) is required")}
	}
	if o.Output != "text" && o.Output != "json" && o.Output != "junit" {
		return usageError{fmt.Errorf("--output %q: want text, json or junit", o.Output)}
	}
	opts := policytest.Options{Update: o.Update}
	if o.Run != "" {
		if opts.Run, err = regexp.Compile(o.Run); err != nil {
			return usageError{fmt.Errorf("--run: %w", err)}
		}
	}
	if opts.Root, err = policytest.OpenRoot(o.Root); err != nil {
		return usageError{fmt.Errorf("--root: %w", err)}
	}
	defer opts.Root.Close()
	files, err := policytest.Find(opts.Root, paths)
	if err != nil {
		return usageError{err}
	}
	if len(files) == 0 {
		return usageError{fmt.Errorf("no PolicyTest files under %s", strings.Join(paths, " "))}
	}
	var results []policytest.CaseResult
	var bad []error
	for _, f := range files {
		rs, err := policytest.RunFile(f, opts)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		results = append(results, rs...)
	}
	for _, e := range bad {
		fmt.Fprintf(stderr, "podpatch test: %v\n", e)
	}
	failed := 0
	for _, r := range results {
		if !r.Pass {
			failed++
		}
		if r.Updated != "" {
			fmt.Fprintf(stderr, "podpatch test: updated %s (case %s)\n", r.Updated, r.ID())
		}
	}
	if err := writeResults(stdout, o.Output, results, failed, len(bad)); err != nil {
		return err
	}
	switch {
	case len(bad) > 0:
		return exitError{2}
	case failed > 0:
		return exitError{1}
	case len(results) == 0:
		fmt.Fprintf(stderr, "podpatch test: --run %q matches no case\n", o.Run)
		return exitError{2}
	}
	return nil
}

func writeResults(w io.Writer, format string, rs []policytest.CaseResult, failed, bad int) error {
	switch format {
	case "json":
		return report.JSON(w, struct {
			Cases    []policytest.CaseResult `json:"cases"`
			Passed   int                     `json:"passed"`
			Failed   int                     `json:"failed"`
			BadFiles int                     `json:"badFiles"`
		}{rs, len(rs) - failed, failed, bad})
	case "junit":
		return writeJUnit(w, rs)
	}
	for _, r := range rs {
		status := "PASS"
		if !r.Pass {
			status = "FAIL"
		}
		fmt.Fprintf(w, "%s %s (%s:%d)\n", status, r.ID(), r.File, r.Line)
		for _, f := range r.Failures {
			fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(f, "\n", "\n    "))
		}
	}
	_, err := fmt.Fprintf(w, "%d passed, %d failed, %d wrong test files\n", len(rs)-failed, failed, bad)
	return err
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr"`
	Line      int           `xml:"line,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
}

func writeJUnit(w io.Writer, rs []policytest.CaseResult) error {
	var suites []*junitSuite
	by := map[string]*junitSuite{}
	for _, r := range rs {
		s := by[r.File]
		if s == nil {
			s = &junitSuite{Name: r.Suite}
			by[r.File] = s
			suites = append(suites, s)
		}
		c := junitCase{Name: r.Name, Classname: r.Suite, File: r.File, Line: r.Line}
		if !r.Pass {
			c.Failure = &junitFailure{Message: strings.SplitN(r.Failures[0], "\n", 2)[0], Text: strings.Join(r.Failures, "\n")}
			s.Failures++
		}
		s.Tests++
		s.Cases = append(s.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	e := xml.NewEncoder(w)
	e.Indent("", "  ")
	if err := e.Encode(struct {
		XMLName xml.Name      `xml:"testsuites"`
		Suites  []*junitSuite `xml:"testsuite"`
	}{Suites: suites}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
