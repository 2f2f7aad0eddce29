// Package dashboard is the superadmin dashboard (/api/dashboard/…, the
// original's dashboard_router and knowledge_dashboard_router): basic
// counts, user activity, tool calls, agents, call time series, feedback,
// conversations and knowledge-base statistics.
//
// No route scans messages or tool_calls: counts come from
// dashboard_rollups, which statement-level triggers (migration 0022) keep
// in the same transaction as the rows they count — exact under concurrent
// writers, whichever package writes — each backend adding to rows of its
// own (shard = its pid), so that writers neither queue on one row nor
// deadlock; Compact folds those rows into shard 0 (the dispatcher's sweep). Lists (conversations, feedback) read
// pages through indexes. Tables read: dashboard_rollups (owned here, with
// its triggers), conversations, messages (one conversation's), tool_calls
// (one conversation's), message_feedbacks, users, agents, knowledge_bases,
// knowledge_files.
//
// Imported by: functions/intake, shared/bootstrap/identity, shared/bootstrap/knowledge (the sweep's Compact), tests (bench figure 16).
// May import: shared/failure, pgx.
package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Store answers the dashboard routes.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// New returns the dashboard over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool, now: time.Now} }

// Compact folds the backends' rollup rows into shard 0 (rows a running
// transaction is writing are left for next time) and returns how many rows
// it folded. Safe to run concurrently with writers and with itself.
func (s *Store) Compact(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT dashboard_compact()`).Scan(&n)
	return n, err
}

// epoch is the bucket of all-time totals.
var epoch = time.Unix(0, 0).UTC()

// shanghai is the original's display zone for time series (UTC+8).
var shanghai = time.FixedZone("Asia/Shanghai", 8*3600)

// totals sums metric's all-time rows by category.
func (s *Store) totals(ctx context.Context, metric string) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT category, sum(n)::bigint FROM dashboard_rollups WHERE metric = $1 AND bucket = $2
		GROUP BY category`, metric, epoch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var c string
		var n int64
		if err := rows.Scan(&c, &n); err != nil {
			return nil, err
		}
		if n != 0 {
			out[c] = n
		}
	}
	return out, rows.Err()
}

func sum(m map[string]int64) int64 {
	var t int64
	for _, n := range m {
		t += n
	}
	return t
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// Basic is GET /api/dashboard/stats.
func (s *Store) Basic(ctx context.Context) (map[string]any, error) {
	conv, err := s.totals(ctx, "conversations_status")
	if err != nil {
		return nil, err
	}
	msgs, err := s.totals(ctx, "messages_total")
	if err != nil {
		return nil, err
	}
	fb, err := s.totals(ctx, "feedback")
	if err != nil {
		return nil, err
	}
	users, err := s.userCount(ctx)
	if err != nil {
		return nil, err
	}
	total := sum(fb)
	rate := 100.0
	if total > 0 {
		rate = round2(float64(fb["like"]) / float64(total) * 100)
	}
	return map[string]any{
		"total_conversations":  sum(conv),
		"active_conversations": conv["active"],
		"total_messages":       sum(msgs),
		"total_users":          users,
		"feedback_stats":       map[string]any{"total_feedbacks": total, "satisfaction_rate": rate},
	}, nil
}

func (s *Store) userCount(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE NOT is_deleted`).Scan(&n)
	return n, err
}

// Users is GET /api/dashboard/stats/users: users with a conversation
// updated in the last 24 hours, 30 days and each of the last 7 days.
func (s *Store) Users(ctx context.Context) (map[string]any, error) {
	now := s.now().UTC()
	total, err := s.userCount(ctx)
	if err != nil {
		return nil, err
	}
	active := func(from, to time.Time) (int64, error) {
		var n int64
		err := s.pool.QueryRow(ctx, `SELECT count(DISTINCT c.uid) FROM conversations c JOIN users u ON u.uid = c.uid
			WHERE c.updated_at >= $1 AND c.updated_at < $2 AND NOT u.is_deleted`, from, to).Scan(&n)
		return n, err
	}
	a24, err := active(now.Add(-24*time.Hour), now.Add(time.Second))
	if err != nil {
		return nil, err
	}
	a30, err := active(now.Add(-30*24*time.Hour), now.Add(time.Second))
	if err != nil {
		return nil, err
	}
	daily := make([]map[string]any, 0, 7)
	for d := 6; d >= 0; d-- {
		from := now.Add(-time.Duration(d+1) * 24 * time.Hour)
		n, err := active(from, from.Add(24*time.Hour))
		if err != nil {
			return nil, err
		}
		daily = append(daily, map[string]any{"date": from.Format("2006-01-02"), "active_users": n})
	}
	return map[string]any{"total_users": total, "active_users_24h": a24, "active_users_30d": a30, "daily_active_users": daily}, nil
}

// hourly sums metric's hourly rows in [from, to) by hour bucket and category.
func (s *Store) hourly(ctx context.Context, metric string, from, to time.Time) (map[time.Time]map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT bucket, category, sum(n)::bigint FROM dashboard_rollups
		WHERE metric = $1 AND bucket >= $2 AND bucket < $3 GROUP BY bucket, category`,
		metric, from.UTC().Truncate(time.Hour), to.UTC())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[time.Time]map[string]int64{}
	for rows.Next() {
		var b time.Time
		var c string
		var n int64
		if err := rows.Scan(&b, &c, &n); err != nil {
			return nil, err
		}
		if out[b] == nil {
			out[b] = map[string]int64{}
		}
		out[b][c] += n
	}
	return out, rows.Err()
}

