package webhooks

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/harness-dev/planmode-operator/internal/freeport"
)

func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// dialServing returns the serial of the certificate served at addr, verified against caPEM.
func dialServing(addr string, caPEM []byte, maxVersion uint16) (*tls.ConnectionState, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("bad CA PEM")
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: pool, ServerName: "localhost", MaxVersion: maxVersion})
	if err != nil {
		return nil, err
	}
	defer conn.Close() //nolint:errcheck
	st := conn.ConnectionState()
	return &st, nil
}

// The manager's webhook server on a generated certificate: TLS 1.2+, and a rotated
// certificate is served without a restart (controller-runtime's certwatcher).
func TestServingCertGenerateLoadAndReload(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	o := DefaultOptions()
	o.Host, o.Port, o.CertDir = "127.0.0.1", freePort(t), dir
	srv, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{CAFileName, CertFileName, KeyFileName} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("generated %s: %v", f, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, KeyFileName)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v, want 0600", fi.Mode().Perm())
	}
	if gen, err := EnsureServingCert(dir, CertFileName, KeyFileName, o.CertHosts); err != nil || gen {
		t.Fatalf("second start must load the existing pair: generated=%v err=%v", gen, err)
	}
	ca1, err := ReadCABundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv.Register("/ok", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	addr := net.JoinHostPort(o.Host, strconv.Itoa(o.Port))

	g := NewWithT(t)
	var first *tls.ConnectionState
	g.Eventually(func() (err error) {
		first, err = dialServing(addr, ca1, 0)
		return err
	}).WithTimeout(10*time.Second).WithPolling(50*time.Millisecond).Should(Succeed(), "server never served the generated certificate")
	if first.Version < tls.VersionTLS12 {
		t.Fatalf("negotiated TLS version %x", first.Version)
	}
	if first.NegotiatedProtocol == "h2" {
		t.Fatal("HTTP/2 must be off unless enabled")
	}
	if _, err := dialServing(addr, ca1, tls.VersionTLS11); err == nil {
		t.Fatal("a TLS 1.1 client must be refused")
	}

	// Rotate: a new CA and certificate written in place, as cert-manager's Secret update does.
	sc, err := GenerateServingCert(o.CertHosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteServingCert(dir, sc); err != nil {
		t.Fatal(err)
	}
	oldSerial := first.PeerCertificates[0].SerialNumber
	// fsnotify, or certwatcher's 10 s poll at worst.
	g.Eventually(func() (*big.Int, error) {
		st, err := dialServing(addr, sc.CAPEM, 0)
		if err != nil {
			return nil, err
		}
		return st.PeerCertificates[0].SerialNumber, nil
	}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).ShouldNot(Equal(oldSerial), "rotated certificate not served")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("server stopped with %v", err)
	}
}

func TestEnsureServingCertRefusesBrokenDirs(t *testing.T) {
	hosts := []string{"localhost"}
	t.Run("cert without key", func(t *testing.T) {
		dir := t.TempDir()
		sc, _ := GenerateServingCert(hosts, time.Hour)
		if err := os.WriteFile(filepath.Join(dir, CertFileName), sc.CertPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := EnsureServingCert(dir, CertFileName, KeyFileName, hosts)
		if err == nil || !strings.Contains(err.Error(), "has tls.crt but no readable tls.key") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("mismatched pair", func(t *testing.T) {
		dir := t.TempDir()
		a, _ := GenerateServingCert(hosts, time.Hour)
		b, _ := GenerateServingCert(hosts, time.Hour)
		if err := WriteServingCert(dir, &ServingCert{CAPEM: a.CAPEM, CertPEM: a.CertPEM, KeyPEM: b.KeyPEM}); err != nil {
			t.Fatal(err)
		}
		_, err := EnsureServingCert(dir, CertFileName, KeyFileName, hosts)
		if err == nil || !strings.Contains(err.Error(), "do not form a pair") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("expired", func(t *testing.T) {
		dir := t.TempDir()
		sc, _ := GenerateServingCert(hosts, -time.Minute) // NotAfter in the past
		if err := WriteServingCert(dir, sc); err != nil {
			t.Fatal(err)
		}
		_, err := EnsureServingCert(dir, CertFileName, KeyFileName, hosts)
		if err == nil || !strings.Contains(err.Error(), "is valid only from") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("generation disabled and nothing mounted", func(t *testing.T) {
		o := DefaultOptions()
		o.CertDir, o.DisableCertGenerate = t.TempDir(), true
		_, err := NewServer(o)
		if err == nil || !strings.Contains(err.Error(), "generation disabled") {
			t.Fatalf("got %v", err)
		}
	})
}
