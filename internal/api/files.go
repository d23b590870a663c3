package api

import (
	"net/http"

	"github.com/shellctl/shellctl/internal/files"
)

// fileRoutes adds the file routes (internal/files), each under its own
// pattern so the metrics and the request log label it; without a file
// service they answer 404.
func (s *Server) fileRoutes(authed func(string, http.HandlerFunc)) {
	for _, p := range files.Routes {
		authed(p, func(w http.ResponseWriter, r *http.Request) {
			if s.Files == nil {
				notFound(w, r)
				return
			}
			s.Files.ServeHTTP(w, r)
		})
	}
}
