package audit

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podpatch/podpatch/internal/kube"
)

// Bounds of what the audit writes (issue 21). Every string of a Finding comes from a live
// object, and the API server validates some of them loosely or not at all: an
// ownerReference's kind, apiVersion and name are only required to be non-empty (a 500 KB kind
// is accepted), the provenance annotation is a free-form value, a field path joins map keys and
// list item names of the object. Each is clipped once, where the Finding is made, so the
// Report, the Events, the metrics and every output format of `podpatch audit` get bounded
// strings; the Report is bounded in bytes as a whole (buildReport).
const (
	// MaxString bounds every string of a Finding: names, the cluster and its group, the owner's
	// apiVersion, kind and name, each field path and each provenance entry. It is above the
	// longest such string the API server validates (an apiVersion of 317 bytes, a provenance
	// entry of about 400), so only what it does not validate is ever clipped. A longer one
	// keeps its head and ends with an ellipsis that says how much was cut ("…(+512000 bytes)").
	MaxString = 512
	// MaxFindingList bounds the differing fields and the provenance entries of a Finding (and of
	// each of its policies); beyond it, the last entry says how many more there are
	// ("… 120 more").
	MaxFindingList = 64
	// MaxReportBytes bounds the JSON encoding of one Report, well under what etcd stores in one
	// object (1.5 MiB by default): results beyond it, failures kept first, are summarised by one
	// result saying how many were omitted.
	MaxReportBytes = 1 << 20
	// MaxTableCell bounds a cell of `podpatch audit`'s table, so that no row is padded to the
	// width of a pathological one; the full (bounded) values are in -o json and -o yaml.
	MaxTableCell = 96
	// MaxTableLine bounds every other line of the table output (the fields and provenance
	// under each object).
	MaxTableLine = 2048
)

// ellipsis marks a clipped string or list.
const ellipsis = "…"

// clipList clips each entry to MaxString and keeps at most MaxFindingList entries, the last
// saying how many more there were.
func clipList(l []string) []string {
	if len(l) > MaxFindingList {
		more := len(l) - (MaxFindingList - 1)
		l = append(l[:MaxFindingList-1:MaxFindingList-1], fmt.Sprintf("%s %d more", ellipsis, more))
	}
	for i := range l {
		l[i] = kube.Clip(l[i], MaxString)
	}
	return l
}

// bound clips every string and list of a Finding (see MaxString, MaxFindingList). The owner is
// clipped where it is read (directOwner).
func (f *Finding) bound() {
	f.Namespace = kube.Clip(f.Namespace, MaxString)
	f.Name = kube.Clip(f.Name, MaxString)
	f.UID = kube.Clip(f.UID, MaxString)
	f.Cluster.Name = kube.Clip(f.Cluster.Name, MaxString)
	f.Cluster.Group = kube.Clip(f.Cluster.Group, MaxString)
	f.Fields = clipList(f.Fields)
	f.Applied = clipList(f.Applied)
	for i := range f.Policies {
		f.Policies[i].Ref = kube.Clip(f.Policies[i].Ref, MaxString)
		f.Policies[i].Fields = clipList(f.Policies[i].Fields)
	}
}

// boundOwner clips an owner's strings.
func boundOwner(o *Owner) *Owner {
	if o != nil {
		o.APIVersion, o.Kind = kube.Clip(o.APIVersion, MaxString), kube.Clip(o.Kind, MaxString)
		o.Name, o.UID = kube.Clip(o.Name, MaxString), kube.Clip(o.UID, MaxString)
	}
	return o
}

// plausibleOwner reports whether an owner can name an object that exists, so that an Event on
// it may be written: its kind is what a CustomResourceDefinition accepts (a DNS-1035 label,
// lowercased) and its name at most a DNS subdomain's length. An ownerReference is checked for
// neither by the API server.
func plausibleOwner(o *Owner) bool {
	return len(validation.IsDNS1035Label(strings.ToLower(o.Kind))) == 0 &&
		o.Name != "" && len(o.Name) <= validation.DNS1123SubdomainMaxLength
}

// Printable escapes what a terminal or a table would interpret: control characters (escape
// sequences, tabs, newlines) and other non-graphic runes are written as Go escapes.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if !unicode.IsGraphic(r) || r == utf8.RuneError {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsGraphic(r) && r != utf8.RuneError {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToASCII(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

// cell is a table cell: printable, at most MaxTableCell bytes.
func cell(s string) string { return kube.Clip(Printable(s), MaxTableCell) }

// short is a printable name, at most MaxString bytes.
func short(s string) string { return kube.Clip(Printable(s), MaxString) }

// line is a printable value clipped so that its line stays within MaxTableLine bytes.
func line(s string) string { return kube.Clip(Printable(s), MaxTableLine-2*MaxString) }
