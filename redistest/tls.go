package redistest

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
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TLS is a throw-away certificate authority with one server certificate and
// one client certificate, all ECDSA P-256, written as PEM files to a
// directory. Put it in Options.TLS to start a server that accepts TLS
// connections only; its ClientConfig is what a go-redis client needs.
//
// The server certificate is valid for 127.0.0.1, ::1 and localhost and for
// both server and client authentication, because Cluster nodes and replicas
// dial each other with it.
type TLS struct {
	// CAFile, CertFile and KeyFile are the CA certificate and the server's
	// certificate and key (tls-ca-cert-file, tls-cert-file, tls-key-file).
	CAFile, CertFile, KeyFile string
	// ClientCertFile and ClientKeyFile are a client certificate signed by
	// the CA and its key.
	ClientCertFile, ClientKeyFile string

	pool   *x509.CertPool
	client tls.Certificate
}

// NewTLS generates a CA, a server and a client certificate in a temporary
// directory of tb.
func NewTLS(tb testing.TB) *TLS {
	tb.Helper()
	if err := TLSSupported(); err != nil {
		tb.Fatalf("%v; %s", err, tlsHint)
	}
	t, err := GenerateTLS(tb.TempDir())
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return t
}

// GenerateTLS generates a CA valid for a day, a server certificate and a
// client certificate signed by it, and writes them to dir.
func GenerateTLS(dir string) (*TLS, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("redistest: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	t := &TLS{
		CAFile:         filepath.Join(dir, "ca.crt"),
		CertFile:       filepath.Join(dir, "redis.crt"),
		KeyFile:        filepath.Join(dir, "redis.key"),
		ClientCertFile: filepath.Join(dir, "client.crt"),
		ClientKeyFile:  filepath.Join(dir, "client.key"),
		pool:           x509.NewCertPool(),
	}
	t.pool.AddCert(ca)
	if err := writePEM(t.CAFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(cn string, usage []x509.ExtKeyUsage, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  usage,
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			DNSNames:     []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("redistest: %s certificate: %w", cn, err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyFile, "EC PRIVATE KEY", keyDER)
	}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if err := leaf("redis-server", both, t.CertFile, t.KeyFile); err != nil {
		return nil, err
	}
	if err := leaf("redis-client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, t.ClientCertFile, t.ClientKeyFile); err != nil {
		return nil, err
	}
	if t.client, err = tls.LoadX509KeyPair(t.ClientCertFile, t.ClientKeyFile); err != nil {
		return nil, err
	}
	return t, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// ClientConfig returns a TLS configuration that trusts only the CA and
// presents the client certificate, for redis.Options.TLSConfig and
// redis.ClusterOptions.TLSConfig. Each call returns a new value.
func (t *TLS) ClientConfig() *tls.Config {
	return &tls.Config{
		RootCAs:      t.pool,
		Certificates: []tls.Certificate{t.client},
		MinVersion:   tls.VersionTLS12,
	}
}

// configLines are the server directives for t: TLS on port, plain TCP off.
// Cluster nodes and replicas also talk to each other over TLS.
func (t *TLS) configLines(port string) []string {
	return []string{
		"port 0",
		"tls-port " + port,
		"tls-cert-file " + t.CertFile,
		"tls-key-file " + t.KeyFile,
		"tls-ca-cert-file " + t.CAFile,
		"tls-auth-clients optional",
		"tls-replication yes",
		"tls-cluster yes",
	}
}

var tlsProbe = sync.OnceValue(func() error {
	bin, err := Binary()
	if err != nil {
		return err
	}
	// A server built with TLS accepts tls-port and then finds nothing to
	// listen on; one built without it rejects the directive.
	out, _ := exec.Command(bin, "--port", "0", "--tls-port", "0").CombinedOutput()
	if strings.Contains(string(out), "not listen anywhere") {
		return nil
	}
	return fmt.Errorf("%w (%s): %s", ErrNoTLS, bin, strings.TrimSpace(lastLine(string(out))))
})

// ErrNoTLS means the redis-server binary was built without TLS support.
var ErrNoTLS = errors.New("redistest: redis-server was built without TLS (BUILD_TLS=yes)")

// TLSSupported returns nil when the redis-server binary was built with TLS,
// and an error wrapping ErrNoTLS otherwise; the probe runs once per process.
// NewTLS fails the test with this error: a test that needs TLS never passes
// silently on a server that has none.
func TLSSupported() error { return tlsProbe() }

const tlsHint = "Debian's redis-server has TLS: `sudo apt-get install -y redis-server`, or set REDISTEST_SERVER to a redis-server built with BUILD_TLS=yes"

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
