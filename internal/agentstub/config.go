package agentstub

import (
	"net/url"
	"strings"
	"time"
)

// Environment variables read by ConfigFromEnv.
const (
	EnvBaseURL = "DIFY_AGENT_STUB_API_BASE_URL"
	EnvToken   = "DIFY_AGENT_STUB_AUTH_JWE"

	// Test-only: Go durations that replace the default timeouts so tests of
	// the stall mode finish in seconds. Not part of the documented interface
	// for agents.
	EnvTestAPITimeout      = "DIFY_AGENT_TEST_API_TIMEOUT"
	EnvTestTransferTimeout = "DIFY_AGENT_TEST_TRANSFER_TIMEOUT"
)

const (
	// DefaultAPITimeout bounds one API request, reply body included: every
	// API answer is a small JSON document, so 30 s means the backend is stuck.
	DefaultAPITimeout = 30 * time.Second
	// DefaultTransferTimeout bounds one signed-URL upload or download, body
	// included; skill archives and files may be megabytes on a slow link.
	DefaultTransferTimeout = 120 * time.Second
	// DefaultUploadTimeout bounds one signed upload of `file upload` and
	// `drive push`: 180 s as in the original CLI (agent-cli-backend.md).
	DefaultUploadTimeout = 180 * time.Second
)

// basePath is the path every API route hangs under.
const basePath = "/agent-stub"

// Config is what a Client needs, with every default filled.
type Config struct {
	BaseURL         string // normalised, ends in /agent-stub
	Token           string
	APITimeout      time.Duration
	TransferTimeout time.Duration
	UploadTimeout   time.Duration // signed uploads of file upload and drive push
}

// ConfigFromEnv reads the connection settings through getenv (os.Getenv in
// the CLI). Both values are trimmed. It fails, naming every missing
// variable, or the malformed one, before any request is made.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{APITimeout: DefaultAPITimeout, TransferTimeout: DefaultTransferTimeout, UploadTimeout: DefaultUploadTimeout}
	raw := strings.TrimSpace(getenv(EnvBaseURL))
	cfg.Token = strings.TrimSpace(getenv(EnvToken))
	var missing []string
	if raw == "" {
		missing = append(missing, EnvBaseURL)
	}
	if cfg.Token == "" {
		missing = append(missing, EnvToken)
	}
	if len(missing) > 0 {
		return Config{}, errorf(CodeMissingEnv, "missing required Agent Stub environment variables: %s", strings.Join(missing, ", "))
	}
	base, err := NormalizeBaseURL(raw)
	if err != nil {
		return Config{}, err
	}
	cfg.BaseURL = base
	for _, o := range []struct {
		name string
		dst  []*time.Duration
	}{{EnvTestAPITimeout, []*time.Duration{&cfg.APITimeout}},
		{EnvTestTransferTimeout, []*time.Duration{&cfg.TransferTimeout, &cfg.UploadTimeout}}} {
		v := getenv(o.name)
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return Config{}, errorf(CodeInvalidEnv, "%s must be a positive duration, got %q", o.name, v)
		}
		for _, dst := range o.dst {
			*dst = d
		}
	}
	return cfg, nil
}

// NormalizeBaseURL checks an Agent Stub base URL and returns it ending in
// /agent-stub. Only http and https URLs with a host and a path that is empty,
// "/", "/agent-stub" or "/agent-stub/" are accepted; no query, fragment or
// user info.
func NormalizeBaseURL(raw string) (string, error) {
	bad := func(why string) error {
		return errorf(CodeInvalidEnv, "%s %s (want http(s)://HOST[:PORT] or http(s)://HOST[:PORT]/agent-stub), got %q", EnvBaseURL, why, raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", bad("is not a URL")
	}
	if u.Scheme == "grpc" {
		// The original's older line had a gRPC transport for three calls;
		// the current Agent Stub is HTTP only, and so is this CLI.
		return "", errorf(CodeInvalidEnv, "%s uses grpc://, which this CLI does not support: set it to the HTTP URL of the Agent Stub (http(s)://HOST[:PORT][/agent-stub]), got %q", EnvBaseURL, raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", bad("must use http or https")
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", bad("has no host")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", bad("must not have user info, a query or a fragment")
	}
	switch u.EscapedPath() {
	case "", "/", basePath, basePath + "/":
	default:
		return "", bad("path must be empty or /agent-stub")
	}
	return u.Scheme + "://" + u.Host + basePath, nil
}
