package bench

// The egress proxy's cost (docs/egress.md): an HTTPS request through the
// proxy, intercepted (TLS terminated, a header set, the answer scrubbed)
// and tunnelled, against the same request made directly; and a large
// download each way. Proxy, upstream and client run in this process on
// loopback: the figures are the proxy's own cost, with no job in the way.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/shellctl/shellctl/internal/egress"
)

// egressDownloadMB is the download of the throughput rows (10^6 bytes).
const egressDownloadMB = 100

type egressBench struct {
	up                        *httptest.Server
	port                      string
	proxy                     *egress.Proxy
	direct, tunnel, intercept *http.Client
}

func (b *egressBench) close() {
	for _, c := range []*http.Client{b.direct, b.tunnel, b.intercept} {
		if c != nil {
			c.CloseIdleConnections()
		}
	}
	if b.proxy != nil {
		b.proxy.Close()
	}
	if b.up != nil {
		b.up.Close()
	}
}

// startEgressBench starts an HTTPS upstream (a test CA's certificate for
// cred.bench and tun.bench), the proxy with a credential bound to
// cred.bench, and three clients: direct, through the proxy to tun.bench
// (tunnelled) and to cred.bench (intercepted).
func startEgressBench(dir string) (*egressBench, error) {
	b := &egressBench{}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), DNSNames: []string{"cred.bench", "tun.bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "upstream-ca.pem")
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(hosts, []byte("127.0.0.1 cred.bench tun.bench\n"), 0o644); err != nil {
		return nil, err
	}
	chunk := make([]byte, 64<<10)
	b.up = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("bytes"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		for n > 0 {
			k, err := w.Write(chunk[:min(n, int64(len(chunk)))])
			if err != nil {
				return
			}
			n -= int64(k)
		}
	}))
	b.up.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	b.up.StartTLS()
	_, b.port, _ = net.SplitHostPort(b.up.Listener.Addr().String())
	b.proxy, err = egress.Start(egress.Config{Listen: "127.0.0.1:0", CAOut: filepath.Join(dir, "ca-out"),
		UpstreamCA: caFile, HostsFile: hosts, AllowPrivate: true})
	if err != nil {
		b.close()
		return nil, err
	}
	session, creds, err := egress.ParsePrepare([]byte(`{"session_id":"bench","credentials":[{"provider":"bench","name":"token","value":"bench-credential-value",
		"inject":{"type":"http-header","config":{"name":"Authorization","expr":"Bearer {{.Value}}","domains":["cred.bench"]}}}]}`))
	if err != nil {
		b.close()
		return nil, err
	}
	b.proxy.Prepare(session, creds)
	_, vars, _ := b.proxy.JobEnv("bench", true, "00000000bench000")
	proxyURL, err := url.Parse(vars["HTTPS_PROXY"])
	if err != nil {
		b.close()
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	proxyCA, err := os.ReadFile(filepath.Join(b.proxy.CAOut(), egress.CAFile))
	if err != nil || !roots.AppendCertsFromPEM(proxyCA) {
		b.close()
		return nil, fmt.Errorf("read the proxy's CA: %v", err)
	}
	tr := func(proxy bool) *http.Client {
		t := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, MaxIdleConnsPerHost: 4, DisableCompression: true}
		if proxy {
			t.Proxy = http.ProxyURL(proxyURL)
		} else {
			t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				_, port, _ := net.SplitHostPort(addr)
				return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
			}
		}
		return &http.Client{Transport: t}
	}
	b.direct, b.tunnel, b.intercept = tr(false), tr(true), tr(true)
	return b, nil
}

// get fetches n bytes from host through c and returns the time taken.
func (b *egressBench) get(ctx context.Context, c *http.Client, host string, n int64) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+":"+b.port+"/?bytes="+strconv.FormatInt(n, 10), nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	got, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err == nil && (resp.StatusCode != 200 || got != n) {
		err = fmt.Errorf("GET %s: %d, %d of %d bytes", host, resp.StatusCode, got, n)
	}
	return d, err
}

