package k8sfields

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/policies/versions"
)

// WildcardContainer is the container name that applies an entry to every container of a list.
const WildcardContainer = "*"

// MainContainer is the container name that applies an entry to the manager's main container.
const MainContainer = "@main"

// wildcardContainer and mainContainerName are the package's own short names of the above.
const (
	wildcardContainer = WildcardContainer
	mainContainerName = MainContainer
)

// The rules of a container's fields: name, env, ports, mounts, resources, probes, lifecycle
// handlers and the container security context.

// validateContainersPatch checks a containers or initContainers list (init) of the pod spec s.
// Entries are matched to the object's containers by name, so a name is required and unique;
// "*" means every container.
func validateContainersPatch(containers []corev1.Container, s *corev1.PodSpec, init bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := make(map[string]bool, len(containers))
	for i := range containers {
		c := &containers[i]
		p := fld.Index(i)
		namePath := p.Child("name")
		switch c.Name {
		case "":
			errs = append(errs, field.Required(namePath,
				"the name of the container to patch, or \"*\" for every container"))
		case wildcardContainer, mainContainerName:
			// "@main" may set the main container's image: it is never a sidecar, and on KubeRay,
			// whose main container has no conventional name, a named whole entry would be the
			// platform's container, replacing it (appendSidecars).
			if c.Image != "" && c.Name == wildcardContainer {
				errs = append(errs, field.Forbidden(p.Child("image"),
					strconv.Quote(c.Name)+" applies to every container; name one container to add a sidecar"))
			}
			if c.Name == mainContainerName && !strings.HasSuffix(fld.String(), ".containers") {
				errs = append(errs, field.Invalid(namePath, c.Name, "the manager's main container is one of containers"))
			}
		default:
			errs = append(errs, invalidIf(namePath, c.Name, validation.IsDNS1123Label(c.Name))...)
		}
		if c.Name != "" {
			if names[c.Name] {
				errs = append(errs, field.Duplicate(namePath, c.Name))
			}
			names[c.Name] = true
		}
		errs = append(errs, validateEnvPatch(c.Env, p.Child("env"))...)
		errs = append(errs, validateEnvFromPatch(c.EnvFrom, p.Child("envFrom"))...)
		errs = append(errs, validateContainerPortsPatch(c.Ports, p.Child("ports"))...)
		errs = append(errs, validateVolumeMountsPatch(c.VolumeMounts, p.Child("volumeMounts"))...)
		errs = append(errs, validateResourcesPatch(&c.Resources, p.Child("resources"))...)
		switch c.ImagePullPolicy {
		case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		default:
			errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), string(c.ImagePullPolicy),
				[]corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}))
		}
		errs = append(errs, validateContainerFieldsPatch(c, s, init, p)...)
	}
	return errs
}

// validateEnvPatch checks env entries; they merge by name, so names are unique.
func validateEnvPatch(env []corev1.EnvVar, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := make(map[string]bool, len(env))
	for i, e := range env {
		p := fld.Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "the name of the environment variable"))
		} else {
			errs = append(errs, invalidIf(p.Child("name"), e.Name, envVarName(e.Name))...)
			if names[e.Name] {
				errs = append(errs, field.Duplicate(p.Child("name"), e.Name))
			}
			names[e.Name] = true
		}
		if e.ValueFrom == nil {
			continue
		}
		from := p.Child("valueFrom")
		if e.Value != "" {
			errs = append(errs, field.Forbidden(from, "may not be set when value is set"))
		}
		switch n := countSet(e.ValueFrom.FieldRef != nil, e.ValueFrom.ResourceFieldRef != nil,
			e.ValueFrom.ConfigMapKeyRef != nil, e.ValueFrom.SecretKeyRef != nil, e.ValueFrom.FileKeyRef != nil); {
		case n == 0:
			errs = append(errs, field.Required(from,
				"must set one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef or fileKeyRef"))
		case n > 1:
			errs = append(errs, field.Forbidden(from,
				"may set only one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef and fileKeyRef"))
		}
	}
	return errs
}

