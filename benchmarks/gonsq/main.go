// gonsq-bench: the go-nsq side of `make bench` (benchmarks/run.py).
//
// It speaks the same small protocol as benchmarks/clients/*.py: it sets up,
// prints "READY", waits for a line on stdin, runs one workload, prints one
// JSON line {"count":..,"seconds":..}, then waits for stdin to close before
// exiting (so the driver can read this process's CPU time first).
//
// Workloads: consume (a go-nsq Consumer with one handler goroutine, every
// message finished), pub (one blocking Publish at a time), concurrent (many
// goroutines calling Publish on one Producer; also reports every Publish's
// latency, p50/p99/max, and the process's peak RSS, VmHWM), mpub (blocking
// MultiPublish of --batch messages).
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	nsq "github.com/nsqio/go-nsq"
)

type result struct {
	Count   int64   `json:"count"`
	Seconds float64 `json:"seconds"`
	Errors  int64   `json:"errors"`
	Client  string  `json:"client"`
	Version string  `json:"version"`
	Procs   int     `json:"gomaxprocs"`
	Mode    string  `json:"mode"`
	// concurrent mode only
	P50LatencyMs   float64 `json:"p50_latency_ms,omitempty"`
	P99LatencyMs   float64 `json:"p99_latency_ms,omitempty"`
	MaxLatencyMs   float64 `json:"max_latency_ms,omitempty"`
	LatencySamples int     `json:"latency_samples,omitempty"`
	Callers        int     `json:"callers,omitempty"`
	PeakRSSMb      float64 `json:"peak_rss_mb,omitempty"`
}

// peakRSSMb: VmHWM (peak resident set) of this process from /proc/self/status, in MB.
func peakRSSMb() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			fields := strings.Fields(line)
			if len(fields) >= 2 {
				kb, err := strconv.ParseFloat(fields[1], 64)
				if err == nil {
					return kb / 1024
				}
			}
		}
	}
	return 0
}

// latencyMs: nearest-rank percentile q (0..1] of sorted durations, in ms.
func latencyMs(sorted []time.Duration, q float64) float64 {
	n := len(sorted)
	i := int(math.Ceil(q*float64(n)-1e-9)) - 1
	if i < 0 {
		i = 0
	}
	if i > n-1 {
		i = n - 1
	}
	return float64(sorted[i]) / float64(time.Millisecond)
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "gonsq-bench: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	mode := flag.String("mode", "consume", "consume|pub|concurrent|mpub")
	nsqds := flag.String("nsqd", "127.0.0.1:4150", "nsqd TCP address(es), comma separated")
	topic := flag.String("topic", "bench", "topic")
	channel := flag.String("channel", "bench", "channel (consume)")
	count := flag.Int64("count", 100000, "messages to consume or publish")
	maxInFlight := flag.Int("max-in-flight", 2500, "max in flight (consume)")
	concurrency := flag.Int("concurrency", 64, "publishing goroutines (concurrent)")
	batch := flag.Int("batch", 100, "messages per MPUB (mpub)")
	size := flag.Int("size", 100, "message body size (publish modes)")
	useSnappy := flag.Bool("snappy", false, "negotiate snappy compression")
	useTLS := flag.Bool("tls", false, "negotiate TLS")
	outputBufferTimeout := flag.Int("output-buffer-timeout", 0, "ms asked of nsqd in IDENTIFY (0: go-nsq's default)")
	ca := flag.String("ca", "", "CA certificate (PEM) to verify nsqd with; without it, no verification")
	flag.Parse()

	cfg := nsq.NewConfig()
	cfg.MaxInFlight = *maxInFlight
	cfg.Snappy = *useSnappy
	if *outputBufferTimeout != 0 {
		cfg.OutputBufferTimeout = time.Duration(*outputBufferTimeout) * time.Millisecond
	}
	if *useTLS {
		cfg.TlsV1 = true
		tlsConf := &tls.Config{InsecureSkipVerify: true}
		if *ca != "" {
			pem, err := os.ReadFile(*ca)
			if err != nil {
				fail("reading CA: %s", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				fail("no certificate in %s", *ca)
			}
			host := strings.Split(strings.Split(*nsqds, ",")[0], ":")[0]
			tlsConf = &tls.Config{RootCAs: pool, ServerName: host}
		}
		cfg.TlsConfig = tlsConf
	}
	addrs := strings.Split(*nsqds, ",")
	logger := log.New(os.Stderr, "[go-nsq] ", log.LstdFlags)

	fmt.Println("READY")
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		fail("no start line on stdin: %s", err)
	}

	var res result
	switch *mode {
	case "consume":
		res = consume(cfg, logger, addrs, *topic, *channel, *count)
	case "pub", "concurrent", "mpub":
		res = publish(cfg, logger, addrs[0], *mode, *topic, *count, *concurrency, *batch, *size)
	default:
		fail("unknown mode %q", *mode)
	}
	res.Client = "go-nsq"
	res.Version = nsq.VERSION
	res.Procs = runtime.GOMAXPROCS(0)
	res.Mode = *mode
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	io.Copy(io.Discard, in) // the driver reads our CPU time, then closes stdin
}

