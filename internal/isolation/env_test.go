package isolation

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

func TestBuildEnv(t *testing.T) {
	server := []string{
		"PATH=/usr/bin:/bin",
		"LANG=C.UTF-8",
		"USER=agent",
		"LOGNAME=agent",
		"SHELL=/bin/bash",
		"EDITOR=vi",
		"SHELLCTL_AUTH_TOKEN=server-token",
		"shellctl_lower=x",
		"SHELLCTL_ENABLE_PATH_ISOLATION=false",
		"TMUX=/tmp/tmux-0/default,1,0",
		"TMUX_PANE=%1",
		"AWS_SECRET_ACCESS_KEY=aws",
		"GITHUB_TOKEN=gh",
		"db_password=pw",
		"MY_CREDENTIALS_FILE=/c",
		"GPG_PASSPHRASE=pp",
		"api_key=k",
		"DUP=first",
		"DUP=second",
		"NOEQUALS",
		"=empty-name",
		"HOME=/root",
		"TERM=dumb",
	}
	tests := []struct {
		name string
		in   EnvInput
		want []string
	}{
		{
			name: "filters server env and forces entries",
			in:   EnvInput{ServerEnv: server, Home: "/home/a", Cwd: "/w"},
			want: []string{
				"DUP=second", "EDITOR=vi", "HOME=/home/a", "LANG=C.UTF-8", "LOGNAME=agent",
				"PATH=/usr/bin:/bin", "SHELL=/bin/bash", "TEMP=/w", "TERM=dumb", "TMP=/w",
				"TMPDIR=/w", "TMUX_PANE=%1", "USER=agent",
			},
		},
		{
			name: "pty forces TERM",
			in:   EnvInput{ServerEnv: []string{"TERM=dumb"}, Cwd: "/w", Home: "/h", PTY: true},
			want: []string{"HOME=/h", "TEMP=/w", "TERM=xterm-256color", "TMP=/w", "TMPDIR=/w"},
		},
		{
			name: "inherit none keeps five names",
			in:   EnvInput{ServerEnv: server, InheritNone: true, Cwd: "/w", Home: "/h"},
			want: []string{
				"HOME=/h", "LANG=C.UTF-8", "LOGNAME=agent", "PATH=/usr/bin:/bin",
				"SHELL=/bin/bash", "TEMP=/w", "TMP=/w", "TMPDIR=/w", "USER=agent",
			},
		},
		{
			name: "request honoured, credential-like names too",
			in: EnvInput{
				ServerEnv: []string{"PATH=/bin", "EDITOR=vi"},
				Request: map[string]string{
					"AWS_SECRET_ACCESS_KEY": "explicit", "EDITOR": "nano",
					"SHELLCTL_LANDLOCK_RW_PATHS": "/", "PATH": "/opt/bin",
				},
				Cwd: "/w", Home: "/h",
			},
			want: []string{
				"AWS_SECRET_ACCESS_KEY=explicit", "EDITOR=nano", "HOME=/h", "PATH=/opt/bin",
				"SHELLCTL_LANDLOCK_RW_PATHS=/", "TEMP=/w", "TMP=/w", "TMPDIR=/w",
			},
		},
		{
			name: "forced entries win over the request",
			in: EnvInput{
				Request: map[string]string{"TMPDIR": "/tmp", "TMP": "/tmp", "TEMP": "/tmp", "HOME": "/elsewhere", "TERM": "vt100"},
				Cwd:     "/w", Home: "/h", PTY: true,
			},
			want: []string{"HOME=/h", "TEMP=/w", "TERM=xterm-256color", "TMP=/w", "TMPDIR=/w"},
		},
		{
			name: "invalid request entries dropped",
			in: EnvInput{
				Request: map[string]string{"": "x", "A=B": "x", "NUL": "a\x00b", "OK": ""},
				Cwd:     "/w", Home: "/h",
			},
			want: []string{"HOME=/h", "OK=", "TEMP=/w", "TMP=/w", "TMPDIR=/w"},
		},
		{
			name: "no home, no cwd: nothing forced",
			in:   EnvInput{ServerEnv: []string{"B=2", "A=1"}},
			want: []string{"A=1", "B=2"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := BuildEnv(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("BuildEnv:\n got %q\nwant %q", got, tc.want)
			}
			// Deterministic: same input, same output.
			if again := BuildEnv(tc.in); !reflect.DeepEqual(again, got) {
				t.Errorf("BuildEnv not deterministic: %q vs %q", again, got)
			}
		})
	}
}

