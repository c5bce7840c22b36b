package remote_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/ballast-io/ballast/internal/testpeer"
	"github.com/ballast-io/ballast/models"
	"github.com/ballast-io/ballast/storage/remote"
)

// selfSigned writes a certificate for 127.0.0.1 and its key; the
// certificate is its own CA.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ballast test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, key
}

// TestRemoteTLSAndBasicAuth writes to and reads from a VictoriaMetrics that
// serves HTTPS with basic auth: the CA and the password come from files.
// With a wrong password every send fails and is retried; nothing is
// dropped, and the password never appears in an error.
func TestRemoteTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	vm := testpeer.StartVictoriaMetrics(t, "-tls", "-tlsCertFile="+cert, "-tlsKeyFile="+key,
		"-httpAuth.username=ballast", "-httpAuth.password=s3cret-pw")
	pw := filepath.Join(dir, "password")
	os.WriteFile(pw, []byte("s3cret-pw\n"), 0o600)
	auth := remote.ClientAuth{CAFile: cert, BasicUser: "ballast", BasicPasswordFile: pw}
	s := open(t, remote.Options{WriteURL: vm.WriteURL(), QueryURL: vm.QueryURL(), Auth: auth, FlushURLs: []string{vm.FlushURL}})
	now := time.Now().Truncate(time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := s.Append(context.Background(), []models.Sample{{Name: "tls_test", Timestamp: now.UnixMilli(), Value: 7}}); err != nil {
			t.Fatal(err)
		}
		s.Flush()
		rs, err := s.Query(context.Background(), "tls_test", now)
		if err == nil && len(rs) == 1 && rs[0].Values[0] == 7 {
			break
		}
		if time.Now().After(deadline) { // the server may still be starting
			t.Fatalf("over HTTPS with basic auth: got %v, %v; want tls_test = 7", rs, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	wrong := filepath.Join(dir, "wrong")
	os.WriteFile(wrong, []byte("not-the-password"), 0o600)
	set := metrics.NewSet()
	bad := open(t, remote.Options{WriteURL: vm.WriteURL(), QueryURL: vm.QueryURL(), Metrics: set,
		Auth: remote.ClientAuth{CAFile: cert, BasicUser: "ballast", BasicPasswordFile: wrong}, BlockInterval: 50 * time.Millisecond})
	if err := bad.Append(context.Background(), []models.Sample{{Name: "tls_test", Timestamp: now.UnixMilli(), Value: 8}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if n := set.GetOrCreateCounter(`ballast_remote_send_errors_total`).Get(); n == 0 {
		t.Fatal("sends with a wrong password did not fail")
	}
	if n := set.GetOrCreateCounter(`ballast_remote_samples_dropped_total{reason="rejected"}`).Get(); n != 0 {
		t.Fatalf("a 401 dropped %d samples; want them kept and retried", n)
	}
	if _, n, _ := bad.QueueStats(); n != 1 {
		t.Fatalf("queue holds %d samples; want the 1 refused with 401", n)
	}
	if _, err := bad.Query(context.Background(), "tls_test", now); err == nil || strings.Contains(err.Error(), "not-the-password") {
		t.Fatalf("query with a wrong password: err %v; want an error without the password", err)
	}
}