// envVarName checks an environment variable name or envFrom prefix: any printable name where
// every supported Kubernetes version accepts one (versions.RelaxedEnvNames), else the strict
// form.
func envVarName(name string) []string {
	if versions.RelaxedEnvNames.HoldsOnEvery() {
		return validation.IsRelaxedEnvVarName(name)
	}
	return validation.IsEnvVarName(name)
}

// validateEnvFromPatch checks envFrom entries.
func validateEnvFromPatch(envFrom []corev1.EnvFromSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range envFrom {
		p := fld.Index(i)
		if e.Prefix != "" {
			errs = append(errs, invalidIf(p.Child("prefix"), e.Prefix, envVarName(e.Prefix))...)
		}
		switch countSet(e.ConfigMapRef != nil, e.SecretRef != nil) {
		case 0:
			errs = append(errs, field.Required(p, "must set configMapRef or secretRef"))
		case 2:
			errs = append(errs, field.Forbidden(p, "may set only one of configMapRef and secretRef"))
		}
	}
	return errs
}

// validateContainerPortsPatch checks container ports; they merge by (containerPort, protocol).
func validateContainerPortsPatch(ports []corev1.ContainerPort, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, port := range ports {
		p := fld.Index(i)
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(p.Child("containerPort"), "the port number, 1-65535"))
		} else {
			errs = append(errs, invalidIf(p.Child("containerPort"), port.ContainerPort,
				validation.IsValidPortNum(int(port.ContainerPort)))...)
		}
		if port.HostPort != 0 {
			errs = append(errs, invalidIf(p.Child("hostPort"), port.HostPort, validation.IsValidPortNum(int(port.HostPort)))...)
		}
		if port.Name != "" {
			errs = append(errs, invalidIf(p.Child("name"), port.Name, validation.IsValidPortName(port.Name))...)
		}
		errs = append(errs, validateProtocol(port.Protocol, p.Child("protocol"))...)
	}
	return errs
}

// validateVolumeMountsPatch checks volume mounts; they merge by mountPath, so it is unique. The
// volume a mount names may come from the object, so it is not looked up among the policy's.
func validateVolumeMountsPatch(mounts []corev1.VolumeMount, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths := make(map[string]bool, len(mounts))
	for i, m := range mounts {
		p := fld.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "the name of the volume to mount"))
		}
		switch {
		case m.MountPath == "":
			errs = append(errs, field.Required(p.Child("mountPath"), "the path in the container to mount the volume at"))
		case paths[m.MountPath]:
			errs = append(errs, field.Duplicate(p.Child("mountPath"), m.MountPath))
		}
		paths[m.MountPath] = true
	}
	return errs
}

// validateResourcesPatch checks requests and limits. A request is compared with the limit only
// when the policy sets both: the other may come from the object.
func validateResourcesPatch(r *corev1.ResourceRequirements, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	limits := fld.Child("limits")
	for _, name := range slices.Sorted(maps.Keys(r.Limits)) {
		errs = append(errs, validateResourceQuantity(name, r.Limits[name], limits.Key(string(name)))...)
	}
	requests := fld.Child("requests")
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		p := requests.Key(string(name))
		request := r.Requests[name]
		errs = append(errs, validateResourceQuantity(name, request, p)...)
		limit, ok := r.Limits[name]
		if !ok {
			continue
		}
		switch {
		case resourceOvercommitAllowed(string(name)):
			if request.Cmp(limit) > 0 {
				errs = append(errs, field.Invalid(p, request.String(),
					fmt.Sprintf("must be less than or equal to the %s limit of %s", name, limit.String())))
			}
		case request.Cmp(limit) != 0:
			errs = append(errs, field.Invalid(p, request.String(),
				fmt.Sprintf("must equal the %s limit of %s: %s cannot be overcommitted", name, limit.String(), name)))
		}
	}
	return errs
}