func TestIsCredentialName(t *testing.T) {
	for name, want := range map[string]bool{
		// Substrings.
		"AWS_SECRET_ACCESS_KEY": true, "github_token": true, "DB_Password": true,
		"GOOGLE_APPLICATION_CREDENTIALS": true, "SSH_PASSPHRASE": true, "apikey": true,
		"MYSQL_PASSWD": true, "passwd": true, "SSH_PRIVATE_FILE": true, "privatedata": true,
		"SESSION_COOKIE": true, "cookiejar": true,
		"KEYBOARD_LAYOUT": true, // the spec's rule is a plain substring match
		// Whole '_'-separated parts.
		"MY_PASS": true, "pass": true, "PASS_FILE": true, "A_PASS_B": true,
		"HTTP_AUTH": true, "auth": true, "AUTH_HEADER": true, "x_Auth_y": true,
		"SENTRY_DSN": true, "dsn": true, "DSN_URL": true,
		// Not credentials.
		"PATH": false, "HOME": false, "LANG": false, "TOKYO": false,
		"GIT_AUTHOR_NAME": false, "GIT_AUTHOR_EMAIL": false, "BYPASS_CACHE": false,
		"PASSAGE": false, "COMPASS": false, "MY_PASSAGE": false, "AUTHOR": false,
		"OAUTH2_PROXY_URL": false, // OAUTH2 is not the part AUTH
		"DSNAME":           false, "TADSN": false, "PASS__": true, "_AUTH": true,
		"EDITOR": false, "": false,
	} {
		if got := IsCredentialName(name); got != want {
			t.Errorf("IsCredentialName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestHasURLPassword(t *testing.T) {
	for value, want := range map[string]bool{
		// Dropped: a password in a URL.
		"postgres://u:p@h/db":                                   true,
		"postgresql://user:s3cr%40t@db.internal:5432/x":         true,
		"redis://:onlypassword@cache:6379/0":                    true,
		"https://user:tok/with/slash@host/path":                 true,
		"HTTPS://U:P@H":                                         true,
		"git+ssh://git:pw@host/repo.git":                        true,
		"https://a.example/simple https://u:p@b.example/simple": true,
		"mirror=https://a,https://u:p@b":                        true,
		`{"url":"amqp://guest:guest@rabbit:5672/"}`:             true,
		"prefix postgres://u:p@h":                               true,
		"s3://AKIA:abc123@bucket":                               true,
		// Kept: no password.
		"":                                       false,
		"/usr/bin:/bin":                          false,
		"https://example.com/path":               false,
		"https://user@host/path":                 false,
		"ssh://git@github.com/org/repo.git":      false,
		"https://user:@host/":                    false,
		"https://registry.example:8080/@scope/p": false,
		"http://host:80?q=a@b":                   false,
		"http://host:443#frag@x":                 false,
		"http://[::1]:8080/x@y":                  false,
		"https://host/path:x@y":                  false,
		"user:pass@host":                         false, // no scheme: not a URL
		"://u:p@h":                               false, // no scheme
		"mailto:someone@example.com":             false,
		"http://u:p":                             false, // no '@'
		"https://u:p @host":                      false, // the URL ends at the blank
	} {
		if got := HasURLPassword(value); got != want {
			t.Errorf("HasURLPassword(%q) = %v, want %v", value, got, want)
		}
	}
}

func TestBuildEnvCredentialRules(t *testing.T) {
	server := []string{
		// Dropped by name.
		"MY_PASS=a", "HTTP_AUTH=b", "SENTRY_DSN=c", "DB_PASSWD=d", "SSH_PRIVATE=e",
		"SESSION_COOKIE=f", "NPM_TOKEN=g", "app_secret=h",
		// Dropped by value.
		"DATABASE_URL=postgres://u:p@h/db", "REDIS_URL=redis://:pw@cache:6379",
		"PIP_EXTRA_INDEX_URL=https://pypi.example/simple https://me:tok@private.example/simple",
		// Kept.
		"GIT_AUTHOR_NAME=Ada", "BYPASS_CACHE=1", "HOMEPAGE=https://example.com/",
		"GIT_URL=ssh://git@github.com/o/r.git", "REGISTRY=https://r.example:8443/@scope/pkg",
		"COMPASS=north",
	}
	got := BuildEnv(EnvInput{ServerEnv: server})
	want := []string{
		"BYPASS_CACHE=1", "COMPASS=north", "GIT_AUTHOR_NAME=Ada", "GIT_URL=ssh://git@github.com/o/r.git",
		"HOMEPAGE=https://example.com/", "REGISTRY=https://r.example:8443/@scope/pkg",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("BuildEnv:\n got %q\nwant %q", got, want)
	}
	// The request's entries are the caller's choice, credential-like or not.
	req := map[string]string{"MY_PASS": "x", "DATABASE_URL": "postgres://u:p@h/db"}
	got = BuildEnv(EnvInput{ServerEnv: server, Request: req})
	for _, kv := range []string{"MY_PASS=x", "DATABASE_URL=postgres://u:p@h/db"} {
		if !slices.Contains(got, kv) {
			t.Errorf("request entry %s dropped: %q", kv, got)
		}
	}
}

func TestJobHome(t *testing.T) {
	if got := JobHome(map[string]string{"HOME": "/home/req"}, "/root"); got != "/home/req" {
		t.Errorf("request HOME: got %q", got)
	}
	if got := JobHome(map[string]string{"HOME": ""}, "/root"); got != "/root" {
		t.Errorf("empty request HOME: got %q", got)
	}
	if got := JobHome(nil, "/root"); got != "/root" {
		t.Errorf("no request HOME: got %q", got)
	}
}

func TestValidateEnv(t *testing.T) {
	if err := ValidateEnv(map[string]string{"A": "1", "B_2": ""}); err != nil {
		t.Errorf("valid env: %v", err)
	}
	for _, env := range []map[string]string{{"": "x"}, {"A=B": "x"}, {"A\x00": "x"}, {"A": "x\x00y"}} {
		if err := ValidateEnv(env); !errors.Is(err, ErrInvalidEnv) {
			t.Errorf("ValidateEnv(%q) = %v, want ErrInvalidEnv", env, err)
		}
	}
}
