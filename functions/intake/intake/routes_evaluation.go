package intake

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/evaluation"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// RAG evaluation (/api/evaluation…): benchmark datasets and evaluation runs
// of a knowledge base, served by shared/evaluation. Answers are wrapped as
// the original's: {"message": "success", "data": …}.

// MaxDatasetBytes bounds an uploaded benchmark file.
const MaxDatasetBytes = 32 << 20

func (s *Server) evaluation() (*evaluation.Service, error) {
	if s.d.Evaluation == nil {
		return nil, failure.New(failure.KindUnavailable, "evaluation_unavailable", "evaluation is not configured on this server")
	}
	return s.d.Evaluation, nil
}

// answerEvaluation answers with what call returns from the evaluation
// service, or the error (503 when evaluation is not configured).
func (s *Server) answerEvaluation(w http.ResponseWriter, call func(*evaluation.Service) (any, error)) error {
	ev, err := s.evaluation()
	if err != nil {
		return err
	}
	data, err := call(ev)
	if err != nil {
		return err
	}
	writeData(w, data)
	return nil
}

func writeData(w http.ResponseWriter, data any) {
	writeJSON(w, http.StatusOK, map[string]any{"message": "success", "data": data})
}

// uploadDataset takes a multipart form: file (a .jsonl), name, description.
func (s *Server) uploadDataset(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ev, err := s.evaluation()
	if err != nil {
		return err
	}
	d, err := ev.Upload(r.Context(), subject(p), r.PathValue("kb_id"), func() (evaluation.UploadInput, error) {
		return datasetForm(w, r)
	})
	if err != nil {
		return err
	}
	writeData(w, d)
	return nil
}

// datasetForm reads the upload's multipart form (after the access check).
func datasetForm(w http.ResponseWriter, r *http.Request) (evaluation.UploadInput, error) {
	var in evaluation.UploadInput
	r.Body = http.MaxBytesReader(w, r.Body, MaxDatasetBytes+(1<<20))
	mr, err := r.MultipartReader()
	if err != nil {
		return in, failure.Invalid("invalid_multipart", "expected a multipart/form-data body with a file field: %v", err)
	}
	seenFile := false
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return in, uploadReadError(err)
		}
		if err := readDatasetPart(part, &in, &seenFile); err != nil {
			return in, err
		}
	}
	if !seenFile {
		return in, failure.Invalid("missing_file", "the form has no file field")
	}
	return in, nil
}

func readDatasetPart(part *multipart.Part, in *evaluation.UploadInput, seenFile *bool) error {
	defer part.Close()
	var b bytes.Buffer
	limit := int64(MaxDatasetBytes)
	if part.FormName() != "file" {
		limit = 64 << 10
	}
	n, err := io.Copy(&b, io.LimitReader(part, limit+1))
	if err != nil {
		return uploadReadError(err)
	}
	if n > limit {
		return failure.New(failure.KindTooLarge, "payload_too_large", "form field %s exceeds %d bytes", part.FormName(), limit)
	}
	switch part.FormName() {
	case "file":
		*seenFile = true
		in.Filename, in.Content = part.FileName(), b.Bytes()
	case "name":
		in.Name = b.String()
	case "description":
		in.Description = b.String()
	}
	return nil
}

func (s *Server) listDatasets(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) {
		return ev.Datasets(r.Context(), subject(p), r.PathValue("kb_id"))
	})
}

// intParam reads a positive integer query parameter with a default.
func intParam(q url.Values, name string, def int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, failure.Invalid("invalid_"+name, "%s must be an integer", name)
	}
	return n, nil
}

func (s *Server) getDataset(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ev, err := s.evaluation()
	if err != nil {
		return err
	}
	page, err := intParam(r.URL.Query(), "page", 1)
	if err != nil {
		return err
	}
	size, err := intParam(r.URL.Query(), "page_size", 10)
	if err != nil {
		return err
	}
	d, err := ev.DatasetDetail(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("dataset_id"), page, size)
	if err != nil {
		return err
	}
	writeData(w, d)
	return nil
}

