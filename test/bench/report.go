package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/podpatch/podpatch/policies"
)

// Report is everything one `make bench` run measured.
type Report struct {
	Started, Finished time.Time
	Machine           Machine
	Revision          string
	// LoadAverages are /proc/loadavg at the start of each phase, in order.
	LoadAverages [][2]string
	Commands     []string

	Bench    GoBench
	BenchRaw string
	// BenchRounds is how many times the whole-handler benchmarks ran.
	BenchRounds string

	LoadDuration time.Duration
	LoadWorkers  int
	Load         []LoadResult
	Verified     []string

	E2E        []E2EResult
	E2ESkipped string

	Profiles []Profile
	PlotFile string
	// HeapProfiles are the policy store's heap profiles (policystore's TestStoreHeapProfile): Top
	// is the inuse_space top, TopHead its head; HeapLog what the test logged.
	HeapProfiles []Profile
	HeapLog      []string

	// Store is the policy-store run, one result per ConfigMap count; StoreSkipped says why it
	// is missing. StorePlotFile is its plot.
	Store         []StoreResult
	StoreSkipped  string
	StorePlotFile string
	// StoreSettle is how long RSS was sampled after ready.
	StoreSettle time.Duration
	// Scale is the end-to-end scale test at `make bench` size, when it ran.
	Scale *ScaleRun
}

// Profile is one CPU profile of the handler and the heads of its `go tool pprof -top` (flat)
// and `-top -cum` views.
type Profile struct {
	Name, Pprof, Top, Cum string
	TopHead, CumHead      []string
}

// Goal is one performance goal with what this run measured.
type Goal struct {
	Goal, Target, Measured string
	Met                    bool
}

const handlerName = "BenchmarkHandler/policies=%d/containers=%d"

func referenceName(containers int, ref string) string {
	return fmt.Sprintf("BenchmarkReference/containers=%d/%s", containers, ref)
}

// find returns the load result of a server, policy count and offered rate; for the closed
// loop (rate 0), the round with the highest throughput.
func (r *Report) find(server string, policies, rate int) (LoadResult, bool) {
	var best LoadResult
	found := false
	for _, l := range r.Load {
		if l.Server == server && l.Policies == policies && l.Spec.Rate == rate && (!found || l.Achieved > best.Achieved) {
			best, found = l, true
		}
	}
	return best, found
}

func (r *Report) e2e(webhook, modePrefix string) (E2EResult, bool) {
	for _, e := range r.E2E {
		if e.Webhook == webhook && strings.HasPrefix(e.Mode, modePrefix) {
			return e, true
		}
	}
	return E2EResult{}, false
}

