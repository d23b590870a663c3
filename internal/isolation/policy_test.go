package isolation

import (
	"reflect"
	"testing"
)

func TestPolicyFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want Policy
	}{
		{name: "unset: defaults", env: nil, want: DefaultPolicy()},
		{name: "false turns off", env: map[string]string{EnvEnablePathIsolation: "false"},
			want: Policy{Enabled: false, RO: DefaultRO, RWDev: DefaultRWDev}},
		{name: "FALSE with spaces turns off", env: map[string]string{EnvEnablePathIsolation: " FALSE "},
			want: Policy{Enabled: false, RO: DefaultRO, RWDev: DefaultRWDev}},
		{name: "0 stays on", env: map[string]string{EnvEnablePathIsolation: "0"}, want: DefaultPolicy()},
		{name: "no stays on", env: map[string]string{EnvEnablePathIsolation: "no"}, want: DefaultPolicy()},
		{name: "off stays on", env: map[string]string{EnvEnablePathIsolation: "off"}, want: DefaultPolicy()},
		{name: "true stays on", env: map[string]string{EnvEnablePathIsolation: "true"}, want: DefaultPolicy()},
		{name: "empty stays on", env: map[string]string{EnvEnablePathIsolation: ""}, want: DefaultPolicy()},
		{
			name: "lists replace defaults, blanks ignored, cleaned, deduplicated",
			env: map[string]string{
				EnvLandlockRWPaths:    " /srv/shared, ,/data/,/srv/shared",
				EnvLandlockROPaths:    "/usr,/etc,,",
				EnvLandlockRWDevPaths: "/dev/null",
			},
			want: Policy{Enabled: true, RW: []string{"/srv/shared", "/data"}, RO: []string{"/usr", "/etc"}, RWDev: []string{"/dev/null"}},
		},
		{
			name: "a list of blanks keeps the default",
			env:  map[string]string{EnvLandlockROPaths: " , ,", EnvLandlockRWPaths: ""},
			want: DefaultPolicy(),
		},
		{
			name: "relative entries are kept for the stage to skip and record",
			env:  map[string]string{EnvLandlockRWPaths: "rel/dir"},
			want: Policy{Enabled: true, RW: []string{"rel/dir"}, RO: DefaultRO, RWDev: DefaultRWDev},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PolicyFromEnv(func(k string) string { return tc.env[k] })
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("PolicyFromEnv:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDefaultPolicyIsACopy(t *testing.T) {
	p := DefaultPolicy()
	p.RO[0] = "/changed"
	if DefaultRO[0] == "/changed" {
		t.Fatal("DefaultPolicy shares its slices with DefaultRO")
	}
}
