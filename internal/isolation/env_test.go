package isolation

import (
	"errors"
	"reflect"
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
		"AWS_SECRET_ACCESS_KEY": true, "github_token": true, "DB_Password": true,
		"GOOGLE_APPLICATION_CREDENTIALS": true, "SSH_PASSPHRASE": true, "apikey": true,
		"KEYBOARD_LAYOUT": true, // the spec's rule is a plain substring match
		"PATH":            false, "HOME": false, "LANG": false, "TOKYO": false,
	} {
		if got := IsCredentialName(name); got != want {
			t.Errorf("IsCredentialName(%q) = %v, want %v", name, got, want)
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