// Goals evaluates the performance goals (at the tighter targets the memory and hot-path work
// set, where it set them) on this run's figures. A goal whose figures are missing is not met.
func (r *Report) Goals() []Goal {
	var goals []Goal
	notMeasured := func(g Goal) Goal { g.Measured, g.Met = "not measured", false; return g }

	// In-process CPU per admission vs the floor.
	g := Goal{Goal: "In-process CPU per admission, 1-container worker, 5 policies", Target: "≤ 1.5× the read-only-what-you-need floor"}
	h, ok1 := r.Bench.Get(fmt.Sprintf(handlerName, 5, 1), "cpu-ns/op")
	f, ok2 := r.Bench.Get(referenceName(1, "floor"), "cpu-ns/op")
	if ok1 && ok2 && f > 0 {
		g.Measured = fmt.Sprintf("%s vs floor %s = **%.2f×**", us(h), us(f), h/f)
		g.Met = h <= 1.5*f
		goals = append(goals, g)
	} else {
		goals = append(goals, notMeasured(g))
	}

	// Maximum throughput vs the references.
	pp, okP := r.find("podpatch", 5, 0)
	for _, ref := range []struct {
		name   string
		factor float64
	}{{"allow", 1.0}, {"idiomatic", 2}} {
		g := Goal{Goal: "Maximum throughput vs " + ref.name + " reference", Target: fmt.Sprintf("≥ %g× %s", ref.factor, ref.name)}
		rr, okR := r.find(ref.name, 0, 0)
		if okP && okR && rr.Achieved > 0 && pp.Errors == 0 {
			ratio := pp.Achieved / rr.Achieved
			g.Measured = fmt.Sprintf("%.0f/s vs %.0f/s = **%.2f×**", pp.Achieved, rr.Achieved, ratio)
			g.Met = ratio >= ref.factor
			goals = append(goals, g)
		} else {
			goals = append(goals, notMeasured(g))
		}
	}

	// p99 at 1,000 req/s.
	g = Goal{Goal: "p99 latency at 1,000 req/s (HTTPS loopback, 5 policies)", Target: "≤ 2 ms"}
	if l, ok := r.find("podpatch", 5, 1000); ok && l.Errors == 0 && !l.Saturated() {
		g.Measured = fmt.Sprintf("**%s**", ms(l.P99))
		if a, ok := r.find("allow", 0, 1000); ok {
			g.Measured += fmt.Sprintf(" (allow-only reference: %s)", ms(a.P99))
		}
		g.Met = l.P99 <= 2*time.Millisecond
		goals = append(goals, g)
	} else if ok {
		g.Measured = fmt.Sprintf("%s (%d errors, %.0f/s achieved)", ms(l.P99), l.Errors, l.Achieved)
		goals = append(goals, g)
	} else {
		goals = append(goals, notMeasured(g))
	}

	// Many loaded policies.
	base, okB := r.Bench.Get(fmt.Sprintf(handlerName, 5, 1), "cpu-ns/op")
	for _, n := range []int{1000, 10000} {
		g := Goal{Goal: fmt.Sprintf("CPU per request with %s loaded policies vs 5 (in-process handler, 1 container)", thousands(n)), Target: "≤ +10 %"}
		v, ok := r.Bench.Get(fmt.Sprintf(handlerName, n, 1), "cpu-ns/op")
		if okB && ok && base > 0 {
			d := (v/base - 1) * 100
			g.Measured = fmt.Sprintf("%s vs %s = **%+.1f %%**", us(v), us(base), d)
			if l, ok := r.find("podpatch", n, 1000); ok {
				if l5, ok := r.find("podpatch", 5, 1000); ok && l5.CPUPerRequest > 0 {
					g.Measured += fmt.Sprintf(" (server at 1,000/s: %s vs %s, %+.1f %%)", us(float64(l.CPUPerRequest)), us(float64(l5.CPUPerRequest)),
						(float64(l.CPUPerRequest)/float64(l5.CPUPerRequest)-1)*100)
				}
			}
			g.Met = d <= 10
			goals = append(goals, g)
		} else {
			goals = append(goals, notMeasured(g))
		}
	}

	// RSS with 1,000 policy ConfigMaps.
	g = Goal{Goal: "Server RSS with 1,000 policy ConfigMaps under steady load", Target: "≤ 40 MB"}
	var peak int64
	for _, l := range r.Load {
		if l.Server == "podpatch" && l.Policies == 1000 {
			peak = max(peak, l.PeakRSS)
		}
	}
	if peak > 0 {
		g.Measured = fmt.Sprintf("peak **%s** (VmHWM)", mb(peak))
		g.Met = peak <= 40*1000*1000
		goals = append(goals, g)
	} else {
		goals = append(goals, notMeasured(g))
	}

	// End to end.
	for _, mode := range []string{"sequential", "concurrent"} {
		over := 300 * time.Microsecond // the hot-path work's target
		if mode == "concurrent" {
			over = time.Millisecond
		}
		g := Goal{Goal: "End-to-end pod-create p50 delta, " + mode, Target: fmt.Sprintf("≤ allow-only delta + %s", ms(over))}
		none, ok1 := r.e2e("none", mode)
		allow, ok2 := r.e2e("allow", mode)
		pp, ok3 := r.e2e("podpatch", mode)
		if ok1 && ok2 && ok3 {
			dA, dP := allow.P50-none.P50, pp.P50-none.P50
			g.Measured = fmt.Sprintf("podpatch %s vs allow %s: **%s** over allow", signedMs(dP), signedMs(dA), signedMs(dP-dA))
			if id, ok := r.e2e("idiomatic", mode); ok {
				g.Measured += fmt.Sprintf(" (idiomatic, which patches the same fields: %s)", signedMs(id.P50-none.P50))
			}
			g.Met = dP <= dA+over
			goals = append(goals, g)
		} else {
			goals = append(goals, notMeasured(g))
		}
	}

	// The worst case lint accepts, without reading the body: WorstCase less its floor,
	// the same Pod read and patched by one small policy.
	for _, c := range []string{"containers=1/items=12000", "containers=10/items=1500"} {
		g := Goal{Goal: "BenchmarkWorstCase " + c + ", excluding reading the body (less WorstCaseFloor)", Target: "≤ 20 ms"}
		w, ok1 := r.Bench.Get("BenchmarkWorstCase/"+c, "ns/op")
		f, ok2 := r.Bench.Get("BenchmarkWorstCaseFloor/"+c, "ns/op")
		if ok1 && ok2 {
			g.Measured = fmt.Sprintf("%s − %s = **%s**", ms(time.Duration(w)), ms(time.Duration(f)), ms(time.Duration(w-f)))
			g.Met = time.Duration(w-f) <= 20*time.Millisecond
			goals = append(goals, g)
		} else {
			goals = append(goals, notMeasured(g))
		}
	}
	return goals
}

