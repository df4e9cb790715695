// Open-loop HTTP load for the benchmarks: a POST every 1/rate seconds whatever the answers (as
// Trino's queries arrive), each on its own goroutine, over keep-alive TLS connections. Prints one
// JSON line: requests, statuses, and latency percentiles in milliseconds.
//
// Compiled, not Python: at 200 requests/s a Python asyncio client's own scheduling added more to
// the 99th percentile than the service under test did.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "", "the endpoint to POST to")
	ca := flag.String("ca", "", "PEM file of the CA that signed the server's certificate")
	bodiesFile := flag.String("bodies", "", "one body per line; the first @RUNID@ of each is made unique per request")
	rate := flag.Float64("rate", 200, "requests per second")
	duration := flag.Float64("duration", 10, "seconds of load")
	tag := flag.String("tag", "openloop", "prefix of the run ids")
	flag.Parse()

	pem, err := os.ReadFile(*ca)
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		log.Fatalf("no certificate in %s", *ca)
	}
	templates, err := readLines(*bodiesFile)
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots},
		MaxConnsPerHost:     64,
		MaxIdleConnsPerHost: 64,
	}}

	n := int(*rate * *duration)
	latencies := make([]float64, n)
	statuses := make([]int, n) // 0: no answer (connection error or timeout)
	var wg sync.WaitGroup
	begin := time.Now()
	for i := 0; i < n; i++ {
		time.Sleep(time.Until(begin.Add(time.Duration(float64(i) / *rate * float64(time.Second)))))
		body := strings.Replace(templates[i%len(templates)], "@RUNID@", fmt.Sprintf("%s-%d", *tag, i), 1)
		wg.Add(1)
		go func(i int, body []byte) {
			defer wg.Done()
			started := time.Now()
			req, err := http.NewRequest(http.MethodPost, *url, bytes.NewReader(body))
			if err != nil {
				log.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if resp, err := client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				statuses[i] = resp.StatusCode
			}
			latencies[i] = time.Since(started).Seconds() * 1000
		}(i, []byte(body))
	}
	wg.Wait()

	byStatus := map[int]int{}
	for _, s := range statuses {
		byStatus[s]++
	}
	sort.Float64s(latencies)
	at := func(q float64) float64 {
		i := int(float64(n) * q)
		if i > n-1 {
			i = n - 1
		}
		return round(latencies[i])
	}
	out, _ := json.Marshal(map[string]any{
		"rate": *rate, "requests": n, "statuses": byStatus,
		"p50_ms": at(0.50), "p90_ms": at(0.90), "p99_ms": at(0.99), "max_ms": round(latencies[n-1]),
	})
	fmt.Println(string(out))
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	for scanner.Scan() {
		if line := scanner.Text(); line != "" {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 && scanner.Err() == nil {
		return nil, fmt.Errorf("no bodies in %s", path)
	}
	return lines, scanner.Err()
}

func round(ms float64) float64 { return float64(int(ms*100+0.5)) / 100 }
