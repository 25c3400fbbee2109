package policies

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Ephemeral containers (reference §5, "Enforce on updates"): the part of the enforce policies
// that reaches the containers a pods/ephemeralcontainers update adds.

// addedEphemeral names the ephemeral containers of a Pod that its old version lacks, at most
// MaxEphemeralAdded (the API server adds them one `kubectl debug` at a time).
func addedEphemeral(obj, old []byte) ([]string, error) {
	names := func(b []byte) ([]string, error) {
		var p struct {
			Spec struct {
				EphemeralContainers []struct {
					Name string `json:"name"`
				} `json:"ephemeralContainers"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("decode pod: %w", err)
		}
		out := make([]string, 0, len(p.Spec.EphemeralContainers))
		for _, c := range p.Spec.EphemeralContainers {
			out = append(out, c.Name)
		}
		return out, nil
	}
	now, err := names(obj)
	if err != nil {
		return nil, err
	}
	before, err := names(old)
	if err != nil {
		return nil, err
	}
	had := make(map[string]bool, len(before)) // linear in the containers, however many
	for _, n := range before {
		had[n] = true
	}
	var added []string
	for _, n := range now {
		if n != "" && !had[n] && !slices.Contains(added, n) {
			if len(added) == MaxEphemeralAdded {
				return nil, fmt.Errorf("pod adds more than %d ephemeral containers in one update", MaxEphemeralAdded)
			}
			added = append(added, n)
		}
	}
	return added, nil
}

// MaxEphemeralAdded bounds the ephemeral containers one update may add for podpatch to patch:
// each costs a copy of the enforce policies' container entries.
const MaxEphemeralAdded = 16

// EphemeralFields are the container fields an enforce policy's entry brings to an ephemeral
// container: those the API server allows there (not ports, resources, probes, lifecycle,
// resizePolicy, restartPolicy) and that do not replace what the user runs (not image, command,
// args, stdin, tty). The second line (vap) checks the same.
var EphemeralFields = []string{"env", "envFrom", "volumeMounts", "volumeDevices", "securityContext",
	"imagePullPolicy", "workingDir", "terminationMessagePath", "terminationMessagePolicy"}

// ephemeralPatch is the part of an enforce policy's pod patch that reaches the ephemeral
// containers named (those an update adds): its entry for every container ("*" of containers),
// as an entry of each name with the EphemeralFields only. Nothing else: the subresource changes
// nothing else, and a policy may not name ephemeral containers (they are never set on create).
func ephemeralPatch(patch map[string]any, names []string) map[string]any {
	spec, _ := patch["spec"].(map[string]any)
	items, _ := spec["containers"].([]any)
	var star map[string]any
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && m["name"] == wildcardContainer {
			star = m
		}
	}
	fields := map[string]any{}
	for _, f := range EphemeralFields {
		if v, ok := star[f]; ok {
			fields[f] = v
		}
	}
	if len(fields) == 0 {
		return nil
	}
	out := make([]any, 0, len(names))
	for _, n := range names {
		c := make(map[string]any, len(fields)+1)
		maps.Copy(c, fields)
		c["name"] = n
		out = append(out, c)
	}
	return map[string]any{"spec": map[string]any{"ephemeralContainers": out}}
}