// WriteMarkdown writes docs/benchmarks/benchmarks.md.
func (r *Report) WriteMarkdown(w io.Writer) error {
	p := &printer{w: w}
	p.f("# podpatch benchmarks\n\n")
	p.f("Generated by `make bench` (`hack/bench.sh`) on %s in %s. Do not edit: run `make bench` again.\n",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Finished.Sub(r.Started).Round(time.Second))
	p.f("The goals are podpatch's performance targets; each section below says how it measures. Absolute figures are\n")
	p.f("noisy on a shared machine; the goals are ratios between figures of this same run.\n\n")

	p.f("## Machine\n\n| | |\n|---|---|\n")
	p.f("| CPUs (nproc) | %d |\n| CPU | %s |\n| memory | %.1f GiB |\n| kernel | %s |\n| Go | %s |\n| revision | %s |\n",
		r.Machine.CPUs, r.Machine.CPUModel, r.Machine.MemoryGiB, r.Machine.Kernel, r.Machine.GoVersion, r.Revision)
	for _, la := range r.LoadAverages {
		p.f("| load average, %s | %s |\n", la[0], la[1])
	}
	p.f("\n## Commands\n\n```sh\n%s\n```\n\n", strings.Join(r.Commands, "\n"))

	p.f("## Goals\n\nThe notes of the memory and hot-path work — where the memory and the time go, and the designs that would go\nlower — are in [memory-and-hot-path.md](memory-and-hot-path.md).\n\n| goal | target | this run | |\n|---|---|---|---|\n")
	p.goalRows(r.Goals())

	p.f("## Fixtures\n\n")
	p.f("Every figure is for the Dask operator worker Pod `%s` in namespace `%s`, as the API server sends it\n", WorkerFixture, Namespace)
	p.f("for a CREATE (an `admission.k8s.io/v1` AdmissionReview), and for a 10-container variant (the worker and nine\n")
	p.f("sidecars shaped like it). The policy sets are ConfigMap YAML files generated by `test/bench` and read by\n")
	p.f("`podpatch serve --policy-dir` (and `manifest.ReadConfigMaps` in process):\n\n")
	p.f("- **5**: five policies that all match the worker, one per layer: %s. Together they set a node selector,\n", strings.Join(MatchingLayers(), ", "))
	p.f("  a toleration, resources (ephemeral-storage request by default, memory 4Gi), an env var, two labels and an annotation.\n")
	p.f("- **1,000** and **10,000**: the same five plus 995 / 9,995 policies that cannot match the worker, one per\n")
	p.f("  ConfigMap, in turn namespace policies of other namespaces, platform policies for the other managers' workers,\n")
	p.f("  and platform policies for Dask schedulers and job runners.\n\n")
	p.f("The reference servers use the same libraries: controller-runtime's webhook server and `admission.Webhook`, with\n")
	p.f("podpatch's TLS settings (`certs.ServingOptions`). **allow** answers `admission.Allowed(\"\")`; **idiomatic** decodes\n")
	p.f("into a `corev1.Pod`, applies a hand-written strategic merge patch making the same change as the five policies and\n")
	p.f("answers `admission.PatchResponseFromRaw` (a JSONPatch of the whole object). ")
	if len(r.Verified) > 0 {
		p.f("Checked in this run over HTTPS:\n\n")
		for _, v := range r.Verified {
			p.f("- %s\n", v)
		}
		p.f("\n")
	} else {
		p.f("\n\n")
	}

	r.writeInProcess(p)
	r.writeHostile(p)
	r.writeLoad(p)
	r.writeE2E(p)
	r.writeStore(p)
	r.writeHeap(p)
	r.writeProfiles(p)

	p.f("## Method\n\n")
	p.f("- In process, `cpu-ns/op` is the process's CPU time (`getrusage`, every thread, so garbage collection is\n")
	p.f("  included) divided by the iterations; `ns/op` is wall time and suffers more from other load on the machine.\n")
	p.f("  The whole-handler and reference benchmarks run in %s rounds (each a `go test` process holding one policy\n", r.BenchRounds)
	p.f("  set at a time); the tables show the median. *other load* is how many CPUs other processes kept busy\n")
	p.f("  meanwhile (median), from `/proc/stat`.\n")
	p.f("- Load runs: vegeta (`github.com/tsenart/vegeta/v12`) as a library, HTTP/1.1 with keep-alive over TLS on\n")
	p.f("  loopback, one AdmissionReview of the 1-container worker; fixed rates are open loop with at most %d\n", r.LoadWorkers)
	p.f("  requests in flight (a run that falls more than 5 %% short of its rate is marked *saturated*: past that point its\n")
	p.f("  latencies measure the queue, not the server); *max* is a closed loop of %d connections for %s. Every server\n", r.LoadWorkers, r.LoadDuration)
	p.f("  is started (and warmed up, 2 s closed loop) before the first run and kept until the last; the runs go rate by\n")
	p.f("  rate, one server at a time, so a change in the machine's other load reaches every server alike. Latencies\n")
	p.f("  are the client's; the client shares the %d CPUs with the server.\n", r.Machine.CPUs)
	p.f("  Server CPU is utime+stime from `/proc/<pid>/stat` before and after a run, divided by the requests answered;\n")
	p.f("  at low rates it carries the server's idle costs (timers, garbage collection, the `--policy-dir` poll) over\n")
	p.f("  fewer requests, so compare servers at the same rate. Peak RSS is `VmHWM` from `/proc/<pid>/status`, reset\n")
	p.f("  before each run (`clear_refs`).\n")
	p.f("- End to end: `test/cluster` starts kube-apiserver and etcd from `bin/` (as the e2e tests do); the\n")
	p.f("  MutatingWebhookConfiguration is the one of `manifests/base` with only its client config pointing at the\n")
	p.f("  local server (podpatch with the 5-policy directory, or a reference). Creates are server-side dry runs\n")
	p.f("  (`client.DryRunAll`) of the worker, timed by the client, with no client-side rate limit. The configurations\n")
	p.f("  alternate over several rounds (none, allow, idiomatic, podpatch, none, …), each switch checked (the created\n")
	p.f("  pod shows the configuration's change, the allow-only server's request counter moves only when it is\n")
	p.f("  installed) and followed by 20 unmeasured creates. The idiomatic row shows what the API server pays for any\n")
	p.f("  webhook that returns this patch.\n\n")

	if r.BenchRaw != "" {
		p.f("<details><summary>Raw <code>go test -bench</code> output</summary>\n\n```\n%s\n```\n</details>\n", strings.TrimSpace(r.BenchRaw))
	}
	return p.err
}

