// Command probe is test/cluster's in-cluster HTTP client (kubebuilder's e2e uses a curl image,
// which comes from a registry): one HTTPS GET, with or without the pod's service-account token as
// bearer, printing the status code on a line of its own so the suite can read it from the log.
//
//	probe [-token] URL
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

const tokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"

func main() {
	withToken := flag.Bool("token", false, "send the pod's service-account token as a bearer token")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: probe [-token] URL")
		os.Exit(2)
	}
	req, err := http.NewRequest(http.MethodGet, flag.Arg(0), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(2)
	}
	if *withToken {
		tok, err := os.ReadFile(tokenPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "probe: read the service-account token:", err)
			os.Exit(1)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	// The metrics endpoint serves a self-signed certificate; what is under test is its
	// authentication and authorization, not its certificate.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
	}}
	resp, err := c.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Printf("STATUS %d\n", resp.StatusCode)
	fmt.Printf("%s\n", body)
}
