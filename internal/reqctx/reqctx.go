// Package reqctx carries what the log line of one HTTP request needs
// through its context: its id, when it arrived, the job it was about. The
// api package puts it there; the job service reads the id to log it with
// the transitions a request causes.
package reqctx

import (
	"context"
	"time"
)

// Info is one request's.
type Info struct {
	ID    string
	Start time.Time
	Job   string // set by the handler that made or named a job
}

type key struct{}

// With returns ctx carrying ri.
func With(ctx context.Context, ri *Info) context.Context {
	return context.WithValue(ctx, key{}, ri)
}

// From returns the request info of ctx, nil outside a request.
func From(ctx context.Context) *Info {
	ri, _ := ctx.Value(key{}).(*Info)
	return ri
}

// ID returns the request id of ctx, "" outside a request.
func ID(ctx context.Context) string {
	if ri := From(ctx); ri != nil {
		return ri.ID
	}
	return ""
}
