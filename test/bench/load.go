package bench

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"slices"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// LoadSpec is one load run: a fixed offered rate (open loop), or, with Rate 0, a closed loop
// of Workers connections sending as fast as the server answers.
type LoadSpec struct {
	Rate     int
	Duration time.Duration
	// Workers is the closed loop's concurrency; at a fixed rate, the most requests in flight
	// (the client is bounded: past that the offered rate is not kept, and Achieved says so).
	Workers int
	// Round numbers repeated closed-loop runs (from 1); 0 for a single one.
	Round int
}

// String names the run as the report does.
func (s LoadSpec) String() string {
	if s.Rate == 0 {
		if s.Round > 0 {
			return fmt.Sprintf("max (%d conns) #%d", s.Workers, s.Round)
		}
		return fmt.Sprintf("max (%d conns)", s.Workers)
	}
	return fmt.Sprintf("%d/s", s.Rate)
}

// LoadResult is what one run measured, client side and server side.
type LoadResult struct {
	Server   string // allow, idiomatic, podpatch
	Policies int    // policies loaded (podpatch only)
	Spec     LoadSpec

	Requests, Errors int
	FirstError       string
	Elapsed          time.Duration
	// Achieved is successful responses per second.
	Achieved float64
	// Latency percentiles of successful requests, as the client saw them.
	P50, P90, P99, Max time.Duration

	// ServerCPU is the server's user+system time during the run; CPUPerRequest divides it by
	// the requests answered.
	ServerCPU, CPUPerRequest time.Duration
	// PeakRSS is VmHWM over the run (reset before it when the kernel allows); RSS is VmRSS
	// after it.
	PeakRSS, RSS int64
	PeakReset    bool
	// OtherCPU is how many CPUs, on average over the run, processes other than the server and
	// this client kept busy (from /proc/stat): the machine's other load.
	OtherCPU float64
}

// Saturated reports whether a fixed-rate run fell short of its offered rate by more than 5%.
func (r LoadResult) Saturated() bool {
	return r.Spec.Rate > 0 && r.Achieved < 0.95*float64(r.Spec.Rate)
}

// allowedMark is in every answer that admits the object; a cheap check that keeps the client's
// own CPU use low while it shares the machine with the server.
var allowedMark = []byte(`"allowed":true`)

// Attack runs one load run against a server's /mutate with keep-alive HTTPS connections
// (vegeta as a library) and reads the server's CPU time and memory from /proc around it.
func Attack(s *Server, tlsConfig *tls.Config, review []byte, spec LoadSpec) (LoadResult, error) {
	res := LoadResult{Server: s.Name, Spec: spec}
	workers := uint64(spec.Workers)
	opts := []func(*vegeta.Attacker){
		vegeta.TLSConfig(tlsConfig),
		vegeta.KeepAlive(true),
		vegeta.HTTP2(false),
		vegeta.Timeout(10 * time.Second),
		vegeta.Connections(spec.Workers),
		vegeta.MaxConnections(spec.Workers),
		vegeta.MaxWorkers(workers),
		vegeta.Redirects(vegeta.NoFollow),
	}
	if spec.Rate == 0 {
		opts = append(opts, vegeta.Workers(workers))
	} else {
		opts = append(opts, vegeta.Workers(min(workers, 16)))
	}
	attacker := vegeta.NewAttacker(opts...)
	header := http.Header{"Content-Type": []string{"application/json"}}
	targeter := vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodPost, URL: s.URL(), Body: review, Header: header})
	rate := vegeta.Rate{Freq: spec.Rate, Per: time.Second}

	res.PeakReset = ResetPeakRSS(s.PID()) == nil
	before, err := readUsage(s.PID())
	if err != nil {
		return res, err
	}
	latencies := make([]time.Duration, 0, max(spec.Rate, 5000)*int(spec.Duration/time.Second+1))
	start := time.Now()
	for r := range attacker.Attack(targeter, rate, spec.Duration, s.Name) {
		res.Requests++
		if r.Error != "" || r.Code != http.StatusOK || !bytes.Contains(r.Body, allowedMark) {
			res.Errors++
			if res.FirstError == "" {
				res.FirstError = fmt.Sprintf("status %d: %s %.200s", r.Code, r.Error, r.Body)
			}
			continue
		}
		latencies = append(latencies, r.Latency)
	}
	res.Elapsed = time.Since(start)
	after, err := readUsage(s.PID())
	if err != nil {
		return res, err
	}
	res.ServerCPU = after.server.CPU - before.server.CPU
	other := after.busy - before.busy - res.ServerCPU - (after.self.CPU - before.self.CPU)
	res.OtherCPU = max(0, other.Seconds()/res.Elapsed.Seconds())
	res.PeakRSS, res.RSS = after.server.PeakRSS, after.server.RSS
	ok := len(latencies)
	if ok > 0 {
		res.CPUPerRequest = res.ServerCPU / time.Duration(ok)
		slices.Sort(latencies)
		q := func(p float64) time.Duration { return latencies[min(ok-1, int(p*float64(ok)))] }
		res.P50, res.P90, res.P99, res.Max = q(0.50), q(0.90), q(0.99), latencies[ok-1]
	}
	res.Achieved = float64(ok) / res.Elapsed.Seconds()
	return res, nil
}

// usage is what a load run reads before and after it: the server's stats, this process's (the
// load generator's), and the CPU time the whole machine has spent.
type usage struct {
	server, self ProcStats
	busy         time.Duration
}

// readUsage reads the usage of the server serverPID, of this process and of the machine.
func readUsage(serverPID int) (usage, error) {
	var u usage
	var err error
	if u.server, err = ReadProcStats(serverPID); err != nil {
		return u, err
	}
	if u.self, err = ReadProcStats(os.Getpid()); err != nil {
		return u, err
	}
	u.busy, err = MachineBusy()
	return u, err
}