// Tools is GET /api/dashboard/stats/tools.
func (s *Store) Tools(ctx context.Context) (map[string]any, error) {
	st, err := s.totals(ctx, "tool_status")
	if err != nil {
		return nil, err
	}
	var total, ok int64
	byTool := map[string]int64{}
	errs := map[string]int64{}
	for k, n := range st {
		status, tool, _ := strings.Cut(k, "|")
		total += n
		byTool[tool] += n
		switch status {
		case "success":
			ok += n
		case "error":
			errs[tool] += n
		}
	}
	most := topN(byTool, 10, "tool_name", "count")
	now := s.now().UTC()
	h, err := s.hourly(ctx, "tool_calls", now.Add(-7*24*time.Hour), now.Add(time.Hour))
	if err != nil {
		return nil, err
	}
	daily := make([]map[string]any, 0, 7)
	for d := 6; d >= 0; d-- {
		from := now.Add(-time.Duration(d+1) * 24 * time.Hour)
		var n int64
		for b, cats := range h {
			// Hour buckets whose start lies in the day window (the window's
			// first partial hour counts with it).
			if !b.Before(from.Truncate(time.Hour)) && b.Before(from.Add(24*time.Hour).Truncate(time.Hour)) {
				n += sum(cats)
			}
		}
		daily = append(daily, map[string]any{"date": from.Format("2006-01-02"), "call_count": n})
	}
	rate := 0.0
	if total > 0 {
		rate = round2(float64(ok) / float64(total) * 100)
	}
	return map[string]any{"total_calls": total, "successful_calls": ok, "failed_calls": total - ok, "success_rate": rate,
		"most_used_tools": most, "tool_error_distribution": errs, "daily_tool_calls": daily}, nil
}

func topN(m map[string]int64, n int, key, val string) []map[string]any {
	type kv struct {
		k string
		v int64
	}
	var list []kv
	for k, v := range m {
		if v != 0 {
			list = append(list, kv{k, v})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].v != list[j].v {
			return list[i].v > list[j].v
		}
		return list[i].k < list[j].k
	})
	out := []map[string]any{}
	for i, e := range list {
		if i == n {
			break
		}
		out = append(out, map[string]any{key: e.k, val: e.v})
	}
	return out
}

