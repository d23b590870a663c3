// Package openapicheck checks HTTP answers against shellctl's OpenAPI
// document (internal/api/openapi.json): the status is one the operation
// lists, the content type one it declares for that status, the declared
// headers are there and well-formed, and a JSON body matches its schema
// (the compatible shapes with additionalProperties false, so a key too
// many is caught). The integration tests install its Transport for every
// request they send, so the document cannot drift from the handlers.
//
// It is a test helper: only test binaries import it (and so link
// kin-openapi).
package openapicheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Checker holds a loaded, validated document.
type Checker struct {
	doc    *openapi3.T
	routes []route
	errSch *openapi3.Schema
}

type route struct {
	template string
	segs     []string
	literal  int // literal segments: the more, the better a match
	item     *openapi3.PathItem
}

// Load loads and validates an OpenAPI 3.1 document.
func Load(data []byte) (*Checker, error) {
	l := openapi3.NewLoader()
	doc, err := l.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("load the OpenAPI document: %w", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("the OpenAPI document is version %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(l.Context); err != nil {
		return nil, fmt.Errorf("validate the OpenAPI document: %w", err)
	}
	c := &Checker{doc: doc}
	for tmpl, item := range doc.Paths.Map() {
		r := route{template: tmpl, segs: strings.Split(strings.TrimPrefix(tmpl, "/"), "/"), item: item}
		for _, s := range r.segs {
			if !strings.HasPrefix(s, "{") {
				r.literal++
			}
		}
		c.routes = append(c.routes, r)
	}
	sort.Slice(c.routes, func(i, j int) bool {
		if c.routes[i].literal != c.routes[j].literal {
			return c.routes[i].literal > c.routes[j].literal
		}
		return c.routes[i].template < c.routes[j].template
	})
	if s := doc.Components.Schemas["Error"]; s != nil {
		c.errSch = s.Value
	}
	return c, nil
}

// Doc is the loaded document.
func (c *Checker) Doc() *openapi3.T { return c.doc }

// find returns the operation of method on the (escaped) path, the path
// item (nil: no such path) and the path parameters.
func (c *Checker) find(method, path string) (*route, *openapi3.Operation, map[string]string) {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i := range c.routes {
		r := &c.routes[i]
		if len(r.segs) != len(segs) {
			continue
		}
		params := map[string]string{}
		ok := true
		for k, s := range r.segs {
			if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
				if segs[k] == "" {
					ok = false
					break
				}
				params[s[1:len(s)-1]] = segs[k]
			} else if s != segs[k] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		// A path matched with no operation for the method may still be
		// another template's (POST /v1/jobs/run is not GET /v1/jobs/{id}).
		if op := r.item.GetOperation(method); op != nil {
			return r, op, params
		}
	}
	for i := range c.routes {
		r := &c.routes[i]
		if len(r.segs) == len(segs) && matches(r.segs, segs) {
			return r, nil, nil
		}
	}
	return nil, nil, nil
}

func matches(tmpl, segs []string) bool {
	for k, s := range tmpl {
		if !(strings.HasPrefix(s, "{") && segs[k] != "") && s != segs[k] {
			return false
		}
	}
	return true
}

// IsJSON reports whether a content type is JSON, the bodies that are
// checked against a schema.
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// Check checks one answer to req. body is the whole body when bodyOK
// (JSON answers); otherwise the body is not looked at.
func (c *Checker) Check(req *http.Request, status int, header http.Header, body []byte, bodyOK bool) error {
	if req.Method == http.MethodHead {
		return nil
	}
	path := req.URL.EscapedPath()
	r, op, params := c.find(req.Method, path)
	if op == nil {
		// Answers to what the document does not have: only "no route"
		// and "wrong method" errors, in the envelope, are right.
		want := "not_found"
		if r != nil {
			want = "method_not_allowed"
		}
		if (status == http.StatusNotFound && want == "not_found") || (status == http.StatusMethodNotAllowed && want == "method_not_allowed") {
			if !bodyOK {
				return fmt.Errorf("%d answer of %s %s: content type %q, want application/json", status, req.Method, path, header.Get("Content-Type"))
			}
			return c.checkError(body, want)
		}
		if r == nil {
			return fmt.Errorf("%s %s answered %d: the document has no such path", req.Method, path, status)
		}
		return fmt.Errorf("%s %s answered %d: the document has no %s operation on %s", req.Method, path, status, req.Method, r.template)
	}
	resp := op.Responses.Status(status)
	if resp == nil {
		resp = op.Responses.Default()
	}
	if resp == nil {
		return fmt.Errorf("%s %s (%s) answered %d, a status the document does not list for it (%s)", req.Method, path, op.OperationID, status, strings.Join(statuses(op), ", "))
	}
	if len(resp.Value.Content) > 0 {
		ct := header.Get("Content-Type")
		if resp.Value.Content.Get(ct) == nil {
			return fmt.Errorf("%s %s (%s) answered %d with content type %q; the document declares %s", req.Method, path, op.OperationID, status, ct, strings.Join(mediaTypes(resp.Value.Content), ", "))
		}
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params,
			Route: &routers.Route{Spec: c.doc, Path: r.template, PathItem: r.item, Method: req.Method, Operation: op},
		},
		Status:  status,
		Header:  header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: !bodyOK, MultiError: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s (%s) answered %d, which the document does not allow: %v\nbody: %s", req.Method, path, op.OperationID, status, short(err), snippet(body))
	}
	return nil
}

