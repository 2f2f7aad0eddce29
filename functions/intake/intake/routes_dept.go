package intake

import (
	"net/http"
	"strconv"

	"github.com/yuxi-serverless/yuxi/shared/auth"
)

// Departments (auth_dept_router): any admin lists them; the superadmin
// reads, creates (with the department's first admin), updates and deletes.

func departmentID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("department_id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, auth.ErrDepartmentNotFound
	}
	return id, nil
}

func (s *Server) listDepartments(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ds, err := s.d.Auth.ListDepartments(r.Context(), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ds)
	return nil
}

func (s *Server) getDepartment(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := departmentID(r)
	if err != nil {
		return err
	}
	d, err := s.d.Auth.GetDepartment(r.Context(), p, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) createDepartment(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in auth.NewDepartment
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	d, err := s.d.Auth.CreateDepartment(r.Context(), p, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, d)
	return nil
}

func (s *Server) updateDepartment(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := departmentID(r)
	if err != nil {
		return err
	}
	var in auth.DepartmentUpdate
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	d, err := s.d.Auth.UpdateDepartment(r.Context(), p, id, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) deleteDepartment(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := departmentID(r)
	if err != nil {
		return err
	}
	moved, err := s.d.Auth.DeleteDepartment(r.Context(), p, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": "department deleted", "moved_users": moved})
	return nil
}
