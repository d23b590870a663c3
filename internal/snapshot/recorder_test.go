package snapshot

import (
	"net/http"
	"os"
)

type recorder struct {
	h    http.Header
	code int
}

func newRecorder() *recorder                    { return &recorder{h: http.Header{}} }
func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(code int)        { r.code = code }

func mustRequest(method, target string) *http.Request {
	req, err := http.NewRequest(method, "http://x"+target, nil)
	if err != nil {
		panic(err)
	}
	return req
}

func truncateNew(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