// validateResourceQuantity checks one resource name and its quantity, at fld (…limits[name]).
func validateResourceQuantity(name corev1.ResourceName, q resource.Quantity, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := string(name)
	if msgs := validation.IsQualifiedName(n); len(msgs) > 0 {
		errs = append(errs, field.Invalid(fld, n, "a resource name "+strings.Join(msgs, "; ")))
	} else if !strings.Contains(n, "/") && !isStandardContainerResource(n) {
		errs = append(errs, field.Invalid(fld, n,
			"must be a standard container resource (cpu, memory, ephemeral-storage, hugepages-<size>) "+
				"or an extended resource with a domain, such as nvidia.com/gpu"))
	}
	switch {
	case q.Sign() < 0:
		errs = append(errs, field.Invalid(fld, q.String(), "must be greater than or equal to 0"))
	case isExtendedResource(n) && q.MilliValue()%1000 != 0:
		errs = append(errs, field.Invalid(fld, q.String(), "must be a whole number: extended resources cannot be fractional"))
	}
	return errs
}

// isStandardContainerResource reports whether an unprefixed resource name is one a container
// may request.
func isStandardContainerResource(name string) bool {
	switch corev1.ResourceName(name) {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return true
	}
	return strings.HasPrefix(name, corev1.ResourceHugePagesPrefix)
}

// isNativeResource reports whether a resource name belongs to Kubernetes itself (no domain, or
// a kubernetes.io domain).
func isNativeResource(name string) bool {
	return !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/")
}

// isExtendedResource reports whether a resource name is an extended resource (nvidia.com/gpu):
// counted in whole units and never overcommitted.
func isExtendedResource(name string) bool {
	return !isNativeResource(name) && !strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix)
}

// resourceOvercommitAllowed reports whether a request may be lower than its limit; extended
// resources and huge pages must request exactly their limit.
func resourceOvercommitAllowed(name string) bool {
	return isNativeResource(name) && !strings.HasPrefix(name, corev1.ResourceHugePagesPrefix)
}

// validateContainerFieldsPatch checks what validateContainersPatch leaves to it: the security
// context, probes and hooks, the environment's references and the mounts' options of one
// entry c of the pod spec s; init says c is an init container.
func validateContainerFieldsPatch(c *corev1.Container, s *corev1.PodSpec, init bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	privileged := false
	if sc := c.SecurityContext; sc != nil {
		errs = append(errs, validateContainerSecurityContextPatch(sc, s, fld.Child("securityContext"))...)
		privileged = sc.Privileged != nil && *sc.Privileged
	}
	grace := gracePeriodOf(s)
	sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
	probes := []struct {
		name  string
		probe *corev1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}}
	for _, pr := range probes {
		if pr.probe == nil {
			continue
		}
		if init && !sidecar {
			errs = append(errs, field.Forbidden(fld.Child(pr.name), "may be set for an init container only with restartPolicy Always, in the same entry"))
			continue
		}
		errs = append(errs, validateProbePatch(pr.probe, pr.name, fld.Child(pr.name))...)
	}
	if lc := c.Lifecycle; lc != nil {
		p := fld.Child("lifecycle")
		if init && !sidecar {
			errs = append(errs, field.Forbidden(p, "may be set for an init container only with restartPolicy Always, in the same entry"))
		} else {
			for _, hook := range []struct {
				name string
				h    *corev1.LifecycleHandler
			}{{"postStart", lc.PostStart}, {"preStop", lc.PreStop}} {
				if hook.h != nil {
					errs = append(errs, validateHandlerPatch(handler{hook.h.Exec, hook.h.HTTPGet, hook.h.TCPSocket, nil, hook.h.Sleep},
						grace, p.Child(hook.name))...)
				}
			}
			errs = append(errs, validateStopSignal(lc.StopSignal, s.OS, p.Child("stopSignal"))...)
		}
	}
	switch c.TerminationMessagePolicy {
	case "", corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	default:
		errs = append(errs, field.NotSupported(fld.Child("terminationMessagePolicy"), string(c.TerminationMessagePolicy),
			[]corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}))
	}
	if rp := c.RestartPolicy; rp != nil {
		errs = append(errs, notSupported(fld.Child("restartPolicy"), *rp,
			corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever)...)
	}
	resized := make(map[corev1.ResourceName]bool, len(c.ResizePolicy))
	for i, rp := range c.ResizePolicy {
		p := fld.Child("resizePolicy").Index(i)
		errs = append(errs, notSupported(p.Child("resourceName"), rp.ResourceName, corev1.ResourceCPU, corev1.ResourceMemory)...)
		errs = append(errs, notSupported(p.Child("restartPolicy"), rp.RestartPolicy, corev1.NotRequired, corev1.RestartContainer)...)
		if resized[rp.ResourceName] {
			errs = append(errs, field.Duplicate(p.Child("resourceName"), string(rp.ResourceName)))
		}
		resized[rp.ResourceName] = true
	}
	for i, e := range c.Env {
		if e.ValueFrom != nil {
			errs = append(errs, validateEnvSourcePatch(e.ValueFrom, fld.Child("env").Index(i).Child("valueFrom"))...)
		}
	}
	for i, e := range c.EnvFrom {
		p := fld.Child("envFrom").Index(i)
		if e.ConfigMapRef != nil {
			errs = append(errs, validateObjectName(e.ConfigMapRef.Name, "ConfigMap", p.Child("configMapRef", "name"))...)
		}
		if e.SecretRef != nil {
			errs = append(errs, validateObjectName(e.SecretRef.Name, "Secret", p.Child("secretRef", "name"))...)
		}
	}
	for i, m := range c.VolumeMounts {
		errs = append(errs, validateMountOptions(m, privileged, fld.Child("volumeMounts").Index(i))...)
	}
	return errs
}

