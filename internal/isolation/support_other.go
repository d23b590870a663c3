//go:build !linux

package isolation

// LandlockSupport is what this kernel's Landlock can restrict.
type LandlockSupport struct {
	ABI      int      `json:"abi"`
	Errata   int      `json:"errata"`
	FSRights []string `json:"fs_rights"`
	Scopes   []string `json:"scopes"`
	Note     string   `json:"note,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// DetectLandlock reports Landlock as unavailable: it is Linux only.
func DetectLandlock() LandlockSupport {
	return LandlockSupport{FSRights: []string{}, Scopes: []string{}, Error: "Landlock is Linux only"}
}
