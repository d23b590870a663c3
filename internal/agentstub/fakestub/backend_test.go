package fakestub

import (
	"net/http"
	"strings"
	"testing"
)

// The validations of agent-cli-backend.md that the CLI never triggers
// itself, checked on the fake directly.
func TestBackendValidation(t *testing.T) {
	s, url := newServer(t)
	_, ref := s.AddUpload("a.txt", "text/plain", []byte("x"))
	api := url + "/agent-stub"
	for _, c := range []struct {
		method, path, token, body string
		status                    int
		contains                  string
	}{
		{"POST", "/files/upload-request", "tok", `{"filename":"a","mimetype":"t","extra":1}`, 422, `"extra fields not permitted"`},
		{"POST", "/files/upload-request", "tok", `{"filename":"a"}`, 422, `"field required"`},
		{"POST", "/files/upload-request", TokenExpired, `{"filename":"a","mimetype":"t"}`, 401, `{"detail":"Agent Stub authorization expired"}`},
		{"POST", "/files/upload-request?expose_expiration=true", TokenExpired, `{"filename":"a","mimetype":"t"}`, 401, `"code":"agent_stub_authorization_expired"`},
		{"POST", "/files/upload-request", TokenHomeWrite, `{"filename":"a","mimetype":"t"}`, 401, `invalid or missing`},
		{"POST", "/files/download-request", "tok", `{"file":{"transfer_method":"tool_file","reference":"` + ref + `"},"config":{"kind":"file","name":"a"},"for_frontend":false}`, 422, "exactly one"},
		{"POST", "/files/download-request", "tok", `{"file":{"transfer_method":"tool_file","reference":"` + ref + `","url":"http://x/y"},"for_frontend":false}`, 422, "url is only for remote_url"},
		{"POST", "/files/download-request", "tok", `{"file":{"transfer_method":"remote_url","url":"http://x/y","reference":"` + ref + `"},"for_frontend":false}`, 422, "remote_url needs url"},
		{"POST", "/files/download-request", "tok", `{"file":{"transfer_method":"upload","reference":"` + ref + `"}}`, 422, "transfer_method must be"},
		{"POST", "/files/download-request", "tok", `{"config":{"kind":"file","name":"a"},"for_frontend":true}`, 422, "for_frontend false"},
		{"POST", "/files/download-request", "tok", `{"file":{"transfer_method":"tool_file","reference":"` + ref + `"},"for_external":true}`, 200, `"download_url":"/files/tools/`},
		{"POST", "/files/download-request", TokenExpired, `{"config":{"kind":"file","name":"a"},"for_frontend":false}`, 401, `"code":"agent_stub_authorization_expired"`},
		{"POST", "/drive/commit", "tok", `{"items":[{"key":"k","file_ref":{"kind":"tool_file","id":"nope"}}]}`, 422, "no uploaded tool_file"},
		{"POST", "/drive/commit", "tok", `{"items":[{"key":"k","file_ref":{"kind":"upload_file","id":"x"}}]}`, 422, "kind: tool_file"},
		{"GET", "/drive/manifest?prefix=docs/&include_download_url=false", "tok", ``, 200, `"download_url":null`},
		{"GET", "/drive/manifest?include_download_url=true", "tok", ``, 422, "prefix"},
		{"PUT", "/home-snapshots/archive?snapshot_ref=other", "tok", `x`, 401, "invalid Home Snapshot authorization"},
		{"GET", "/home-snapshots/archive", TokenHomeWrite, ``, 401, "invalid Home Snapshot authorization"},
		{"POST", "/knowledge/commands", "tok", strings.Repeat(" ", 25<<10) + `{}`, 413, "KNOWLEDGE_INPUT_TOO_LARGE"},
		{"POST", "/knowledge/commands", "tok", `{"version":1,"command":"spaces","command_id":"3f2504e0-4f89-41d3-9a0c-0305e82c3301","space":"x"}`, 422, "KNOWLEDGE_INVALID_COMMAND"},
		{"POST", "/knowledge/commands", "tok", `{"version":1,"command":"ls","command_id":"x","space":"s","path":"/knowledge"}`, 422, "KNOWLEDGE_INVALID_COMMAND"},
		{"POST", "/knowledge/commands", "tok", `{"version":1,"command":"search","command_id":"3f2504e0-4f89-41d3-9a0c-0305e82c3302","space":"s","image_file_ids":["6f9619ff-8b86-4011-b42d-00c04fc964ff","6F9619FF-8B86-4011-B42D-00C04FC964FF"]}`, 422, "unique"},
	} {
		code, body := do(t, c.method, api+c.path, c.token, c.body)
		if code != c.status || !strings.Contains(body, c.contains) {
			t.Errorf("%s %s: %d %s, want %d with %q", c.method, c.path, code, body, c.status, c.contains)
		}
	}
	// A signed URL used with a token is refused: the token must not reach
	// a storage host.
	code, body := do(t, "POST", api+"/files/upload-request", "tok", `{"filename":"a","mimetype":"t"}`)
	up := body[strings.Index(body, "http"):strings.LastIndex(body, `"`)]
	if code != 200 {
		t.Fatal(body)
	}
	req, _ := http.NewRequest("POST", up, strings.NewReader(""))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("signed upload with a token: %d", resp.StatusCode)
	}
	// Every hostile fixture builds.
	for _, n := range HostileArchiveNames() {
		if len(HostileArchive(n, "/tmp/outside")) == 0 || !ValidMode(HostilePrefix+n) {
			t.Errorf("fixture %s", n)
		}
	}
	if err := s.SetMode("no-such-mode"); err == nil {
		t.Error("unknown mode accepted")
	}
}