// validateContainerSecurityContextPatch checks a container's security context; procMount
// Unmasked needs the policy's own hostUsers: false, privilege escalation rules hold within the
// entry.
func validateContainerSecurityContextPatch(sc *corev1.SecurityContext, s *corev1.PodSpec, fld *field.Path) field.ErrorList {
	errs := validateIDs(sc.RunAsUser, sc.RunAsGroup, fld)
	if pm := sc.ProcMount; pm != nil {
		errs = append(errs, notSupported(fld.Child("procMount"), *pm, corev1.DefaultProcMount, corev1.UnmaskedProcMount)...)
		if *pm == corev1.UnmaskedProcMount && (s.HostUsers == nil || *s.HostUsers) {
			errs = append(errs, field.Invalid(fld.Child("procMount"), string(*pm), "Unmasked needs hostUsers: false, in the same policy"))
		}
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if sc.Privileged != nil && *sc.Privileged {
			errs = append(errs, field.Invalid(fld.Child("allowPrivilegeEscalation"), false, "may not be false when privileged is true"))
		}
		if sc.Capabilities != nil && slices.Contains(sc.Capabilities.Add, "CAP_SYS_ADMIN") {
			errs = append(errs, field.Invalid(fld.Child("allowPrivilegeEscalation"), false, "may not be false when capabilities.add has CAP_SYS_ADMIN"))
		}
	}
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, fld.Child("seccompProfile"))...)
	return append(errs, validateAppArmorProfile(sc.AppArmorProfile, fld.Child("appArmorProfile"))...)
}