func benchEgress(ctx context.Context, e *Env, s Sizes) []*Row {
	icpt := &Row{Figure: "egress: HTTPS request intercepted by the proxy, over direct", Unit: Millis, Target: Target{DiffAtMost, 2}}
	tun := &Row{Figure: "egress: HTTPS request tunnelled by the proxy, over direct", Unit: Millis, Target: Target{DiffAtMost, 2}}
	mb := int64(egressDownloadMB)
	if s.Runs < FullSizes.Runs {
		mb = 32
	}
	dlI := &Row{Figure: fmt.Sprintf("egress: %d MB download intercepted", mb), Unit: MBps, Target: Target{RatioAtLeast, 0.8}}
	dlT := &Row{Figure: fmt.Sprintf("egress: %d MB download tunnelled", mb), Unit: MBps, Target: Target{RatioAtLeast, 0.8}}
	rows := []*Row{icpt, tun, dlI, dlT}
	fail := func(err error) []*Row {
		for _, r := range rows {
			r.Err = err.Error()
		}
		return rows
	}
	dir, err := os.MkdirTemp(e.Tmp, "egress-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	b, err := startEgressBench(dir)
	if err != nil {
		return fail(err)
	}
	defer b.close()
	var dir0, icp, tn []float64
	for i := -5; i < s.Runs; i++ { // 5 warm-ups: connections made, the leaf minted
		d0, err := b.get(ctx, b.direct, "cred.bench", 100)
		if err != nil {
			return fail(err)
		}
		d1, err := b.get(ctx, b.intercept, "cred.bench", 100)
		if err != nil {
			return fail(err)
		}
		d2, err := b.get(ctx, b.tunnel, "tun.bench", 100)
		if err != nil {
			return fail(err)
		}
		if i >= 0 {
			dir0, icp, tn = append(dir0, ms(d0)), append(icp, ms(d1)), append(tn, ms(d2))
		}
	}
	icpt.Runtime, icpt.Floor = Summarize(icp), Summarize(dir0)
	tun.Runtime, tun.Floor = Summarize(tn), Summarize(dir0)
	icpt.Notes = append(icpt.Notes, fmt.Sprintf("%d × GET of 100 bytes over a kept-alive connection, through the proxy (TLS terminated with a cached leaf, Authorization set, the answer scrubbed) vs straight to the upstream, interleaved, all on loopback in one process; ratio column = p50 difference; target (ours): ≤ +2 ms", len(icp)))
	tun.Notes = append(tun.Notes, fmt.Sprintf("%d × the same GET through a CONNECT tunnel (nothing decrypted) vs direct", len(tn)))
	n := mb * 1_000_000
	var fd, fi, ft []float64
	for i := 0; i < s.Reps; i++ {
		for _, c := range []struct {
			cl   *http.Client
			host string
			into *[]float64
		}{{b.direct, "cred.bench", &fd}, {b.intercept, "cred.bench", &fi}, {b.tunnel, "tun.bench", &ft}} {
			d, err := b.get(ctx, c.cl, c.host, n)
			if err != nil {
				return fail(err)
			}
			*c.into = append(*c.into, float64(n)/1e6/d.Seconds())
		}
	}
	dlI.Runtime, dlI.Floor = Summarize(fi), Summarize(fd)
	dlT.Runtime, dlT.Floor = Summarize(ft), Summarize(fd)
	dlI.Notes = append(dlI.Notes, fmt.Sprintf("%d × a %d MB HTTPS download through the proxy, intercepted (decrypted, scrubbed for the credential's value, encrypted again) vs direct; target (ours): ≥ 0.8×", s.Reps, mb))
	dlT.Notes = append(dlT.Notes, fmt.Sprintf("%d × the same download through a CONNECT tunnel vs direct; target (ours): ≥ 0.8×", s.Reps))
	return rows
}
