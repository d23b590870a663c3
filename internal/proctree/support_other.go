//go:build !linux

package proctree

// CgroupSupport is how jobs would be tracked here.
type CgroupSupport struct {
	Mode        string   `json:"mode"`
	Dir         string   `json:"dir,omitempty"`
	Controllers []string `json:"controllers"`
	Why         string   `json:"why,omitempty"`
}

// ProbeCgroup reports the subreaper walk: cgroups are Linux only.
func ProbeCgroup(bool) CgroupSupport {
	return CgroupSupport{Mode: KindSubreaper, Controllers: []string{}, Why: "cgroups are Linux only"}
}