// agentNames maps slugs to names.
func (s *Store) agentNames(ctx context.Context, slugs []string) (map[string]string, error) {
	out := map[string]string{}
	if len(slugs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT slug, name FROM agents WHERE slug = ANY($1)`, slugs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var slug, name string
		if err := rows.Scan(&slug, &name); err != nil {
			return nil, err
		}
		out[slug] = name
	}
	return out, rows.Err()
}

// Agents is GET /api/dashboard/stats/agents. Satisfaction is read from the
// feedback rows (few next to messages) through their message's conversation.
func (s *Store) Agents(ctx context.Context) (map[string]any, error) {
	conv, err := s.totals(ctx, "conversations_agent")
	if err != nil {
		return nil, err
	}
	tools, err := s.totals(ctx, "tool_agent")
	if err != nil {
		return nil, err
	}
	type fb struct{ total, like int64 }
	feedback := map[string]*fb{}
	rows, err := s.pool.Query(ctx, `SELECT c.agent_id, count(*), count(*) FILTER (WHERE f.rating = 'like')
		FROM message_feedbacks f JOIN messages m ON m.id = f.message_id JOIN conversations c ON c.id = m.conversation_id
		GROUP BY c.agent_id`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var a string
		var e fb
		if err := rows.Scan(&a, &e.total, &e.like); err != nil {
			rows.Close()
			return nil, err
		}
		feedback[a] = &e
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slugs := make([]string, 0, len(conv))
	for a := range conv {
		slugs = append(slugs, a)
	}
	sort.Strings(slugs)
	counts, sat, usage, top := []map[string]any{}, []map[string]any{}, []map[string]any{}, []map[string]any{}
	for _, a := range slugs {
		rate, total := 100.0, int64(0)
		if e := feedback[a]; e != nil && e.total > 0 {
			rate, total = round2(float64(e.like)/float64(e.total)*100), e.total
		}
		counts = append(counts, map[string]any{"agent_id": a, "conversation_count": conv[a]})
		sat = append(sat, map[string]any{"agent_id": a, "satisfaction_rate": rate, "total_feedbacks": total})
		usage = append(usage, map[string]any{"agent_id": a, "tool_usage_count": tools[a]})
		top = append(top, map[string]any{"agent_id": a, "conversation_count": conv[a], "satisfaction_rate": rate})
	}
	sort.SliceStable(top, func(i, j int) bool {
		return top[i]["conversation_count"].(int64) > top[j]["conversation_count"].(int64)
	})
	if len(top) > 5 {
		top = top[:5]
	}
	names, err := s.agentNames(ctx, slugs)
	if err != nil {
		return nil, err
	}
	return map[string]any{"total_agents": len(slugs), "agent_conversation_counts": counts, "agent_satisfaction_rates": sat,
		"agent_tool_usage": usage, "top_performing_agents": top, "agent_names": names}, nil
}

// Timeseries is GET /api/dashboard/stats/calls/timeseries?type=&time_range=:
// 14 intervals (hours, days or ISO weeks in the original's UTC+8 display
// zone) of models (assistant messages by model), agents (conversations by
// agent, by creation time: the original grouped by last update), tokens
// (input/output) or tools (calls by tool).
func (s *Store) Timeseries(ctx context.Context, kind, timeRange string) (map[string]any, error) {
	metric := map[string]string{"models": "models", "agents": "conversations", "tokens": "tokens", "tools": "tool_calls"}[kind]
	if metric == "" {
		return nil, failure.Unprocessable("invalid_type", "Invalid type: %s", kind)
	}
	const intervals = 14
	now := s.now().In(shanghai)
	var start time.Time
	var step func(time.Time) time.Time
	var label func(time.Time) string
	switch timeRange {
	case "14hours":
		start = now.Truncate(time.Hour).Add(-(intervals - 1) * time.Hour)
		step = func(t time.Time) time.Time { return t.Add(time.Hour) }
		label = func(t time.Time) string { return t.Format("2006-01-02 15:00") }
	case "14weeks":
		d := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, shanghai)
		d = d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7)) // Monday
		start = d.AddDate(0, 0, -7*(intervals-1))
		step = func(t time.Time) time.Time { return t.AddDate(0, 0, 7) }
		label = func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-%02d", y, w) }
	case "14days", "":
		timeRange = "14days"
		d := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, shanghai)
		start = d.AddDate(0, 0, -(intervals - 1))
		step = func(t time.Time) time.Time { return t.AddDate(0, 0, 1) }
		label = func(t time.Time) string { return t.Format("2006-01-02") }
	default:
		return nil, failure.Unprocessable("invalid_time_range", "time_range must be 14hours, 14days or 14weeks")
	}
	h, err := s.hourly(ctx, metric, start, now.Add(time.Hour))
	if err != nil {
		return nil, err
	}
	type slot struct {
		from, to time.Time
		data     map[string]int64
	}
	slots := make([]slot, intervals)
	for i, t := 0, start; i < intervals; i, t = i+1, step(t) {
		slots[i] = slot{from: t, to: step(t), data: map[string]int64{}}
	}
	catSet := map[string]bool{}
	for b, cats := range h {
		for i := range slots {
			if !b.Before(slots[i].from) && b.Before(slots[i].to) {
				for c, n := range cats {
					slots[i].data[c] += n
					if n != 0 {
						catSet[c] = true
					}
				}
			}
		}
	}
	var categories []string
	for c := range catSet {
		if c != "" {
			categories = append(categories, c)
		}
	}
	sort.Strings(categories)
	if len(categories) == 0 {
		categories = map[string][]string{"models": {"unknown_model"}, "agents": {"unknown_agent"},
			"tokens": {"input_tokens", "output_tokens"}, "tools": {"unknown_tool"}}[kind]
	}
	data := make([]map[string]any, 0, intervals)
	var total, peak int64
	peakDate := ""
	for i, sl := range slots {
		var t int64
		d := map[string]int64{}
		for c, n := range sl.data {
			d[c] = n
			t += n
		}
		for _, c := range categories {
			if _, ok := d[c]; !ok {
				d[c] = 0
			}
		}
		total += t
		if i == 0 || t > peak {
			peak, peakDate = t, label(sl.from)
		}
		data = append(data, map[string]any{"date": label(sl.from), "data": d, "total": t})
	}
	if kind == "tools" { // as the original: all calls ever made
		st, err := s.totals(ctx, "tool_status")
		if err != nil {
			return nil, err
		}
		total = sum(st)
	}
	out := map[string]any{"data": data, "categories": categories, "total_count": total,
		"average_count": round2(float64(total) / intervals), "peak_count": peak, "peak_date": peakDate, "agent_names": nil}
	if kind == "agents" {
		names, err := s.agentNames(ctx, categories)
		if err != nil {
			return nil, err
		}
		out["agent_names"] = names
	}
	return out, nil
}

// ConversationFilter is GET /api/dashboard/conversations's query.
type ConversationFilter struct {
	UID, AgentID, Status string
	Limit, Offset        int
}

// Conversations lists conversations, most recently updated first, with
// their message counts (read per listed conversation through its index).
func (s *Store) Conversations(ctx context.Context, f ConversationFilter) ([]map[string]any, error) {
	if f.Status == "" {
		f.Status = "active"
	}
	if f.Status != "all" && f.Status != "active" && f.Status != "archived" && f.Status != "deleted" {
		return nil, failure.Unprocessable("invalid_status", "status must be active, archived, deleted or all")
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.Limit > 500 {
		return nil, failure.Unprocessable("invalid_limit", "limit must be at most 500")
	}
	rows, err := s.pool.Query(ctx, `SELECT c.thread_id, c.uid, c.agent_id, c.title, c.status,
		(SELECT count(*) FROM messages m WHERE m.conversation_id = c.id), c.created_at, c.updated_at
		FROM conversations c
		WHERE ($1 = '' OR c.uid = $1) AND ($2 = '' OR c.agent_id = $2) AND ($3 = 'all' OR c.status = $3)
		ORDER BY c.updated_at DESC, c.id DESC LIMIT $4 OFFSET $5`, f.UID, f.AgentID, f.Status, f.Limit, f.Offset)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []map[string]any{}
	for rows.Next() {
		var thread, uid, agent, title, status string
		var n int64
		var created, updated time.Time
		if err := rows.Scan(&thread, &uid, &agent, &title, &status, &n, &created, &updated); err != nil {
			return nil, err
		}
		out = append(out, map[string]any{"thread_id": thread, "uid": uid, "agent_id": agent, "title": title, "status": status,
			"message_count": n, "created_at": created, "updated_at": updated})
	}
	return out, rows.Err()
}

// ErrConversationNotFound is 404 conversation_not_found.
var ErrConversationNotFound = failure.NotFound("conversation_not_found", "Conversation not found")

// Conversation is GET /api/dashboard/conversations/{thread_id}: the
// conversation, its messages with their tool calls, and its token total.
func (s *Store) Conversation(ctx context.Context, threadID string) (map[string]any, error) {
	var id int64
	var uid, agent, title, status string
	var created, updated time.Time
	err := s.pool.QueryRow(ctx, `SELECT id, uid, agent_id, title, status, created_at, updated_at FROM conversations WHERE thread_id = $1`,
		threadID).Scan(&id, &uid, &agent, &title, &status, &created, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrConversationNotFound
	}
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT m.id, m.role, m.content, m.message_type, m.created_at,
		coalesce((m.extra_metadata->'usage'->>'input_tokens')::bigint, 0) + coalesce((m.extra_metadata->'usage'->>'output_tokens')::bigint, 0),
		coalesce((SELECT json_agg(json_build_object('id', t.id, 'tool_name', t.tool_name, 'tool_input', t.tool_input,
			'tool_output', t.tool_output, 'status', t.status) ORDER BY t.call_index) FROM tool_calls t WHERE t.message_id = m.id), '[]')
		FROM messages m WHERE m.conversation_id = $1 ORDER BY m.id`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	msgs := []map[string]any{}
	var tokens int64
	for rows.Next() {
		var mid, tok int64
		var role, content, mtype string
		var at time.Time
		var calls json.RawMessage
		if err := rows.Scan(&mid, &role, &content, &mtype, &at, &tok, &calls); err != nil {
			return nil, err
		}
		tokens += tok
		m := map[string]any{"id": mid, "role": role, "content": content, "message_type": mtype, "created_at": at}
		if string(calls) != "[]" {
			m["tool_calls"] = calls
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return map[string]any{"thread_id": threadID, "uid": uid, "agent_id": agent, "title": title, "status": status,
		"message_count": len(msgs), "created_at": created, "updated_at": updated, "total_tokens": tokens, "messages": msgs}, nil
}

// Feedbacks is GET /api/dashboard/feedbacks?rating=&agent_id=&limit=&offset=
// (newest first; the original had no page bound: limit defaults to 200, at most 1000).
func (s *Store) Feedbacks(ctx context.Context, rating, agentID string, limit, offset int) ([]map[string]any, error) {
	if rating != "like" && rating != "dislike" {
		rating = "" // as the original: any other value is no filter
	}
	if limit <= 0 {
		limit = 200
	}
	if limit > 1000 {
		return nil, failure.Unprocessable("invalid_limit", "limit must be at most 1000")
	}
	rows, err := s.pool.Query(ctx, `SELECT f.id, f.message_id, f.uid, u.username, u.avatar, f.rating, f.reason, f.created_at,
		m.content, c.title, c.agent_id
		FROM message_feedbacks f JOIN messages m ON m.id = f.message_id JOIN conversations c ON c.id = m.conversation_id
		LEFT JOIN users u ON u.uid = f.uid
		WHERE ($1 = '' OR f.rating = $1) AND ($2 = '' OR c.agent_id = $2)
		ORDER BY f.created_at DESC, f.id DESC LIMIT $3 OFFSET $4`, rating, agentID, limit, offset)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []map[string]any{}
	for rows.Next() {
		var id, mid int64
		var uid, rt, content, title, agent string
		var username, avatar, reason *string
		var at time.Time
		if err := rows.Scan(&id, &mid, &uid, &username, &avatar, &rt, &reason, &at, &content, &title, &agent); err != nil {
			return nil, err
		}
		out = append(out, map[string]any{"id": id, "message_id": mid, "uid": uid, "username": username, "avatar": avatar,
			"rating": rt, "reason": reason, "created_at": at, "message_content": content, "conversation_title": title, "agent_id": agent})
	}
	return out, rows.Err()
}

// Knowledge is GET /api/dashboard/stats/knowledge: knowledge bases by type,
// files by type (the original's display names) and their stored size.
func (s *Store) Knowledge(ctx context.Context) (map[string]any, error) {
	out := map[string]any{"total_nodes": 0}
	byType := map[string]int64{}
	var dbs int64
	rows, err := s.pool.Query(ctx, `SELECT kb_type, count(*) FROM knowledge_bases GROUP BY kb_type`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var t string
		var n int64
		if err := rows.Scan(&t, &n); err != nil {
			rows.Close()
			return nil, err
		}
		name := map[string]string{"milvus": "Milvus"}[strings.ToLower(t)]
		if name == "" {
			name = t
		}
		byType[name] += n
		dbs += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	files := map[string]int64{}
	var total, size int64
	rows, err = s.pool.Query(ctx, `SELECT lower(file_type), count(*), coalesce(sum(file_size), 0)::bigint FROM knowledge_files
		WHERE NOT is_folder GROUP BY lower(file_type)`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var t string
		var n, sz int64
		if err := rows.Scan(&t, &n, &sz); err != nil {
			rows.Close()
			return nil, err
		}
		name := fileTypeNames[t]
		if name == "" {
			name = "其他"
			if t != "" {
				name = strings.ToUpper(t) + "文件"
			}
		}
		files[name] += n
		total += n
		size += sz
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out["total_databases"], out["total_files"], out["total_storage_size"] = dbs, total, size
	out["databases_by_type"], out["file_type_distribution"] = byType, files
	return out, nil
}

var fileTypeNames = map[string]string{
	"txt": "文本文件", "pdf": "PDF文档", "docx": "Word文档", "doc": "Word文档", "md": "Markdown", "html": "HTML网页", "htm": "HTML网页",
	"json": "JSON数据", "csv": "CSV表格", "xlsx": "Excel表格", "xls": "Excel表格", "pptx": "PowerPoint", "ppt": "PowerPoint",
	"png": "PNG图片", "jpg": "JPEG图片", "jpeg": "JPEG图片", "gif": "GIF图片", "svg": "SVG图片", "mp4": "MP4视频", "mp3": "MP3音频",
	"zip": "ZIP压缩包", "rar": "RAR压缩包", "7z": "7Z压缩包",
}