func (r *Report) writeInProcess(p *printer) {
	p.f("## In process: Go benchmarks\n\n")
	p.f("The whole handler is `ServeHTTP` of a full AdmissionReview body into an `httptest` recorder by the handler\n")
	p.f("`podpatch serve` registers at `/mutate` (`webhook.Review` serving `webhook.Mutator`, policies loaded by the\n")
	p.f("`--policy-dir` feed), or by a reference: allow and idiomatic behind controller-runtime's `admission.Webhook`,\n")
	p.f("as their servers run them. The *floor* is the \"read only what you need\" handler: a plain `http.Handler`\n")
	p.f("that decodes only the request's uid, `metadata.labels` and `spec.containers[].name` (one `encoding/json`\n")
	p.f("decode into a narrow struct) and answers with a 3-operation patch; *floor behind admission.Webhook* is the\n")
	p.f("same handler behind controller-runtime's adapter (whose apimachinery codec decodes the whole review).\n\n")
	p.f("### Whole handler (CPU per admission)\n\n")
	p.f("| handler | containers | CPU/op | wall/op | B/op | allocs/op | vs floor | other load |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range ContainerCounts {
		floor, _ := r.Bench.Get(referenceName(c, "floor"), "cpu-ns/op")
		row := func(label, name string) {
			m, ok := r.Bench[name]
			if !ok {
				p.f("| %s | %d | – | – | – | – | – | – |\n", label, c)
				return
			}
			vs := "–"
			if floor > 0 {
				vs = fmt.Sprintf("%.2f×", m["cpu-ns/op"]/floor)
			}
			p.f("| %s | %d | %s | %s | %s | %.0f | %s | %.2f CPUs |\n", label, c, us(m["cpu-ns/op"]), us(m["ns/op"]), kb(m["B/op"]), m["allocs/op"], vs, m["other-cpus"])
		}
		for _, n := range PolicyCounts {
			row(fmt.Sprintf("podpatch, %s policies", thousands(n)), fmt.Sprintf(handlerName, n, c))
		}
		row("allow", referenceName(c, "allow"))
		row("idiomatic", referenceName(c, "idiomatic"))
		row("floor", referenceName(c, "floor"))
		row("floor behind admission.Webhook", referenceName(c, "floor-cr"))
	}
	p.f("\n### Stages of the request path (CPU/op, allocs/op)\n\n")
	p.f("On podpatch's path: *decode* the AdmissionReview with `encoding/json` (as `webhook.Review` does); *apply*:\n")
	p.f("`policies.Set.Patch` as `webhook.Mutator` calls it (recognise, select, merge, and the JSONPatch);\n")
	p.f("*encode*: `Response.Complete` and the JSON encoding of the answer. For comparison: *decode (codec)* with\n")
	p.f("controller-runtime's apimachinery codec, as `admission.Webhook` does; *apply → object*, `Apply` as\n")
	p.f("`podpatch render` calls it; *diff*, `jsonpatch.CreatePatch` of the whole object, as\n")
	p.f("`admission.PatchResponseFromRaw` does.\n\n")
	p.f("| containers | policies | decode | apply | encode | sum | whole handler | decode (codec) | apply → object | diff |\n")
	p.f("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range ContainerCounts {
		for _, n := range PolicyCounts {
			var sum float64
			cell := func(st string, add bool) string {
				m, ok := r.Bench[fmt.Sprintf("BenchmarkStages/policies=%d/containers=%d/%s", n, c, st)]
				if !ok {
					return "–"
				}
				if add {
					sum += m["cpu-ns/op"]
				}
				return fmt.Sprintf("%s (%.0f)", us(m["cpu-ns/op"]), m["allocs/op"])
			}
			path := []string{cell("decode", true), cell("apply", true), cell("encode", true)}
			whole := "–"
			if v, ok := r.Bench.Get(fmt.Sprintf(handlerName, n, c), "cpu-ns/op"); ok {
				whole = us(v)
			}
			p.f("| %d | %s | %s | %s | %s | %s | %s | %s |\n", c, thousands(n), strings.Join(path, " | "), us(sum), whole,
				cell("decode-codec", false), cell("apply-object", false), cell("diff", false))
		}
	}
	p.f("\n### Loading a policy set (on policy change, not per request)\n\n")
	p.f("`manifest.ReadConfigMaps` + `policies.Compile` of the generated directory.\n\n| policies | CPU/op | B/op | allocs/op |\n|---|---|---|---|\n")
	for _, n := range PolicyCounts {
		if m, ok := r.Bench[fmt.Sprintf("BenchmarkLoad/policies=%d", n)]; ok {
			p.f("| %s | %s | %s | %.0f |\n", thousands(n), msF(m["cpu-ns/op"]), kb(m["B/op"]), m["allocs/op"])
		}
	}
	p.f("\n")
}

