package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Lifetimes of the certificates. The CA outlives any server run that made
// it in memory; a leaf is short (it is made again when it runs out) so a
// leaked leaf key is worth little.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 7 * 24 * time.Hour
	// leafSkew back-dates certificates: a job's clock a little behind
	// the server's must still accept them.
	leafSkew = time.Hour
	// maxLeaves bounds the leaf cache: only hosts some credential matches
	// are intercepted, so this is far more than a deployment uses.
	maxLeaves = 4096
)

// Files of the CA.
const (
	CAFile     = "ca.pem"     // the CA certificate (jobs read it)
	BundleFile = "bundle.pem" // system roots + the CA (jobs read it)
	caKeyFile  = "ca-key.pem" // only in --egress-ca-dir, 0600
)

// systemBundles are where distributions keep the system roots, first
// found wins.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",             // openSUSE
	"/etc/ssl/cert.pem",                  // Alpine, macOS
}

type authority struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// loadOrMakeCA loads the CA from dir (made there when missing) or, with no
// dir, makes one in memory.
func loadOrMakeCA(dir string) (*authority, error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("--egress-ca-dir %s: %w", dir, err)
		}
		st, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("--egress-ca-dir %s: %w", dir, err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("--egress-ca-dir %s is mode %o: the CA's key must be readable by its owner only (chmod 700)", dir, st.Mode().Perm())
		}
		certPEM, cerr := os.ReadFile(filepath.Join(dir, CAFile))
		keyPEM, kerr := os.ReadFile(filepath.Join(dir, caKeyFile))
		if cerr == nil && kerr == nil {
			return parseCA(certPEM, keyPEM, dir)
		}
		if !errors.Is(cerr, os.ErrNotExist) || !errors.Is(kerr, os.ErrNotExist) {
			return nil, fmt.Errorf("--egress-ca-dir %s holds only one of %s and %s: remove it or restore the other", dir, CAFile, caKeyFile)
		}
	}
	a, keyPEM, err := makeCA()
	if err != nil {
		return nil, err
	}
	if dir != "" {
		if err := writeExcl(filepath.Join(dir, caKeyFile), keyPEM, 0o600); err != nil {
			return nil, err
		}
		if err := writeExcl(filepath.Join(dir, CAFile), a.certPEM, 0o644); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func writeExcl(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func parseCA(certPEM, keyPEM []byte, dir string) (*authority, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("--egress-ca-dir %s: %s or %s is not PEM", dir, CAFile, caKeyFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("--egress-ca-dir %s: %s: %w", dir, CAFile, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("--egress-ca-dir %s: %s: %w", dir, caKeyFile, err)
	}
	if !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("--egress-ca-dir %s: %s is not a CA certificate of the key in %s", dir, CAFile, caKeyFile)
	}
	return &authority{cert: cert, certPEM: certPEM, key: key, leaves: map[string]*tls.Certificate{}}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func makeCA() (*authority, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "shellctl egress proxy CA", Organization: []string{"shellctl"}},
		NotBefore:             now.Add(-leafSkew),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	a := &authority{cert: cert, key: key, leaves: map[string]*tls.Certificate{},
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	return a, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// Fingerprint is the SHA-256 of the CA certificate (hex, as openssl's
// -fingerprint -sha256 without colons).
func (a *authority) Fingerprint() string {
	s := sha256.Sum256(a.cert.Raw)
	return hex.EncodeToString(s[:])
}

// leaf returns the certificate for host, made once and cached until it
// nears its end.
func (a *authority) leaf(host string) (*tls.Certificate, error) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.leaves[host]; ok && now.Before(c.Leaf.NotAfter.Add(-leafSkew)) {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-leafSkew),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, err
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: key, Leaf: parsed}
	if len(a.leaves) >= maxLeaves {
		clear(a.leaves)
	}
	a.leaves[host] = c
	return c, nil
}

// writeOut puts the CA certificate and the bundle (system roots + CA) in
// dir, readable by everyone, each replaced whole (a job reading one never
// sees half a file).
func (a *authority) writeOut(dir string) (bundle string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("--egress-ca-out %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", fmt.Errorf("--egress-ca-out %s: %w", dir, err)
	}
	var roots []byte
	for _, p := range systemBundles {
		if b, err := os.ReadFile(p); err == nil {
			roots, bundle = b, p
			break
		}
	}
	if len(roots) > 0 && roots[len(roots)-1] != '\n' {
		roots = append(roots, '\n')
	}
	all := append(append([]byte(nil), roots...), a.certPEM...)
	for name, b := range map[string][]byte{CAFile: a.certPEM, BundleFile: all} {
		tmp, err := os.CreateTemp(dir, "."+name+".*")
		if err != nil {
			return "", fmt.Errorf("--egress-ca-out %s: %w", dir, err)
		}
		_, werr := tmp.Write(b)
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o644)); err != nil {
			os.Remove(tmp.Name())
			return "", err
		}
		if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
			os.Remove(tmp.Name())
			return "", err
		}
	}
	return bundle, nil
}