func consume(cfg *nsq.Config, logger *log.Logger, addrs []string, topic, channel string, count int64) result {
	consumer, err := nsq.NewConsumer(topic, channel, cfg)
	if err != nil {
		fail("NewConsumer: %s", err)
	}
	consumer.SetLogger(logger, nsq.LogLevelWarning)
	var seen, bad int64
	var start, end time.Time
	done := make(chan struct{})
	consumer.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		// One handler goroutine (AddHandler): no locking needed for start/end.
		n := atomic.AddInt64(&seen, 1)
		if n == 1 {
			start = time.Now()
		}
		if len(m.Body) != 100 {
			atomic.AddInt64(&bad, 1)
		}
		if n == count {
			end = time.Now()
			close(done)
		}
		return nil
	}))
	if err := consumer.ConnectToNSQDs(addrs); err != nil {
		fail("ConnectToNSQDs: %s", err)
	}
	<-done
	consumer.Stop()
	<-consumer.StopChan
	return result{Count: atomic.LoadInt64(&seen), Seconds: end.Sub(start).Seconds(), Errors: bad}
}

func publish(cfg *nsq.Config, logger *log.Logger, addr, mode, topic string, count int64, concurrency, batch, size int) result {
	producer, err := nsq.NewProducer(addr, cfg)
	if err != nil {
		fail("NewProducer: %s", err)
	}
	producer.SetLogger(logger, nsq.LogLevelWarning)
	if err := producer.Ping(); err != nil { // connects
		fail("Ping: %s", err)
	}
	body := make([]byte, size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	var done, errs int64
	var perCaller [][]time.Duration // concurrent: each goroutine's Publish durations
	start := time.Now()
	switch mode {
	case "pub":
		for i := int64(0); i < count; i++ {
			if err := producer.Publish(topic, body); err != nil {
				errs++
				logger.Printf("publish: %s", err)
				continue
			}
			done++
		}
	case "mpub":
		bodies := make([][]byte, batch)
		for i := range bodies {
			bodies[i] = body
		}
		for sent := int64(0); sent < count; {
			n := int64(batch)
			if count-sent < n {
				n = count - sent
			}
			if err := producer.MultiPublish(topic, bodies[:n]); err != nil {
				errs++
				logger.Printf("multipublish: %s", err)
			} else {
				done += n
			}
			sent += n
		}
	case "concurrent":
		var wg sync.WaitGroup
		perCaller = make([][]time.Duration, concurrency)
		for g := 0; g < concurrency; g++ {
			share := count / int64(concurrency)
			if int64(g) < count%int64(concurrency) {
				share++
			}
			wg.Add(1)
			go func(g int, share int64) {
				defer wg.Done()
				mine := make([]time.Duration, 0, share)
				for i := int64(0); i < share; i++ {
					t0 := time.Now()
					err := producer.Publish(topic, body)
					mine = append(mine, time.Since(t0))
					if err != nil {
						atomic.AddInt64(&errs, 1)
						continue
					}
					atomic.AddInt64(&done, 1)
				}
				perCaller[g] = mine
			}(g, share)
		}
		wg.Wait()
	}
	elapsed := time.Since(start).Seconds()
	producer.Stop()
	res := result{Count: done, Seconds: elapsed, Errors: errs}
	if mode == "concurrent" {
		var all []time.Duration
		for _, mine := range perCaller {
			all = append(all, mine...)
		}
		if len(all) > 0 {
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			res.P50LatencyMs = latencyMs(all, 0.50)
			res.P99LatencyMs = latencyMs(all, 0.99)
			res.MaxLatencyMs = float64(all[len(all)-1]) / float64(time.Millisecond)
			res.LatencySamples = len(all)
		}
		res.Callers = concurrency
		res.PeakRSSMb = peakRSSMb()
	}
	return res
}