// writeHostile reports the bounded cost of the worst input (docs/reference.md §3 Limits).
func (r *Report) writeHostile(p *printer) {
	var names []string
	for name := range r.Bench {
		if strings.HasPrefix(name, "BenchmarkWorstCase") {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	p.f("### Hostile input: the worst policy set lint accepts\n\n")
	p.f("`policies.BenchmarkWorstCase`: %d namespace policies and as many platform policies, in every layer, every one at\n", policies.MaxNamespacePolicies)
	p.f("%d items in every list merged by key, applied to a Pod of about 3 MiB whose lists are as long as fit. `Floor`: the same\n", policies.MaxListItems)
	p.f("Pod with one small policy touching every list (the cost of reading the Pod). A run that ends beyond the work limit\n")
	p.f("leaves the Pod unpatched (0 policies).\n\n| benchmark | time/op | B/op | allocs/op | policies applied | patch |\n|---|---|---|---|---|---|\n")
	for _, name := range names {
		m := r.Bench[name]
		patch := "–"
		if v, ok := m["MiB-patch"]; ok {
			patch = fmt.Sprintf("%.1f MiB", v)
		}
		applied := "–"
		if v, ok := m["policies"]; ok {
			applied = fmt.Sprintf("%.0f", v)
		}
		p.f("| %s | %s | %s | %.0f | %s | %s |\n", strings.TrimPrefix(name, "Benchmark"), msF(m["ns/op"]), kb(m["B/op"]), m["allocs/op"], applied, patch)
	}
	p.f("\n")
	var maxReviews []string
	for name := range r.Bench {
		if strings.HasPrefix(name, "BenchmarkConcurrentMaxReviews/") {
			maxReviews = append(maxReviews, name)
		}
	}
	slices.Sort(maxReviews)
	if len(maxReviews) > 0 {
		p.f("### Memory under concurrent maximum-size reviews\n\n")
		p.f("`webhook.BenchmarkConcurrentMaxReviews`: 8 concurrent maximum-size AdmissionReviews, and 16 ordinary ones meanwhile,\n")
		p.f("over HTTPS, with the default slots and budget and the soft memory limit and room `serve` sets for the manifests' 256 MiB\n")
		p.f("(docs/operations.md):\n\n| case | review | peak RSS | peak live heap | large patched | ordinary patched |\n|---|---|---|---|---|---|\n")
		for _, name := range maxReviews {
			m := r.Bench[name]
			p.f("| %s | %.1f MiB | **%.0f MiB** | %.0f MiB | %.1f / 8 | %.1f / 16 |\n", strings.TrimPrefix(name, "BenchmarkConcurrentMaxReviews/"),
				m["review-MiB"], m["peak-RSS-MiB"], m["peak-live-heap-MiB"], m["large-patched/8"], m["ordinary-patched/16"])
		}
		p.f("\n")
	}
}

func (r *Report) writeLoad(p *printer) {
	p.f("## HTTPS load on loopback\n\n")
	if r.PlotFile != "" {
		p.f("![p50 and p99 latency against offered rate](%s)\n\n", r.PlotFile)
	}
	p.f("| server | policies | offered | achieved | p50 | p90 | p99 | max | errors | server CPU/req | peak RSS | other load |\n")
	p.f("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, l := range r.Load {
		pol := "–"
		if l.Server == "podpatch" {
			pol = thousands(l.Policies)
		}
		ach := fmt.Sprintf("%.0f/s", l.Achieved)
		if l.Saturated() {
			ach += " *saturated*"
		}
		errs := fmt.Sprint(l.Errors)
		if l.Errors > 0 {
			errs += ": " + strings.ReplaceAll(l.FirstError, "|", "\\|")
		}
		p.f("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f CPUs |\n", l.Server, pol, l.Spec, ach,
			ms(l.P50), ms(l.P90), ms(l.P99), ms(l.Max), errs, us(float64(l.CPUPerRequest)), mb(l.PeakRSS), l.OtherCPU)
	}
	p.f("\n*other load*: CPUs kept busy, on average over the run, by processes other than the server and the load\n")
	p.f("client (this machine is shared); a run with much of it measured a disturbed machine. The closed loop runs\n")
	p.f("twice per server; goals, ratios and the plot use the round with the higher throughput.\n")
	p.f("\n### podpatch (5 policies) against the references\n\n| | podpatch | allow | idiomatic | podpatch ÷ allow | podpatch ÷ idiomatic |\n|---|---|---|---|---|---|\n")
	get := func(server string, rate int) (LoadResult, bool) {
		pol := 0
		if server == "podpatch" {
			pol = 5
		}
		return r.find(server, pol, rate)
	}
	type metric struct {
		label string
		rate  int
		val   func(LoadResult) float64
		fmt   func(float64) string
	}
	for _, m := range []metric{
		{"max throughput (closed loop, best round)", 0, func(l LoadResult) float64 { return l.Achieved }, func(v float64) string { return fmt.Sprintf("%.0f/s", v) }},
		{"server CPU/request at max", 0, func(l LoadResult) float64 { return float64(l.CPUPerRequest) }, us},
		{"server CPU/request at 1,000/s", 1000, func(l LoadResult) float64 { return float64(l.CPUPerRequest) }, us},
		{"p99 at 1,000/s", 1000, func(l LoadResult) float64 { return float64(l.P99) }, func(v float64) string { return ms(time.Duration(v)) }},
		{"p99 at max", 0, func(l LoadResult) float64 { return float64(l.P99) }, func(v float64) string { return ms(time.Duration(v)) }},
	} {
		pp, ok1 := get("podpatch", m.rate)
		al, ok2 := get("allow", m.rate)
		id, ok3 := get("idiomatic", m.rate)
		if !ok1 || !ok2 || !ok3 {
			continue
		}
		a, b, c := m.val(pp), m.val(al), m.val(id)
		ratio := func(x, y float64) string {
			if y == 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f×", x/y)
		}
		p.f("| %s | %s | %s | %s | %s | %s |\n", m.label, m.fmt(a), m.fmt(b), m.fmt(c), ratio(a, b), ratio(a, c))
	}
	p.f("\n")
}

func (r *Report) writeE2E(p *printer) {
	p.f("## End to end through kube-apiserver\n\n")
	if r.E2ESkipped != "" {
		p.f("Not measured: %s\n\n", r.E2ESkipped)
		return
	}
	p.f("| webhook | creates | n | p50 | p90 | p99 | max | rate | Δp50 vs none | Δp99 vs none |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, e := range r.E2E {
		none, _ := r.e2e("none", strings.Fields(e.Mode)[0])
		d50, d99 := "–", "–"
		if e.Webhook != "none" {
			d50, d99 = signedMs(e.P50-none.P50), signedMs(e.P99-none.P99)
		}
		p.f("| %s | %s | %d | %s | %s | %s | %s | %.0f/s | %s | %s |\n", e.Webhook, e.Mode, e.N, ms(e.P50), ms(e.P90), ms(e.P99), ms(e.Max),
			float64(e.N)/e.Elapsed.Seconds(), d50, d99)
	}
	p.f("\n")
}

func (r *Report) writeHeap(p *printer) {
	if len(r.HeapProfiles) == 0 {
		return
	}
	p.f("## Memory of a compiled policy set\n\n")
	p.f("`PODPATCH_HEAP_PROFILES=… go test ./webhook/policystore -run TestStoreHeapProfile`: a `policystore.Store` loaded with 1,000 and\n")
	p.f("10,000 policy ConfigMaps (one policy each, a tenth of them platform policies, as `BenchmarkStore`), the\n")
	p.f("ConfigMaps kept alive as the informer's cache keeps them (so the heap held is the store's own), then a heap\n")
	p.f("profile of every allocation still live after a collection (`MemProfileRate` 512). The policies keep their\n")
	p.f("template as compact JSON and decode the tree on demand (policies/compact.go); the informer's cache keeps\n")
	p.f("no managed fields, no `last-applied-configuration` and, once compiled, no text (webhook/policystore/clusterfeed.go).\n\n")
	if len(r.HeapLog) > 0 {
		p.f("```\n%s\n```\n\n", strings.Join(r.HeapLog, "\n"))
	}
	for _, pr := range r.HeapProfiles {
		p.f("### %s\n\n%s; top by live bytes (`-sample_index inuse_space`) %s\n\n", pr.Name, docLink(pr.Pprof), docLink(pr.Top))
		p.f("```\n%s\n```\n\n", strings.Join(pr.TopHead, "\n"))
	}
}

func (r *Report) writeProfiles(p *printer) {
	if len(r.Profiles) == 0 {
		return
	}
	p.f("## CPU profiles of the whole handler\n\n")
	p.f("`go test -bench` of BenchmarkHandler with `-cpuprofile`; open with `go tool pprof -http : <file>`. The\n")
	p.f("profile holds the benchmark's setup too (loading the policy set), so the tops below are focused on the\n")
	p.f("benchmark's call of the handler's `ServeHTTP` (`bench_test.serve`).\n\n")
	for _, pr := range r.Profiles {
		p.f("### %s\n\n%s; top by flat time %s, by cumulative time %s\n\n", pr.Name, docLink(pr.Pprof), docLink(pr.Top), docLink(pr.Cum))
		p.f("Cumulative (where the time goes, stage by stage):\n\n```\n%s\n```\n\n", strings.Join(pr.CumHead, "\n"))
		p.f("Flat (the functions that burn it):\n\n```\n%s\n```\n\n", strings.Join(pr.TopHead, "\n"))
	}
}

// docLink is a Markdown link to a file the report writes beside itself in docs/benchmarks/.
func docLink(path string) string {
	return fmt.Sprintf("[`%s`](%s)", path, strings.TrimPrefix(path, "docs/benchmarks/"))
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// goalRows writes a goal table's rows, each goal MET or **NOT MET**, and the blank line that
// ends the table.
func (p *printer) goalRows(goals []Goal) {
	for _, g := range goals {
		status := "**NOT MET**"
		if g.Met {
			status = "MET"
		}
		p.f("| %s | %s | %s | %s |\n", g.Goal, g.Target, g.Measured, status)
	}
	p.f("\n")
}

func us(ns float64) string {
	if ns == 0 {
		return "–"
	}
	if ns >= 1e6 {
		return fmt.Sprintf("%.2f ms", ns/1e6)
	}
	return fmt.Sprintf("%.0f µs", ns/1e3)
}

func msF(ns float64) string { return fmt.Sprintf("%.1f ms", ns/1e6) }

func ms(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f ms", float64(d)/1e6)
}

func signedMs(d time.Duration) string { return fmt.Sprintf("%+.2f ms", float64(d)/1e6) }

func kb(b float64) string {
	if b >= 1e6 {
		return fmt.Sprintf("%.1f MB", b/1e6)
	}
	return fmt.Sprintf("%.1f KB", b/1000)
}

func mb(b int64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f MB", float64(b)/1e6)
}

func thousands(n int) string {
	if n >= 1000 {
		return fmt.Sprintf("%d,%03d", n/1000, n%1000)
	}
	return fmt.Sprint(n)
}
