package api

import (
	"encoding/json"
	"regexp"
	"testing"
)

// The OpenAPI document speaks to users: no references to the project's
// issues or spec files, and it says under which license it is.
func TestOpenAPITextIsForUsers(t *testing.T) {
	inner := regexp.MustCompile(`(?i)\bissue \d+|§|\b[a-z-]+\.md\b`)
	if m := inner.FindAll(OpenAPI, 5); len(m) > 0 {
		t.Errorf("the OpenAPI document refers to the project's insides: %q", m)
	}
	var doc struct {
		Info struct {
			License struct {
				Name string `json:"name"`
			} `json:"license"`
		} `json:"info"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil || doc.Info.License.Name == "" {
		t.Errorf("the OpenAPI document names no license (%v)", err)
	}
}
