package intake

import "net/http"

// Placeholders replaced as each route family lands.
func (s *Server) agentRoutes(mux *http.ServeMux)  {}
func (s *Server) threadRoutes(mux *http.ServeMux) {}
func (s *Server) runRoutes(mux *http.ServeMux)    {}
func (s *Server) authRoutes(mux *http.ServeMux)   {}
func (s *Server) apiKeyRoutes(mux *http.ServeMux) {}
