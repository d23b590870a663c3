package jobs

// The egress proxy's part in a job (spec egress.md): its variables in the
// job's environment, and which credentials the record says it could use.

import "encoding/json"

// Egress is the credential proxy as the job service sees it (nil: off).
type Egress interface {
	// JobEnv returns the job's placeholder variables, its proxy and CA
	// variables, and the credentials (provider/name) it may use.
	JobEnv(session string, hasSession bool, jobID string) (placeholders, proxy map[string]string, creds []EgressRef)
	// Policy is "open" or "proxy-only"; Addr the proxy's address.
	Policy() string
	Addr() string
}

// EgressRef names a credential without its value.
type EgressRef struct {
	Provider string `json:"provider"`
	Name     string `json:"name"`
}

// RecordEgress is the record's egress: the proxy's policy and address,
// and the credentials the job could use (never their values).
type RecordEgress struct {
	Policy      string      `json:"policy"`
	Proxy       string      `json:"proxy"`
	Credentials []EgressRef `json:"credentials"`
}

// egressEnv is the job's egress variables, and what to record.
func (s *Service) egressEnv(req RunRequest, id string) (placeholders, proxy map[string]string, rec *RecordEgress) {
	if s.cfg.Egress == nil {
		return nil, nil, nil
	}
	placeholders, proxy, refs := s.cfg.Egress.JobEnv(req.SessionID, req.SessionID != "", id)
	if refs == nil {
		refs = []EgressRef{}
	}
	return placeholders, proxy, &RecordEgress{Policy: s.cfg.Egress.Policy(), Proxy: s.cfg.Egress.Addr(), Credentials: refs}
}

// egressJSON is rec as the row keeps it ("" for none).
func egressJSON(rec *RecordEgress) string {
	if rec == nil {
		return ""
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return ""
	}
	return string(b)
}
