package policies

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/externalurl/urltemplate"
)

// The external URL contract (reference §6): a Service asks for its externally reachable URL and
// podpatch writes it back. The generalisation of the Spark-on-Kubernetes driver annotations
// (apache-spark-on-k8s #140, shipped in #147), which are honoured as they were.
const (
	// ProvideExternalURLAnnotation set to "true" on a Service requests its external URL.
	ProvideExternalURLAnnotation = "podpatch.io/provide-external-url"
	// ExternalURLTemplateAnnotation optionally gives the URL as a template (urltemplate.Parse).
	ExternalURLTemplateAnnotation = "podpatch.io/external-url-template"
	// ExternalURLPortAnnotation optionally names the Service port (name or number) to expose.
	ExternalURLPortAnnotation = "podpatch.io/external-url-port"
	// ExternalURLAnnotation is the result: the URL.
	ExternalURLAnnotation = "podpatch.io/external-url"
	// ExternalURLSourceAnnotation is the result: where the URL came from (template,
	// load-balancer, node-port).
	ExternalURLSourceAnnotation = "podpatch.io/external-url-source"
	// SparkProvideExternalURIAnnotation is the legacy Spark request.
	SparkProvideExternalURIAnnotation = "spark-job.alpha.apache.org/provideExternalUri"
	// SparkResolvedExternalURIAnnotation is the legacy Spark result.
	SparkResolvedExternalURIAnnotation = "spark-job.alpha.apache.org/resolvedExternalUri"
)

// validateExternalURLAnnotations checks the request annotations a policy sets, and keeps the
// result annotations, which the resolver writes, out of policies.
func validateExternalURLAnnotations(annotations map[string]string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		v := annotations[k]
		switch {
		case k == ExternalURLAnnotation || k == ExternalURLSourceAnnotation || k == SparkResolvedExternalURIAnnotation:
			errs = append(errs, field.Forbidden(fld.Key(k), "written by podpatch's external URL resolver; a policy may not set it"))
			continue
		case v == "": // unset, or a null that removes the annotation
			continue
		}
		switch k {
		case ExternalURLTemplateAnnotation:
			if err := urltemplate.Validate(v); err != nil {
				errs = append(errs, field.Invalid(fld.Key(k), v, err.Error()))
			}
		case ProvideExternalURLAnnotation:
			if _, err := strconv.ParseBool(v); err != nil {
				errs = append(errs, field.Invalid(fld.Key(k), v, `must be "true" or "false"`))
			}
		case ExternalURLPortAnnotation:
			if err := validatePortRef(v); err != nil {
				errs = append(errs, field.Invalid(fld.Key(k), v, err.Error()))
			}
		}
	}
	return errs
}

// validatePortRef accepts a port number or a port name, as a Service port may be named.
func validatePortRef(v string) error {
	if n, err := strconv.Atoi(v); err == nil {
		if msgs := validation.IsValidPortNum(n); len(msgs) > 0 {
			return errors.New(strings.Join(msgs, "; "))
		}
		return nil
	}
	if msgs := validation.IsValidPortName(v); len(msgs) > 0 {
		return errors.New("a Service port name or number: " + strings.Join(msgs, "; "))
	}
	return nil
}
