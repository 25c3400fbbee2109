package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// WriteData writes a report as indented JSON or as YAML: -o json and -o yaml of `podpatch
// audit`, `diff` and `explain`. Any other format is an error naming formats, the command's.
func WriteData(w io.Writer, v any, format string, formats []string) error {
	switch format {
	case "json":
		return JSON(w, v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("unknown output format %q (want %s)", format, strings.Join(formats, ", "))
}

// JSON writes v as JSON indented by two spaces, and a newline: every report's -o json.
func JSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
