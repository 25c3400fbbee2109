package audit

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podpatch/podpatch/internal/report"
)

// Bounds of what the audit writes. Every string of a Record comes from a live
// object, and the API server validates some of them loosely or not at all: an
// ownerReference's kind, apiVersion and name are only required to be non-empty (a 500 KB kind
// is accepted), the provenance annotation is a free-form value, a field path joins map keys and
// list item names of the object. Each is clipped once, where the Record is made, to
// report.MaxString (names, the cluster and its group, the owner's apiVersion, kind and name,
// each field path and each provenance entry), so the Report, the Events, the metrics and every
// output format of `podpatch audit` get bounded strings; the Report is bounded in bytes as a
// whole (buildReport).
const (
	// MaxRecordList bounds the differing fields and the provenance entries of a Record (and of
	// each of its policies); beyond it, the last entry says how many more there are
	// ("… 120 more").
	MaxRecordList = 64
	// MaxReportBytes bounds the JSON encoding of one Report, well under what etcd stores in one
	// object (1.5 MiB by default): results beyond it, failures kept first, are summarised by one
	// result saying how many were omitted.
	MaxReportBytes = 1 << 20
	// MaxTableCell bounds a cell of `podpatch audit`'s table, so that no row is padded to the
	// width of a pathological one; the full (bounded) values are in -o json and -o yaml. Every
	// other line of the table is bounded by report.MaxTableLine.
	MaxTableCell = 96
)

// ellipsis marks a clipped string or list.
const ellipsis = "…"

// ClipList clips each entry to report.MaxString and keeps at most MaxRecordList entries, the
// last saying how many more there were.
func ClipList(l []string) []string {
	if len(l) > MaxRecordList {
		more := len(l) - (MaxRecordList - 1)
		l = append(l[:MaxRecordList-1:MaxRecordList-1], fmt.Sprintf("%s %d more", ellipsis, more))
	}
	for i := range l {
		l[i] = report.Clip(l[i], report.MaxString)
	}
	return l
}

// bound clips every string and list of a Record (see report.MaxString, MaxRecordList). The
// owner is clipped where it is read (directOwner).
func (f *Record) bound() {
	f.Namespace = report.Clip(f.Namespace, report.MaxString)
	f.Name = report.Clip(f.Name, report.MaxString)
	f.UID = report.Clip(f.UID, report.MaxString)
	f.Cluster.Name = report.Clip(f.Cluster.Name, report.MaxString)
	f.Cluster.Group = report.Clip(f.Cluster.Group, report.MaxString)
	f.Fields = ClipList(f.Fields)
	f.Applied = ClipList(f.Applied)
	for i := range f.Policies {
		f.Policies[i].Ref = report.Clip(f.Policies[i].Ref, report.MaxString)
		f.Policies[i].Fields = ClipList(f.Policies[i].Fields)
		f.Policies[i].ChangedBy = boundChanges(f.Policies[i].ChangedBy)
	}
}

// boundChanges keeps at most MaxRecordList changes, each string clipped (the manager,
// operation, subresource and time were clipped where managedFields were read).
func boundChanges(cs []FieldChange) []FieldChange {
	if len(cs) > MaxRecordList {
		cs = cs[:MaxRecordList]
	}
	for i := range cs {
		cs[i].Field = report.Clip(cs[i].Field, report.MaxString)
	}
	return cs
}

// BoundOwner clips an owner's strings.
func BoundOwner(o *Owner) *Owner {
	if o != nil {
		o.APIVersion, o.Kind = report.Clip(o.APIVersion, report.MaxString), report.Clip(o.Kind, report.MaxString)
		o.Name, o.UID = report.Clip(o.Name, report.MaxString), report.Clip(o.UID, report.MaxString)
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

// cell is a table cell: printable, at most MaxTableCell bytes.
func cell(s string) string { return report.Clip(report.Printable(s), MaxTableCell) }

// line is a printable value clipped so that its line (after a name of report.MaxString bytes)
// stays within report.MaxTableLine bytes.
func line(s string) string {
	return report.Clip(report.Printable(s), report.MaxTableLine-2*report.MaxString)
}
