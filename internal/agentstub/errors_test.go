package agentstub

import "testing"

// Both error envelopes, FastAPI's detail forms and raw bodies.
func TestStatusErrorEnvelopes(t *testing.T) {
	for _, c := range []struct {
		body, code, msg, text string
	}{
		{`{"detail":"invalid or missing Agent Stub authorization"}`, "http_401", "invalid or missing Agent Stub authorization",
			"HTTP 401: invalid or missing Agent Stub authorization"},
		{`{"detail":{"code":"KNOWLEDGE_TIMEOUT","message":"too slow"}}`, "KNOWLEDGE_TIMEOUT", "too slow", "HTTP 401: too slow"},
		{`{"detail":{"code":"X","message":""}}`, "X", `{"code":"X","message":""}`, `HTTP 401: {"code":"X","message":""}`},
		{`{"detail":{"code":"agent_stub_authorization_expired","message":"expired"}}`, CodeAuthExpired, "expired",
			"HTTP 401: " + AuthExpiredText},
		{`{"error":{"code":"unauthorized","message":"bad token"}}`, "unauthorized", "bad token", "HTTP 401: bad token"},
		{`{"detail":[{"loc":["body"],"msg":"field required"}]}`, "http_401", `{"detail":[{"loc":["body"],"msg":"field required"}]}`,
			`HTTP 401: {"detail":[{"loc":["body"],"msg":"field required"}]}`},
		{"<html>\n<b>gateway</b></html>", "http_401", "<html> <b>gateway</b></html>", "HTTP 401: <html> <b>gateway</b></html>"},
		{"", "http_401", "Unauthorized", "HTTP 401: Unauthorized"},
	} {
		e := StatusError(401, []byte(c.body))
		if e.Status != 401 || e.Code != c.code || e.Message != c.msg || StubText(e) != c.text {
			t.Errorf("%s: %+v / %q", c.body, e, StubText(e))
		}
	}
}
