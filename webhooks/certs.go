package webhooks

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// File names in a serving-certificate directory; the same keys cert-manager writes into the
// Secret it manages (tls.crt, tls.key, ca.crt).
const (
	CertFileName = "tls.crt"
	KeyFileName  = "tls.key"
	CAFileName   = "ca.crt"
)

// DefaultCertValidity is how long a generated serving certificate lasts (local runs and tests;
// clusters use cert-manager, which renews).
const DefaultCertValidity = 365 * 24 * time.Hour

// ServingCert is a PEM-encoded CA and the serving certificate it signed.
type ServingCert struct {
	CAPEM, CertPEM, KeyPEM []byte
}

// GenerateServingCert makes a self-signed CA and a serving certificate for hosts (DNS names or
// IP addresses), both ECDSA P-256.
func GenerateServingCert(hosts []string, validFor time.Duration) (*ServingCert, error) {
	if len(hosts) == 0 {
		return nil, errors.New("a serving certificate needs at least one host name or IP address")
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "planmode-webhook-ca", Organization: []string{"planmode-operator"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("signing CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: hosts[0], Organization: []string{"planmode-operator"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("signing serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding serving key: %w", err)
	}
	return &ServingCert{
		CAPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand does not fail on supported platforms; a fixed serial is still a valid cert.
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// WriteServingCert writes ca.crt, tls.key and tls.crt into dir, each through a temporary file
// and a rename, so a certificate watcher never reads a half-written file. The key is mode 0600.
func WriteServingCert(dir string, sc *ServingCert) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating certificate directory %s: %w", dir, err)
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{CAFileName, sc.CAPEM, 0o644}, {KeyFileName, sc.KeyPEM, 0o600}, {CertFileName, sc.CertPEM, 0o644}} {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close() //nolint:errcheck,gosec // the write error is the one to report
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close() //nolint:errcheck,gosec
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// EnsureServingCert loads the serving certificate in dir (certName, keyName) if both files are
// there, and otherwise generates a self-signed CA and serving certificate for hosts into dir. It
// returns whether it generated one. A present pair is checked to parse and match, and to be
// currently valid, so a broken mount fails at start instead of on the first TLS handshake.
func EnsureServingCert(dir, certName, keyName string, hosts []string) (generated bool, err error) {
	certPath, keyPath := filepath.Join(dir, certName), filepath.Join(dir, keyName)
	_, certErr := os.Stat(certPath)
	_, keyErr := os.Stat(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		return false, checkServingCert(certPath, keyPath)
	case errors.Is(certErr, os.ErrNotExist) && errors.Is(keyErr, os.ErrNotExist):
		sc, err := GenerateServingCert(hosts, DefaultCertValidity)
		if err != nil {
			return false, err
		}
		if certName != CertFileName || keyName != KeyFileName {
			return false, fmt.Errorf("generating into %s needs the default file names %s and %s", dir, CertFileName, KeyFileName)
		}
		return true, WriteServingCert(dir, sc)
	case certErr == nil:
		return false, fmt.Errorf("serving certificate directory %s has %s but no readable %s: %w", dir, certName, keyName, keyErr)
	default:
		return false, fmt.Errorf("serving certificate directory %s has no readable %s: %w", dir, certName, certErr)
	}
}

func checkServingCert(certPath, keyPath string) error {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return fmt.Errorf("reading serving certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return fmt.Errorf("reading serving key: %w", err)
	}
	pair, err := tlsKeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("serving certificate %s and key %s do not form a pair: %w", certPath, keyPath, err)
	}
	now := time.Now()
	if now.After(pair.NotAfter) || now.Before(pair.NotBefore) {
		return fmt.Errorf("serving certificate %s is valid only from %s to %s", certPath, pair.NotBefore.Format(time.RFC3339), pair.NotAfter.Format(time.RFC3339))
	}
	return nil
}

// ReadCABundle returns ca.crt from dir: the caBundle a local run gives the API server.
func ReadCABundle(dir string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, CAFileName))
	if err != nil {
		return nil, fmt.Errorf("reading the webhook CA bundle: %w", err)
	}
	return b, nil
}

// tlsKeyPair checks that the PEM certificate and key match and returns the parsed leaf.
func tlsKeyPair(certPEM, keyPEM []byte) (*x509.Certificate, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if pair.Leaf != nil {
		return pair.Leaf, nil
	}
	return x509.ParseCertificate(pair.Certificate[0])
}