func (c *Checker) checkError(body []byte, code string) error {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("error answer is not JSON: %v: %s", err, snippet(body))
	}
	if c.errSch != nil {
		if err := c.errSch.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			return fmt.Errorf("error answer does not match the Error schema: %v: %s", short(err), snippet(body))
		}
	}
	if m, _ := v.(map[string]any); m != nil {
		if e, _ := m["error"].(map[string]any); e != nil && e["code"] != code {
			return fmt.Errorf("error answer has code %v, want %s: %s", e["code"], code, snippet(body))
		}
	}
	return nil
}

func statuses(op *openapi3.Operation) []string {
	var out []string
	for k := range op.Responses.Map() {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func mediaTypes(c openapi3.Content) []string {
	var out []string
	for k := range c {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func short(err error) string {
	s := err.Error()
	if len(s) > 4000 {
		s = s[:4000] + "…"
	}
	return s
}

func snippet(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// maxChecked bounds the JSON bodies read whole to be checked (a window is
// at most 512 KiB, escaped).
const maxChecked = 16 << 20

// Transport checks every answer that passes through it and hands it on
// unchanged: a JSON body is read whole, checked and replayed; any other
// body (an archive, an event stream) is left unread, its status, content
// type and headers checked.
type Transport struct {
	Base    http.RoundTripper
	Checker *Checker
	// Want says which answers to check (nil: all).
	Want func(*http.Request, *http.Response) bool
	// Report gets each answer that does not match the document.
	Report func(req *http.Request, err error)
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.Base.RoundTrip(req)
	if err != nil || (t.Want != nil && !t.Want(req, resp)) {
		return resp, err
	}
	if !IsJSON(resp.Header.Get("Content-Type")) || req.Method == http.MethodHead {
		if cerr := t.Checker.Check(req, resp.StatusCode, resp.Header, nil, false); cerr != nil {
			t.Report(req, cerr)
		}
		return resp, nil
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxChecked+1))
	resp.Body.Close()
	var tail error
	switch {
	case rerr != nil:
		tail = rerr // a body cut short: the caller sees the same error
	case len(body) > maxChecked:
		tail = errors.New("openapicheck: answer body larger than it checks")
	}
	resp.Body = &replay{r: bytes.NewReader(body), err: tail}
	if tail == nil {
		if cerr := t.Checker.Check(req, resp.StatusCode, resp.Header, body, true); cerr != nil {
			t.Report(req, cerr)
		}
	} else if cerr := t.Checker.Check(req, resp.StatusCode, resp.Header, nil, false); cerr != nil {
		t.Report(req, cerr)
	}
	return resp, nil
}

// replay gives back a body already read, then the error its reading met.
type replay struct {
	r   *bytes.Reader
	err error
}

func (b *replay) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && b.err != nil {
		return n, b.err
	}
	return n, err
}

func (b *replay) Close() error { return nil }
