package isolation

import "golang.org/x/sys/unix"

// LandlockSupport is what this kernel's Landlock can restrict, as jobs
// are confined with it (GET /v1/info).
type LandlockSupport struct {
	// ABI is the kernel's Landlock ABI version, 0 when Landlock is not
	// available (Error says why).
	ABI    int `json:"abi"`
	Errata int `json:"errata"`
	// FSRights are the filesystem rights a job's domain handles.
	FSRights []string `json:"fs_rights"`
	// Scopes are the IPC scopes a job's domain restricts.
	Scopes []string `json:"scopes"`
	Note   string   `json:"note,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// DetectLandlock asks the kernel which Landlock ABI it has and derives
// what a job's domain restricts at that ABI, from the same tables the
// confinement uses.
func DetectLandlock() LandlockSupport {
	abi, errata, err := detectABI()
	out := LandlockSupport{ABI: abi, Errata: errata, FSRights: []string{}, Scopes: []string{}}
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.FSRights = append(out.FSRights, accessNames(handledFSForABI(abi))...)
	scoped, note := scopedForABI(abi, errata)
	if scoped&unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET != 0 {
		out.Scopes = append(out.Scopes, "abstract_unix_socket")
	}
	if scoped&unix.LANDLOCK_SCOPE_SIGNAL != 0 {
		out.Scopes = append(out.Scopes, "signal")
	}
	out.Note = note
	return out
}
