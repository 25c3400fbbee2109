// Command run is the second half of `make bench` (hack/bench.sh builds the binaries and runs
// the Go benchmarks and profiles first): it generates the policy sets, checks that the
// idiomatic reference makes podpatch's change, runs the HTTPS load runs against podpatch and
// the two reference servers, runs the end-to-end creates through kube-apiserver, and writes
// docs/benchmarks/benchmarks.md and docs/benchmarks/benchmarks.png.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/podpatch/podpatch/test/bench"
	"github.com/podpatch/podpatch/test/cluster"
)

type options struct {
	root, bin, work              string
	goBench, profiles, commands  string
	heapProfiles                 string
	out, plot                    string
	started                      int64
	loadavg, revision            string
	benchRounds                  string
	duration                     time.Duration
	rates                        string
	workers, maxRounds           int
	e2eSeq, e2eWorkers, e2ePerWk int
	e2eRounds                    int
	skipE2E                      bool
	storeCounts, storePlot       string
	storeChanges                 int
	storeSettle                  time.Duration
	skipStore                    bool
	scaleLog, scaleCommand       string
}

func main() {
	var o options
	flag.StringVar(&o.root, "root", ".", "repository root")
	flag.StringVar(&o.bin, "bin", "bin", "directory of podpatch, bench-allow, bench-idiomatic, kube-apiserver and etcd")
	flag.StringVar(&o.work, "work", "", "scratch directory (policy sets, certificates, server logs); default: a new temporary one")
	flag.StringVar(&o.goBench, "go-bench", "", "output of `go test -bench` to report")
	flag.StringVar(&o.heapProfiles, "heap-profiles", "", "directory of the policy store's heap profiles (*.heap.pprof with a *.heap.txt top next to each, and test.log)")
	flag.StringVar(&o.profiles, "profiles", "docs/benchmarks/profiles", "directory of the handler CPU profiles (*.pprof with a *.txt top next to each)")
	flag.StringVar(&o.commands, "commands", "", "file listing the commands of this run, for the report")
	flag.StringVar(&o.out, "out", "docs/benchmarks/benchmarks.md", "report to write")
	flag.StringVar(&o.plot, "plot", "docs/benchmarks/benchmarks.png", "plot to write")
	flag.Int64Var(&o.started, "started", 0, "when `make bench` started (Unix seconds)")
	flag.StringVar(&o.loadavg, "loadavg", "", "load average when `make bench` started")
	flag.StringVar(&o.revision, "revision", "", "revision of the code measured")
	flag.StringVar(&o.benchRounds, "bench-rounds", "1", "how many rounds of the whole-handler benchmarks --go-bench holds")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each load run")
	flag.StringVar(&o.rates, "rates", "500,1000,2000,5000", "fixed offered rates (requests/s)")
	flag.IntVar(&o.workers, "workers", 16, "connections of the closed loop, and most requests in flight at a fixed rate")
	flag.IntVar(&o.maxRounds, "max-rounds", 2, "closed-loop runs per server (the best counts)")
	flag.IntVar(&o.e2eSeq, "e2e-sequential", 300, "sequential dry-run creates per webhook")
	flag.IntVar(&o.e2eWorkers, "e2e-workers", 8, "concurrent creators")
	flag.IntVar(&o.e2ePerWk, "e2e-per-worker", 150, "dry-run creates per concurrent creator")
	flag.IntVar(&o.e2eRounds, "e2e-rounds", 3, "rounds over which the three webhook configurations alternate")
	flag.BoolVar(&o.skipE2E, "skip-e2e", false, "skip the end-to-end run")
	flag.StringVar(&o.storeCounts, "store-counts", "100,1000,3000,10000", "policy ConfigMap counts of the store run, ascending")
	flag.IntVar(&o.storeChanges, "store-changes", 50, "changes of one ConfigMap measured at each count of the store run")
	flag.DurationVar(&o.storeSettle, "store-settle", 5*time.Second, "how long the store run samples RSS after ready")
	flag.StringVar(&o.storePlot, "store-plot", "docs/benchmarks/benchmarks-store.png", "plot of the store run to write")
	flag.BoolVar(&o.skipStore, "skip-store", false, "skip the store run")
	flag.StringVar(&o.scaleLog, "scale-log", "", "`go test -v` output of the e2e scale test (TestScale) to report")
	flag.StringVar(&o.scaleCommand, "scale-command", "", "the command that ran the scale test, for the report")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Fprintf(os.Stderr, "==> "+format+"\n", args...) }

