package agentstub_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shellctl/shellctl/internal/agentstub"
	"github.com/shellctl/shellctl/internal/agentstub/fakestub"
)

func newClient(t *testing.T, h http.Handler) *agentstub.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := agentstub.New(agentstub.Config{BaseURL: srv.URL + "/agent-stub", Token: "tok",
		APITimeout: 2 * time.Second, TransferTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientAgainstFakeStub(t *testing.T) {
	stub := fakestub.New("tok")
	t.Cleanup(stub.Close)
	c := newClient(t, stub)
	ctx := context.Background()

	if _, err := c.PutPrompt(ctx, "p\r\n"); err != nil {
		t.Fatal(err)
	}
	if p, err := c.GetPrompt(ctx); err != nil || p != "p\r\n" {
		t.Fatalf("GetPrompt = %q, %v", p, err)
	}
	data := []byte("file body")
	url, err := c.UploadRequest(ctx, "a.txt", "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Upload(ctx, url, "a.txt", "text/plain", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PushConfig(ctx, agentstub.Push{Files: []agentstub.Ref{{Name: "a.txt", FileRef: &agentstub.FileRef{Kind: "tool_file", ID: id}}}}); err != nil {
		t.Fatal(err)
	}
	m, err := c.Manifest(ctx)
	if err != nil || len(m.Names(agentstub.KindFile)) != 1 {
		t.Fatalf("manifest = %+v, %v", m, err)
	}
	tk, err := c.DownloadRequest(ctx, agentstub.KindFile, "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := c.Download(ctx, tk, &got); err != nil || got.String() != "file body" {
		t.Fatalf("Download = %q, %v", got.String(), err)
	}
	// Signed URLs are one-time.
	if _, err := c.Download(ctx, tk, io.Discard); agentstub.CodeOf(err) != "invalid_signature" {
		t.Fatalf("second download: %v", err)
	}
}

// A relative signed URL is resolved against the base URL; a numeric id is
// accepted; a size that does not match is an error.
func TestSignedURLEdgeCases(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/store/up", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Error("bearer token sent to a signed URL")
		}
		if r.ContentLength <= 0 {
			t.Errorf("upload without Content-Length")
		}
		if _, _, err := r.FormFile("file"); err != nil {
			t.Errorf("no file field: %v", err)
		}
		io.WriteString(w, `{"id": 42}`)
	})
	mux.HandleFunc("/store/down", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "12345") })
	c := newClient(t, mux)
	ctx := context.Background()
	id, err := c.Upload(ctx, "/store/up", "x", "text/plain", strings.NewReader("abc"), 3)
	if err != nil || id != "42" {
		t.Fatalf("Upload = %q, %v", id, err)
	}
	four := int64(4)
	if _, err := c.Download(ctx, &agentstub.Ticket{DownloadURL: "../store/down", Size: &four}, io.Discard); agentstub.CodeOf(err) != agentstub.CodeTransferFailed {
		t.Fatalf("size mismatch: %v", err)
	}
	if _, err := c.Download(ctx, &agentstub.Ticket{DownloadURL: "file:///etc/passwd"}, io.Discard); agentstub.CodeOf(err) != agentstub.CodeBadResponse {
		t.Fatalf("file URL: %v", err)
	}
}

func TestMissingFieldsAreMalformed(t *testing.T) {
	c := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"other":1}`) }))
	if _, err := c.GetPrompt(context.Background()); agentstub.CodeOf(err) != agentstub.CodeBadResponse {
		t.Fatalf("GetPrompt: %v", err)
	}
	if _, err := c.DownloadRequest(context.Background(), agentstub.KindSkill, "s"); agentstub.CodeOf(err) != agentstub.CodeBadResponse {
		t.Fatalf("DownloadRequest: %v", err)
	}
}