// downloadDataset answers the JSONL as an attachment (application/x-ndjson).
func (s *Server) downloadDataset(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ev, err := s.evaluation()
	if err != nil {
		return err
	}
	name, content, err := ev.Export(r.Context(), subject(p), r.PathValue("dataset_id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(name))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(content)
	return nil
}

func (s *Server) deleteDataset(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ev, err := s.evaluation()
	if err != nil {
		return err
	}
	if err := ev.DeleteDataset(r.Context(), subject(p), r.PathValue("dataset_id")); err != nil {
		return err
	}
	writeData(w, nil)
	return nil
}

func (s *Server) startEvaluationRun(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ev, err := s.evaluation()
	if err != nil {
		return err
	}
	var in evaluation.RunInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	runID, err := ev.StartRun(r.Context(), subject(p), r.PathValue("kb_id"), in)
	if err != nil {
		return err
	}
	writeData(w, map[string]any{"run_id": runID})
	return nil
}

func (s *Server) listEvaluationRuns(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) {
		return ev.Runs(r.Context(), subject(p), r.PathValue("kb_id"))
	})
}

// getEvaluationRun pages a run's item results (page, page_size 1–100 (20),
// result_filter all | answer_errors | errors_or_low_recall, or error_only).
func (s *Server) getEvaluationRun(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ev, err := s.evaluation()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	page, err := intParam(q, "page", 1)
	if err != nil {
		return err
	}
	size, err := intParam(q, "page_size", 20)
	if err != nil {
		return err
	}
	filter := q.Get("result_filter")
	if eo := q.Get("error_only"); eo == "true" || eo == "1" {
		if filter != "" {
			return failure.Invalid("invalid_result_filter", "不能同时使用 result_filter 和 error_only")
		}
		filter = evaluation.FilterLegacyErrors
	}
	res, err := ev.RunResults(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("run_id"), page, size, filter)
	if err != nil {
		return err
	}
	writeData(w, res)
	return nil
}

func (s *Server) deleteEvaluationRun(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ev, err := s.evaluation()
	if err != nil {
		return err
	}
	if err := ev.DeleteRun(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("run_id")); err != nil {
		return err
	}
	writeData(w, nil)
	return nil
}

// generateDataset starts generating a benchmark from the KB (see evaluation.GenerateInput).
func (s *Server) generateDataset(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in evaluation.GenerateInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) {
		return ev.Generate(r.Context(), subject(p), r.PathValue("kb_id"), in)
	})
}

// resumeDataset continues a failed generation (concurrent calls share one job).
func (s *Server) resumeDataset(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) {
		return ev.Resume(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("dataset_id"))
	})
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) { return ev.Schedules(r.Context(), subject(p)) })
}

func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in evaluation.ScheduleInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) { return ev.CreateSchedule(r.Context(), subject(p), in) })
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) {
		return ev.GetSchedule(r.Context(), subject(p), r.PathValue("schedule_id"))
	})
}

func (s *Server) updateSchedule(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in evaluation.ScheduleInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	return s.answerEvaluation(w, func(ev *evaluation.Service) (any, error) {
		return ev.UpdateSchedule(r.Context(), subject(p), r.PathValue("schedule_id"), in)
	})
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ev, err := s.evaluation()
	if err != nil {
		return err
	}
	if err := ev.DeleteSchedule(r.Context(), subject(p), r.PathValue("schedule_id")); err != nil {
		return err
	}
	writeData(w, nil)
	return nil
}

// evaluationHistory answers a metric over time: ?target= a KB or schedule
// id (none: every KB the caller reads), ?metric= (default overall_score).
func (s *Server) evaluationHistory(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ev, err := s.evaluation()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	points, err := ev.History(r.Context(), subject(p), q.Get("target"), q.Get("metric"))
	if err != nil {
		return err
	}
	writeData(w, map[string]any{"target": q.Get("target"), "metric": q.Get("metric"), "points": points})
	return nil
}