// validateProbePatch checks a probe. The policy's probe replaces the handler of the object's
// (reference §3) or becomes the container's probe, so it needs exactly one handler of its own.
func validateProbePatch(pr *corev1.Probe, kind string, fld *field.Path) field.ErrorList {
	errs := validateHandlerPatch(handler{pr.Exec, pr.HTTPGet, pr.TCPSocket, pr.GRPC, nil}, 0, fld)
	for _, n := range []struct {
		name  string
		value int32
	}{
		{"initialDelaySeconds", pr.InitialDelaySeconds}, {"timeoutSeconds", pr.TimeoutSeconds}, {"periodSeconds", pr.PeriodSeconds},
		{"successThreshold", pr.SuccessThreshold}, {"failureThreshold", pr.FailureThreshold},
	} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(n.value), fld.Child(n.name))...)
	}
	if kind != "readinessProbe" && pr.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(fld.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil {
		switch {
		case kind == "readinessProbe":
			errs = append(errs, field.Invalid(fld.Child("terminationGracePeriodSeconds"), *g, "must not be set for readiness probes"))
		case *g <= 0:
			errs = append(errs, field.Invalid(fld.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
		}
	}
	return errs
}

// handler is the one-of of a probe or lifecycle hook (probes have no sleep, hooks no grpc).
type handler struct {
	exec      *corev1.ExecAction
	httpGet   *corev1.HTTPGetAction
	tcpSocket *corev1.TCPSocketAction
	grpc      *corev1.GRPCAction
	sleep     *corev1.SleepAction
}

// validateHandlerPatch checks that exactly one handler is set, and that handler; a sleep must
// end within grace seconds.
func validateHandlerPatch(h handler, grace int64, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	var set []string
	if h.exec != nil {
		set = append(set, "exec")
		if len(h.exec.Command) == 0 {
			errs = append(errs, field.Required(fld.Child("exec", "command"), "the command to run"))
		}
	}
	if g := h.httpGet; g != nil {
		set = append(set, "httpGet")
		p := fld.Child("httpGet")
		errs = append(errs, validatePortNumOrName(g.Port, p.Child("port"))...)
		if g.Scheme != "" {
			errs = append(errs, notSupported(p.Child("scheme"), g.Scheme, corev1.URISchemeHTTP, corev1.URISchemeHTTPS)...)
		}
		for i, header := range g.HTTPHeaders {
			errs = append(errs, invalidIf(p.Child("httpHeaders").Index(i).Child("name"), header.Name, validation.IsHTTPHeaderName(header.Name))...)
		}
	}
	if h.tcpSocket != nil {
		set = append(set, "tcpSocket")
		errs = append(errs, validatePortNumOrName(h.tcpSocket.Port, fld.Child("tcpSocket", "port"))...)
	}
	if h.grpc != nil {
		set = append(set, "grpc")
		errs = append(errs, invalidIf(fld.Child("grpc", "port"), h.grpc.Port, validation.IsValidPortNum(int(h.grpc.Port)))...)
	}
	if h.sleep != nil {
		set = append(set, "sleep")
		if s := h.sleep.Seconds; s < 0 || s > grace {
			errs = append(errs, field.Invalid(fld.Child("sleep", "seconds"), s,
				fmt.Sprintf("must be between 0 and the pod's terminationGracePeriodSeconds (%d; set a longer one in the same policy)", grace)))
		}
	}
	switch {
	case len(set) == 0:
		errs = append(errs, field.Required(fld, "must set one handler (exec, httpGet, tcpSocket, grpc or sleep, as the field allows)"))
	case len(set) > 1:
		errs = append(errs, field.Forbidden(fld.Child(set[1]), "may not set more than one handler; "+set[0]+" is set"))
	}
	return errs
}

// linuxStopSignals are the signals a Linux container may be stopped with.
var linuxStopSignals = []corev1.Signal{
	"SIGABRT", "SIGALRM", "SIGBUS", "SIGCHLD", "SIGCLD", "SIGCONT", "SIGFPE", "SIGHUP", "SIGILL", "SIGINT", "SIGIO",
	"SIGIOT", "SIGKILL", "SIGPIPE", "SIGPOLL", "SIGPROF", "SIGPWR", "SIGQUIT", "SIGSEGV", "SIGSTKFLT", "SIGSTOP",
	"SIGSYS", "SIGTERM", "SIGTRAP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGUSR1", "SIGUSR2", "SIGVTALRM",
	"SIGWINCH", "SIGXCPU", "SIGXFSZ", "SIGRTMIN", "SIGRTMIN+1", "SIGRTMIN+2", "SIGRTMIN+3", "SIGRTMIN+4",
	"SIGRTMIN+5", "SIGRTMIN+6", "SIGRTMIN+7", "SIGRTMIN+8", "SIGRTMIN+9", "SIGRTMIN+10", "SIGRTMIN+11",
	"SIGRTMIN+12", "SIGRTMIN+13", "SIGRTMIN+14", "SIGRTMIN+15", "SIGRTMAX-14", "SIGRTMAX-13", "SIGRTMAX-12",
	"SIGRTMAX-11", "SIGRTMAX-10", "SIGRTMAX-9", "SIGRTMAX-8", "SIGRTMAX-7", "SIGRTMAX-6", "SIGRTMAX-5",
	"SIGRTMAX-4", "SIGRTMAX-3", "SIGRTMAX-2", "SIGRTMAX-1", "SIGRTMAX",
}

// validateStopSignal checks a container's stop signal, which needs the pod's os, in the same
// policy.
func validateStopSignal(sig *corev1.Signal, os *corev1.PodOS, fld *field.Path) field.ErrorList {
	switch {
	case sig == nil:
		return nil
	case os == nil:
		return field.ErrorList{field.Forbidden(fld, "needs spec.os.name, in the same policy")}
	case os.Name == corev1.Windows:
		return notSupported(fld, *sig, corev1.SIGKILL, corev1.SIGTERM)
	default:
		return notSupported(fld, *sig, linuxStopSignals...)
	}
}

// envFieldPaths are the pod fields an environment variable may refer to, besides
// metadata.labels['<key>'] and metadata.annotations['<key>'].
var envFieldPaths = []string{
	"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
	"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
}

// envResources are the container resources an environment variable may refer to, besides
// requests.hugepages-<size> and limits.hugepages-<size>.
var envResources = []string{
	"limits.cpu", "limits.memory", "limits.ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
}

// validateEnvSourcePatch checks what an environment variable's valueFrom refers to (which one
// is set is validateEnvPatch's concern).
func validateEnvSourcePatch(from *corev1.EnvVarSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if f := from.FieldRef; f != nil {
		errs = append(errs, validateFieldRef(f, envFieldPaths, fld.Child("fieldRef"))...)
	}
	if r := from.ResourceFieldRef; r != nil {
		errs = append(errs, validateResourceFieldRef(r, false, fld.Child("resourceFieldRef"))...)
	}
	if r := from.ConfigMapKeyRef; r != nil {
		p := fld.Child("configMapKeyRef")
		errs = append(errs, validateObjectName(r.Name, "ConfigMap", p.Child("name"))...)
		errs = append(errs, validateKey(r.Key, p.Child("key"))...)
	}
	if r := from.SecretKeyRef; r != nil {
		p := fld.Child("secretKeyRef")
		errs = append(errs, validateObjectName(r.Name, "Secret", p.Child("name"))...)
		errs = append(errs, validateKey(r.Key, p.Child("key"))...)
	}
	return errs
}

// subscriptedField matches metadata.labels['<key>'] and metadata.annotations['<key>'].
var subscriptedField = regexp.MustCompile(`^(metadata\.labels|metadata\.annotations)\['(.*)'\]$`)

// validateFieldRef checks a downward API field reference against the paths allowed there.
func validateFieldRef(f *corev1.ObjectFieldSelector, allowed []string, fld *field.Path) field.ErrorList {
	if f.APIVersion != "" && f.APIVersion != "v1" {
		return field.ErrorList{field.NotSupported(fld.Child("apiVersion"), f.APIVersion, []string{"v1"})}
	}
	p := fld.Child("fieldPath")
	if m := subscriptedField.FindStringSubmatch(f.FieldPath); m != nil {
		key := m[2]
		if m[1] == "metadata.annotations" {
			key = strings.ToLower(key)
		}
		return invalidIf(p, f.FieldPath, validation.IsQualifiedName(key))
	}
	if f.FieldPath == "" {
		return field.ErrorList{field.Required(p, "the pod field, such as metadata.name")}
	}
	return notSupported(p, f.FieldPath, allowed...)
}

// validateResourceFieldRef checks a downward API resource reference; in a volume it must name
// its container.
func validateResourceFieldRef(r *corev1.ResourceFieldSelector, volume bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if volume && r.ContainerName == "" {
		errs = append(errs, field.Required(fld.Child("containerName"), "the container whose resources to expose"))
	}
	switch {
	case r.Resource == "":
		errs = append(errs, field.Required(fld.Child("resource"), "such as limits.memory"))
	case slices.Contains(envResources, r.Resource), strings.HasPrefix(r.Resource, "requests.hugepages-"), strings.HasPrefix(r.Resource, "limits.hugepages-"):
	default:
		errs = append(errs, field.NotSupported(fld.Child("resource"), r.Resource, envResources))
	}
	if !r.Divisor.IsZero() && !divisorSupported(r.Resource, r.Divisor) {
		errs = append(errs, field.Invalid(fld.Child("divisor"), r.Divisor.String(), "not a divisor supported with "+r.Resource))
	}
	return errs
}

// validateMountOptions checks a volume mount's options (validateVolumeMountsPatch checks its
// name and path); Bidirectional propagation needs the entry's own privileged: true.
func validateMountOptions(m corev1.VolumeMount, privileged bool, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.SubPath != "" {
		errs = append(errs, validateRelativePath(m.SubPath, fld.Child("subPath"))...)
	}
	if m.SubPathExpr != "" {
		if m.SubPath != "" {
			errs = append(errs, field.Invalid(fld.Child("subPathExpr"), m.SubPathExpr, "may not be set together with subPath"))
		}
		errs = append(errs, validateRelativePath(m.SubPathExpr, fld.Child("subPathExpr"))...)
	}
	if mp := m.MountPropagation; mp != nil {
		errs = append(errs, notSupported(fld.Child("mountPropagation"), *mp,
			corev1.MountPropagationNone, corev1.MountPropagationHostToContainer, corev1.MountPropagationBidirectional)...)
		if *mp == corev1.MountPropagationBidirectional && !privileged {
			errs = append(errs, field.Forbidden(fld.Child("mountPropagation"), "Bidirectional needs securityContext.privileged: true, in the same container entry"))
		}
	}
	// An alpha field (VolumeBindMountOptions): a cluster with its gate on validates it
	// (policies/versions: dropped where the gate is off).
	seen := make(map[string]bool, len(m.BindMountOptions))
	for i, opt := range m.BindMountOptions {
		p := fld.Child("bindMountOptions").Index(i)
		errs = append(errs, notSupported(p, corev1.BindMountOption(opt), corev1.BindMountOptionNoDev, corev1.BindMountOptionNoExec, corev1.BindMountOptionNoSUID)...)
		if seen[opt] {
			errs = append(errs, field.Duplicate(p, opt))
		}
		seen[opt] = true
	}
	if rro := m.RecursiveReadOnly; rro != nil {
		p := fld.Child("recursiveReadOnly")
		switch *rro {
		case corev1.RecursiveReadOnlyDisabled:
		case corev1.RecursiveReadOnlyEnabled, corev1.RecursiveReadOnlyIfPossible:
			if !m.ReadOnly {
				errs = append(errs, field.Forbidden(p, "may be set only with readOnly: true"))
			}
			if m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
				errs = append(errs, field.Forbidden(p, "may be set only when mountPropagation is None or unset"))
			}
		default:
			errs = append(errs, field.NotSupported(p, string(*rro), []corev1.RecursiveReadOnlyMode{
				corev1.RecursiveReadOnlyDisabled, corev1.RecursiveReadOnlyIfPossible, corev1.RecursiveReadOnlyEnabled}))
		}
	}
	return errs
}

// divisors are the divisors validateContainerResourceDivisor accepts for a resource, by the
// resource's kind (cpu; memory, ephemeral storage and huge pages).
var (
	cpuDivisors  = []string{"1m", "1"}
	sizeDivisors = []string{"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"}
)

// divisorSupported reports whether a downward API divisor is one the API server accepts with
// the resource (a zero divisor is unset: it defaults to 1).
func divisorSupported(res string, d resource.Quantity) bool {
	if d.IsZero() {
		return true
	}
	name := res[strings.IndexByte(res, '.')+1:]
	switch {
	case name == "cpu":
		return slices.Contains(cpuDivisors, d.String())
	case name == "memory", name == "ephemeral-storage", strings.HasPrefix(name, corev1.ResourceHugePagesPrefix):
		return slices.Contains(sizeDivisors, d.String())
	}
	return true
}