func run(ctx context.Context, o options) (err error) {
	rep := &bench.Report{Started: time.Now(), Machine: bench.ReadMachine(), Revision: o.revision,
		LoadDuration: o.duration, LoadWorkers: o.workers, PlotFile: filepath.Base(o.plot), BenchRounds: o.benchRounds,
		StorePlotFile: filepath.Base(o.storePlot), StoreSettle: o.storeSettle}
	if o.started > 0 {
		rep.Started = time.Unix(o.started, 0)
	}
	if o.loadavg != "" {
		rep.LoadAverages = append(rep.LoadAverages, [2]string{"start of `make bench`", o.loadavg})
	}
	if o.commands != "" {
		b, err := os.ReadFile(o.commands)
		if err != nil {
			return err
		}
		rep.Commands = strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	if o.goBench != "" {
		b, err := os.ReadFile(o.goBench)
		if err != nil {
			return err
		}
		if rep.Bench, err = bench.ParseGoBench(bytes.NewReader(b)); err != nil {
			return err
		}
		rep.BenchRaw = string(b)
	}
	if rep.Profiles, err = readProfiles(o.profiles); err != nil {
		return err
	}
	if o.heapProfiles != "" {
		if rep.HeapProfiles, rep.HeapLog, err = readHeapProfiles(o.heapProfiles); err != nil {
			return err
		}
	}
	if o.scaleLog != "" {
		f, err := os.Open(o.scaleLog)
		if err != nil {
			return err
		}
		rep.Scale, err = bench.ParseScaleLog(f, o.scaleCommand)
		f.Close()
		if err != nil {
			return err
		}
	}
	var storeCounts []int
	for _, f := range strings.Split(o.storeCounts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("--store-counts: %w", err)
		}
		storeCounts = append(storeCounts, n)
	}
	if o.work == "" {
		if o.work, err = os.MkdirTemp("", "podpatch-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(o.work)
	}

	// Policy sets and certificates.
	dirs := map[int]string{}
	for _, n := range bench.PolicyCounts {
		dirs[n] = filepath.Join(o.work, fmt.Sprintf("policies-%d", n))
		if err := bench.WritePolicySet(dirs[n], n); err != nil {
			return err
		}
	}
	certDir := filepath.Join(o.work, "certs")
	if _, err := cluster.ServingCerts(certDir); err != nil {
		return err
	}
	tlsConfig, err := bench.TLSClient(certDir)
	if err != nil {
		return err
	}
	reviews := map[int][]byte{}
	pods := map[int][]byte{}
	for _, c := range bench.ContainerCounts {
		if pods[c], err = bench.WorkerPod(o.root, c); err != nil {
			return err
		}
		if reviews[c], err = bench.Review(pods[c]); err != nil {
			return err
		}
	}
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	srv := servers{o: o, certDir: certDir, dirs: dirs, client: httpClient, review: reviews[1]}

	// Every server under load runs from here to the end of the load runs; an idle one costs
	// nothing, and the runs go rate by rate across the servers, so that a change in the
	// machine's other load reaches them alike.
	type target struct {
		server   string
		policies int
		rates    map[int]bool // the fixed rates it is run at; every target gets the closed loop
		s        *bench.Server
	}
	var fixed []int
	all := map[int]bool{}
	for _, f := range strings.Split(o.rates, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("--rates: %w", err)
		}
		fixed, all[r] = append(fixed, r), true
	}
	targets := []*target{
		{server: "allow", rates: all},
		{server: "idiomatic", rates: all},
		{server: "podpatch", policies: 5, rates: all},
		{server: "podpatch", policies: 1000, rates: map[int]bool{1000: true}},
		{server: "podpatch", policies: 10000, rates: map[int]bool{1000: true}},
	}
	step("starting podpatch (5, 1,000 and 10,000 policies) and the reference servers")
	defer func() {
		for _, t := range targets {
			if t.s != nil {
				err = errors.Join(err, t.s.Stop())
			}
		}
	}()
	byName := map[string]*bench.Server{}
	for _, t := range targets {
		if t.s, err = srv.start(t.server, t.policies); err != nil {
			return err
		}
		if t.policies <= 5 {
			byName[t.server] = t.s
		}
	}

	// The idiomatic reference makes podpatch's change; allow makes none.
	step("checking the reference servers against podpatch over HTTPS")
	if rep.Verified, err = verify(srv, byName, pods, reviews); err != nil {
		return err
	}

	rep.LoadAverages = append(rep.LoadAverages, [2]string{"start of the load runs", bench.LoadAverage()})
	step("warming up (2 s closed loop each)")
	for _, t := range targets {
		if _, err := bench.Attack(t.s, tlsConfig, reviews[1], bench.LoadSpec{Duration: 2 * time.Second, Workers: o.workers}); err != nil {
			return err
		}
	}
	specs := make([]bench.LoadSpec, 0, len(fixed)+o.maxRounds)
	for _, rate := range fixed {
		specs = append(specs, bench.LoadSpec{Rate: rate, Duration: o.duration, Workers: o.workers})
	}
	for round := 1; round <= o.maxRounds; round++ {
		specs = append(specs, bench.LoadSpec{Duration: o.duration, Workers: o.workers, Round: round})
	}
	for _, spec := range specs {
		rate := spec.Rate
		step("load runs at %s", spec)
		for _, t := range targets {
			if rate != 0 && !t.rates[rate] {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			res, err := bench.Attack(t.s, tlsConfig, reviews[1], spec)
			if err != nil {
				return err
			}
			res.Policies = t.policies
			rep.Load = append(rep.Load, res)
			label := t.server
			if t.server == "podpatch" {
				label = fmt.Sprintf("podpatch/%d", t.policies)
			}
			fmt.Fprintf(os.Stderr, "    %-15s achieved %5.0f/s  p50 %6.2f ms  p99 %7.2f ms  max %7.2f ms  errors %d  CPU/req %4.0f µs  peak RSS %5.1f MB  other load %.2f CPUs\n",
				label, res.Achieved, ms(res.P50), ms(res.P99), ms(res.Max), res.Errors, float64(res.CPUPerRequest)/1e3, float64(res.PeakRSS)/1e6, res.OtherCPU)
			if res.Errors > 0 {
				fmt.Fprintf(os.Stderr, "    first error: %s\n", res.FirstError)
			}
		}
	}
	for _, t := range targets {
		stopErr := t.s.Stop()
		t.s = nil
		if stopErr != nil {
			return fmt.Errorf("%s: %w", t.server, stopErr)
		}
	}
	order := map[string]int{"allow": 0, "idiomatic": 1, "podpatch": 2}
	sort.SliceStable(rep.Load, func(i, j int) bool {
		a, b := rep.Load[i], rep.Load[j]
		if a.Server != b.Server {
			return order[a.Server] < order[b.Server]
		}
		if a.Policies != b.Policies {
			return a.Policies < b.Policies
		}
		rank := func(rate int) int { // the closed loop last
			if rate == 0 {
				return math.MaxInt
			}
			return rate
		}
		if rank(a.Spec.Rate) != rank(b.Spec.Rate) {
			return rank(a.Spec.Rate) < rank(b.Spec.Rate)
		}
		return a.Spec.Round < b.Spec.Round
	})

	// End to end.
	var e2eErr error
	if o.skipE2E {
		rep.E2ESkipped = "skipped (--skip-e2e)"
	} else {
		rep.LoadAverages = append(rep.LoadAverages, [2]string{"start of the end-to-end run", bench.LoadAverage()})
		step("end to end: kube-apiserver, dry-run creates with no webhook, allow-only, idiomatic, podpatch")
		e2eDir := filepath.Join(o.work, "e2e")
		if err := os.MkdirAll(e2eDir, 0o755); err != nil {
			return err
		}
		rep.E2E, e2eErr = bench.RunE2E(ctx, bench.E2EOptions{
			Root: o.root, BinDir: o.bin, WorkDir: e2eDir, PolicyDir: dirs[5],
			PodpatchBin: filepath.Join(o.bin, "podpatch"), AllowBin: filepath.Join(o.bin, "bench-allow"),
			IdiomaticBin: filepath.Join(o.bin, "bench-idiomatic"),
			Sequential:   o.e2eSeq, Workers: o.e2eWorkers, PerWorker: o.e2ePerWk, Rounds: o.e2eRounds, Warmup: 20,
		})
		if e2eErr != nil {
			rep.E2E, rep.E2ESkipped = nil, "the run failed: "+e2eErr.Error()
		}
		for _, e := range rep.E2E {
			fmt.Fprintf(os.Stderr, "    %-9s %-22s n %4d  p50 %6.2f ms  p99 %6.2f ms\n", e.Webhook, e.Mode, e.N, ms(e.P50), ms(e.P99))
		}
	}

	// The policy store at scale.
	var storeErr error
	if o.skipStore {
		rep.StoreSkipped = "skipped (--skip-store)"
	} else {
		rep.LoadAverages = append(rep.LoadAverages, [2]string{"start of the store run", bench.LoadAverage()})
		step("the policy store: podpatch against kube-apiserver with %s policy ConfigMaps", o.storeCounts)
		storeDir := filepath.Join(o.work, "store")
		if err := os.MkdirAll(storeDir, 0o755); err != nil {
			return err
		}
		rep.Store, storeErr = bench.RunStore(ctx, bench.StoreOptions{BinDir: o.bin, WorkDir: storeDir,
			PodpatchBin: filepath.Join(o.bin, "podpatch"), Counts: storeCounts, Settle: o.storeSettle, Changes: o.storeChanges})
		if storeErr != nil {
			rep.Store, rep.StoreSkipped = nil, "the run failed: "+storeErr.Error()
		}
		for _, s := range rep.Store {
			fmt.Fprintf(os.Stderr, "    %6d ConfigMaps  ready %6.2f s  CPU %5.2f s  steady RSS %5.1f MB  peak %6.1f MB  CPU/change %5.2f ms  served p50 %5.1f ms\n",
				s.ConfigMaps, s.Ready.Seconds(), s.ReadyCPU.Seconds(), float64(s.RSS)/1e6, float64(s.PeakRSS)/1e6, ms(s.ChangeCPU), ms(s.ServedP50))
		}
	}
	rep.LoadAverages = append(rep.LoadAverages, [2]string{"end", bench.LoadAverage()})

	// The report.
	rep.Finished = time.Now()
	if err := rep.WritePlot(o.plot); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if err := rep.WriteStorePlot(o.storePlot); err != nil {
		return fmt.Errorf("store plot: %w", err)
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		return err
	}
	if err := os.WriteFile(o.out, md.Bytes(), 0o644); err != nil {
		return err
	}
	step("wrote %s, %s and %s", o.out, o.plot, o.storePlot)
	for _, g := range slices.Concat(rep.Goals(), rep.StoreGoals()) {
		status := "NOT MET"
		if g.Met {
			status = "MET"
		}
		fmt.Fprintf(os.Stderr, "    %-8s %s: %s\n", status, g.Goal, strings.ReplaceAll(g.Measured, "**", ""))
	}
	return errors.Join(e2eErr, storeErr)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// servers starts the servers under test on loopback.
type servers struct {
	o       options
	certDir string
	dirs    map[int]string
	client  *http.Client
	review  []byte
}

// start runs one server and waits until it answers a review.
func (s servers) start(name string, policies int) (*bench.Server, error) {
	logFile := filepath.Join(s.o.work, fmt.Sprintf("%s-%d.log", name, policies))
	answers := func(srv *bench.Server) error {
		_, err := bench.Post(s.client, srv.URL(), s.review)
		return err
	}
	switch name {
	case "allow", "idiomatic":
		return bench.StartServer(name, filepath.Join(s.o.bin, "bench-"+name), s.certDir, logFile, answers, nil)
	case "podpatch":
		ports, err := cluster.HoldPorts(2)
		if err != nil {
			return nil, err
		}
		probes := ports[1].Addr()
		ready := func(srv *bench.Server) error {
			resp, err := http.Get("http://" + probes + "/readyz")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("/readyz: %s", resp.Status)
			}
			return answers(srv)
		}
		return bench.StartServer("podpatch", filepath.Join(s.o.bin, "podpatch"), s.certDir, logFile, ready, ports,
			"serve", "--policy-dir", s.dirs[policies],
			"--metrics-bind-address", ports[0].Addr(), "--health-probe-bind-address", probes)
	}
	return nil, fmt.Errorf("unknown server %q", name)
}

// verify checks over HTTPS that the idiomatic reference changes the worker exactly as podpatch
// does (apart from podpatch's provenance annotation) and that allow changes nothing.
func verify(s servers, started map[string]*bench.Server, pods, reviews map[int][]byte) ([]string, error) {
	var out []string
	for _, c := range bench.ContainerCounts {
		patched := map[string]*bench.PodResult{}
		for name, srv := range started {
			body, err := bench.Post(s.client, srv.URL(), reviews[c])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			resp, err := bench.ReviewResponse(body)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			pod, err := bench.PatchedPod(pods[c], resp)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			patched[name] = &bench.PodResult{Pod: pod, PatchOps: bench.PatchOps(resp.Patch), PatchBytes: len(resp.Patch)}
		}
		if diff, err := bench.SameChange(patched["podpatch"].Pod, patched["idiomatic"].Pod); err != nil {
			return nil, err
		} else if diff != "" {
			return nil, fmt.Errorf("%d containers: the idiomatic reference does not make podpatch's change:\n%s", c, diff)
		}
		if patched["allow"].PatchBytes != 0 {
			return nil, fmt.Errorf("the allow-only reference patched the pod")
		}
		out = append(out, fmt.Sprintf("%d container(s): the idiomatic reference's patched pod equals podpatch's apart from `podpatch.io/applied` "+
			"(podpatch's JSONPatch: %d operations, %d bytes; idiomatic's: %d operations, %d bytes); allow answers without a patch.",
			c, patched["podpatch"].PatchOps, patched["podpatch"].PatchBytes, patched["idiomatic"].PatchOps, patched["idiomatic"].PatchBytes))
	}
	return out, nil
}

// readHeapProfiles lists the store's heap profiles of dir (*.heap.pprof, a *.heap.txt top next
// to each) and the lines of its test.log that say what the store held.
func readHeapProfiles(dir string) ([]bench.Profile, []string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.heap.pprof"))
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(files, func(i, j int) bool {
		return len(files[i]) < len(files[j]) || (len(files[i]) == len(files[j]) && files[i] < files[j])
	})
	var out []bench.Profile
	for _, f := range files {
		stem := strings.TrimSuffix(f, ".pprof")
		p := bench.Profile{Name: filepath.Base(strings.TrimSuffix(stem, ".heap")), Pprof: f, Top: stem + ".txt"}
		if p.TopHead, err = head(p.Top, 20); err != nil {
			return nil, nil, err
		}
		out = append(out, p)
	}
	var log []string
	if b, err := os.ReadFile(filepath.Join(dir, "test.log")); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.Contains(line, "the store holds") {
				log = append(log, strings.TrimSpace(line))
			}
		}
	}
	return out, log, nil
}

