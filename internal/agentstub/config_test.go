package agentstub

import (
	"strings"
	"testing"
	"time"
)

func TestNormalizeBaseURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://host", "http://host/agent-stub"},
		{"http://host/", "http://host/agent-stub"},
		{"https://host:8443/agent-stub", "https://host:8443/agent-stub"},
		{"https://host:8443/agent-stub/", "https://host:8443/agent-stub"},
		{"http://127.0.0.1:5001", "http://127.0.0.1:5001/agent-stub"},
		{"http://[::1]:80/agent-stub", "http://[::1]:80/agent-stub"},
		{"ftp://host", ""},
		{"host:80", ""},
		{"http://", ""},
		{"http://host/api", ""},
		{"http://host/agent-stub/x", ""},
		{"http://host//agent-stub", ""},
		{"http://host/agent-stub?x=1", ""},
		{"http://host/agent-stub#f", ""},
		{"http://user:pw@host/", ""},
		{"://bad", ""},
	} {
		got, err := NormalizeBaseURL(c.in)
		if got != c.want || (err != nil) != (c.want == "") {
			t.Errorf("NormalizeBaseURL(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
		if err != nil && (!strings.Contains(err.Error(), EnvBaseURL) || CodeOf(err) != CodeInvalidEnv) {
			t.Errorf("NormalizeBaseURL(%q) error does not name %s: %v", c.in, EnvBaseURL, err)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	cfg, err := ConfigFromEnv(env(map[string]string{EnvBaseURL: "http://h/", EnvToken: "tok"}))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{BaseURL: "http://h/agent-stub", Token: "tok", APITimeout: 30 * time.Second, TransferTimeout: 120 * time.Second, UploadTimeout: 180 * time.Second}
	if cfg != want {
		t.Fatalf("cfg = %+v, want %+v", cfg, want)
	}
	cfg, err = ConfigFromEnv(env(map[string]string{EnvBaseURL: "http://h", EnvToken: "tok",
		EnvTestAPITimeout: "250ms", EnvTestTransferTimeout: "2s"}))
	if err != nil || cfg.APITimeout != 250*time.Millisecond || cfg.TransferTimeout != 2*time.Second {
		t.Fatalf("cfg = %+v, %v", cfg, err)
	}
	// Both values are trimmed, as the original does.
	cfg, err = ConfigFromEnv(env(map[string]string{EnvBaseURL: " http://h/agent-stub\n", EnvToken: "\ttok "}))
	if err != nil || cfg.BaseURL != "http://h/agent-stub" || cfg.Token != "tok" {
		t.Fatalf("trimmed cfg = %+v, %v", cfg, err)
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvToken: "t"}, "missing_env: missing required Agent Stub environment variables: DIFY_AGENT_STUB_API_BASE_URL"},
		{map[string]string{EnvBaseURL: "http://h", EnvToken: "  "}, "missing_env: missing required Agent Stub environment variables: DIFY_AGENT_STUB_AUTH_JWE"},
		{map[string]string{EnvBaseURL: " "}, "missing_env: missing required Agent Stub environment variables: DIFY_AGENT_STUB_API_BASE_URL, DIFY_AGENT_STUB_AUTH_JWE"},
		{map[string]string{EnvBaseURL: "grpc://h:9000", EnvToken: "t"},
			`invalid_env: DIFY_AGENT_STUB_API_BASE_URL uses grpc://, which this CLI does not support: set it to the HTTP URL of the Agent Stub (http(s)://HOST[:PORT][/agent-stub]), got "grpc://h:9000"`},
		{map[string]string{EnvBaseURL: "http://h", EnvToken: "t", EnvTestAPITimeout: "soon"},
			`invalid_env: DIFY_AGENT_TEST_API_TIMEOUT must be a positive duration, got "soon"`},
		{map[string]string{EnvBaseURL: "http://h", EnvToken: "t", EnvTestTransferTimeout: "-1s"},
			`invalid_env: DIFY_AGENT_TEST_TRANSFER_TIMEOUT must be a positive duration, got "-1s"`},
	} {
		if _, err := ConfigFromEnv(env(c.env)); err == nil || err.Error() != c.want {
			t.Errorf("ConfigFromEnv(%v) = %v, want %q", c.env, err, c.want)
		}
	}
}

func TestShorten(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"  a\r\n\tb  ", "a b"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{strings.Repeat("x", 200), strings.Repeat("x", 200)},
		{strings.Repeat("x", 201), strings.Repeat("x", 200) + "..."},
		// Cut on a rune boundary: 199 bytes of x, then a 2-byte rune.
		{strings.Repeat("x", 199) + "üü", strings.Repeat("x", 199) + "..."},
	} {
		if got := Shorten([]byte(c.in)); got != c.want {
			t.Errorf("Shorten(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