// readProfiles lists the *.pprof files of dir, oldest first (the order hack/bench.sh made them),
// with the heads of the flat (*.txt) and cumulative (*.cum.txt) tops next to each.
func readProfiles(dir string) ([]bench.Profile, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.pprof"))
	if err != nil {
		return nil, err
	}
	mtime := map[string]time.Time{}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		mtime[f] = st.ModTime()
	}
	sort.Slice(files, func(i, j int) bool { return mtime[files[i]].Before(mtime[files[j]]) })
	var out []bench.Profile
	for _, f := range files {
		stem := strings.TrimSuffix(f, ".pprof")
		p := bench.Profile{Name: filepath.Base(stem), Pprof: f, Top: stem + ".txt", Cum: stem + ".cum.txt"}
		if p.TopHead, err = head(p.Top, 22); err != nil {
			return nil, err
		}
		if p.CumHead, err = head(p.Cum, 30); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// head returns the first n lines of a pprof top, without the lines naming the binary.
func head(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(out) < n {
		line := sc.Text()
		if strings.HasPrefix(line, "File:") || strings.HasPrefix(line, "Build ID:") || strings.HasPrefix(line, "Type:") ||
			strings.HasPrefix(line, "Time:") || strings.Contains(line, "podpatch/test/bench_test.") || strings.Contains(line, " testing.(*B)") {
			continue // the binary, and the benchmark's own frames
		}
		out = append(out, line)
	}
	return out, sc.Err()
}
