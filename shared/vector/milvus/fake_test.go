package milvus_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/milvus-io/milvus-proto/go-api/v2/commonpb"
	"github.com/milvus-io/milvus-proto/go-api/v2/milvuspb"
	"github.com/milvus-io/milvus-proto/go-api/v2/schemapb"
	"github.com/milvus-io/milvus/pkg/v2/util/merr"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// fakeMilvus is an in-memory stand-in for the Milvus gRPC service, answering
// the calls the engine makes, with the status codes Milvus uses (collection
// not found, not loaded, index not found). It checks the shape of what the
// engine sends: the schema, index and load before search, template filters
// on the fields the engine names, COSINE searches. It is no substitute for
// the real server (TestMilvusContract with MILVUS_ADDR): it only knows the
// three filter expressions the engine writes.
type fakeMilvus struct {
	milvuspb.UnimplementedMilvusServiceServer

	mu    sync.Mutex
	colls map[string]*fakeCollection
	ids   int64
}

type fakeCollection struct {
	id      int64
	schema  *schemapb.CollectionSchema
	dim     int
	indexes map[string]*milvuspb.IndexDescription // by index name
	loaded  bool
	rows    map[string]fakeRow
}

type fakeRow struct {
	grp string
	vec []float32
}

// startFakeMilvus serves a fake on a loopback port and returns its address.
func startFakeMilvus(t testing.TB) (string, *fakeMilvus) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeMilvus{colls: map[string]*fakeCollection{}}
	srv := grpc.NewServer()
	milvuspb.RegisterMilvusServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), f
}

func (f *fakeMilvus) coll(name string) (*fakeCollection, *commonpb.Status) {
	c, ok := f.colls[name]
	if !ok {
		return nil, merr.Status(merr.WrapErrCollectionNotFound(name))
	}
	return c, nil
}

func invalid(format string, args ...any) *commonpb.Status {
	return merr.Status(merr.WrapErrParameterInvalidMsg(format, args...))
}

func (f *fakeMilvus) Connect(context.Context, *milvuspb.ConnectRequest) (*milvuspb.ConnectResponse, error) {
	return &milvuspb.ConnectResponse{Status: merr.Success(), ServerInfo: &commonpb.ServerInfo{}, Identifier: 1}, nil
}

func (f *fakeMilvus) CreateCollection(_ context.Context, req *milvuspb.CreateCollectionRequest) (*commonpb.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.colls[req.GetCollectionName()]; ok {
		return invalid("collection %s already exists", req.GetCollectionName()), nil
	}
	var sch schemapb.CollectionSchema
	if err := proto.Unmarshal(req.GetSchema(), &sch); err != nil {
		return invalid("schema: %v", err), nil
	}
	c := &fakeCollection{schema: &sch, indexes: map[string]*milvuspb.IndexDescription{}, rows: map[string]fakeRow{}}
	for _, fld := range sch.GetFields() {
		if fld.GetDataType() == schemapb.DataType_FloatVector {
			for _, kv := range fld.GetTypeParams() {
				if kv.GetKey() == "dim" {
					c.dim, _ = strconv.Atoi(kv.GetValue())
				}
			}
		}
		if fld.GetIsPrimaryKey() && fld.GetDataType() != schemapb.DataType_VarChar {
			return invalid("primary key must be varchar"), nil
		}
	}
	if c.dim <= 0 {
		return invalid("no float vector field with a dimension"), nil
	}
	f.ids++
	c.id = f.ids
	f.colls[req.GetCollectionName()] = c
	return merr.Success(), nil
}

func (f *fakeMilvus) DescribeCollection(_ context.Context, req *milvuspb.DescribeCollectionRequest) (*milvuspb.DescribeCollectionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return &milvuspb.DescribeCollectionResponse{Status: st}, nil
	}
	return &milvuspb.DescribeCollectionResponse{
		Status: merr.Success(), Schema: c.schema, CollectionID: c.id, CollectionName: req.GetCollectionName(),
		ConsistencyLevel: commonpb.ConsistencyLevel_Strong,
	}, nil
}

func (f *fakeMilvus) DropCollection(_ context.Context, req *milvuspb.DropCollectionRequest) (*commonpb.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, st := f.coll(req.GetCollectionName()); st != nil {
		return st, nil
	}
	delete(f.colls, req.GetCollectionName())
	return merr.Success(), nil
}

func (f *fakeMilvus) CreateIndex(_ context.Context, req *milvuspb.CreateIndexRequest) (*commonpb.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return st, nil
	}
	params := map[string]string{}
	for _, kv := range req.GetExtraParams() {
		params[kv.GetKey()] = kv.GetValue()
	}
	if req.GetFieldName() == "embedding" && params["metric_type"] != "COSINE" {
		return invalid("vector index metric %q, want COSINE", params["metric_type"]), nil
	}
	c.indexes[req.GetIndexName()] = &milvuspb.IndexDescription{
		IndexName: req.GetIndexName(), FieldName: req.GetFieldName(), Params: req.GetExtraParams(),
		State: commonpb.IndexState_Finished,
	}
	return merr.Success(), nil
}

func (f *fakeMilvus) DescribeIndex(_ context.Context, req *milvuspb.DescribeIndexRequest) (*milvuspb.DescribeIndexResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return &milvuspb.DescribeIndexResponse{Status: st}, nil
	}
	var out []*milvuspb.IndexDescription
	for _, d := range c.indexes {
		if (req.GetIndexName() == "" || d.GetIndexName() == req.GetIndexName()) &&
			(req.GetFieldName() == "" || d.GetFieldName() == req.GetFieldName()) {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return &milvuspb.DescribeIndexResponse{Status: merr.Status(merr.WrapErrIndexNotFound(req.GetIndexName()))}, nil
	}
	return &milvuspb.DescribeIndexResponse{Status: merr.Success(), IndexDescriptions: out}, nil
}

func (f *fakeMilvus) LoadCollection(_ context.Context, req *milvuspb.LoadCollectionRequest) (*commonpb.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return st, nil
	}
	for _, d := range c.indexes {
		if d.GetFieldName() == "embedding" {
			c.loaded = true
			return merr.Success(), nil
		}
	}
	return merr.Status(merr.WrapErrIndexNotFoundForCollection(req.GetCollectionName())), nil
}

func (f *fakeMilvus) GetLoadingProgress(_ context.Context, req *milvuspb.GetLoadingProgressRequest) (*milvuspb.GetLoadingProgressResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return &milvuspb.GetLoadingProgressResponse{Status: st}, nil
	}
	p := int64(0)
	if c.loaded {
		p = 100
	}
	return &milvuspb.GetLoadingProgressResponse{Status: merr.Success(), Progress: p, RefreshProgress: p}, nil
}

// release simulates another client releasing the collection.
func (f *fakeMilvus) release(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.colls[name]; ok {
		c.loaded = false
	}
}

func (f *fakeMilvus) Upsert(_ context.Context, req *milvuspb.UpsertRequest) (*milvuspb.MutationResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return &milvuspb.MutationResult{Status: st}, nil
	}
	var ids, grps []string
	var flat []float32
	for _, fd := range req.GetFieldsData() {
		switch fd.GetFieldName() {
		case "id":
			ids = fd.GetScalars().GetStringData().GetData()
		case "grp":
			grps = fd.GetScalars().GetStringData().GetData()
		case "embedding":
			if int(fd.GetVectors().GetDim()) != c.dim {
				return &milvuspb.MutationResult{Status: invalid("dim %d, want %d", fd.GetVectors().GetDim(), c.dim)}, nil
			}
			flat = fd.GetVectors().GetFloatVector().GetData()
		default:
			return &milvuspb.MutationResult{Status: invalid("unknown field %q", fd.GetFieldName())}, nil
		}
	}
	if len(ids) != len(grps) || len(flat) != len(ids)*c.dim || int(req.GetNumRows()) != len(ids) {
		return &milvuspb.MutationResult{Status: invalid("ragged columns")}, nil
	}
	for i, id := range ids {
		c.rows[id] = fakeRow{grp: grps[i], vec: append([]float32(nil), flat[i*c.dim:(i+1)*c.dim]...)}
	}
	return &milvuspb.MutationResult{
		Status: merr.Success(), UpsertCnt: int64(len(ids)),
		IDs: &schemapb.IDs{IdField: &schemapb.IDs_StrId{StrId: &schemapb.StringArray{Data: ids}}},
	}, nil
}

// match evaluates the filters the engine writes.
func match(expr string, values map[string]*schemapb.TemplateValue, id string, r fakeRow) (bool, error) {
	switch expr {
	case "":
		return true, nil
	case "id in {ids}":
		return contains(values["ids"].GetArrayVal().GetStringData().GetData(), id), nil
	case "grp in {groups}":
		return contains(values["groups"].GetArrayVal().GetStringData().GetData(), r.grp), nil
	case "grp == {grp}":
		return r.grp == values["grp"].GetStringVal(), nil
	}
	return false, fmt.Errorf("fake cannot evaluate %q", expr)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (f *fakeMilvus) Delete(_ context.Context, req *milvuspb.DeleteRequest) (*milvuspb.MutationResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return &milvuspb.MutationResult{Status: st}, nil
	}
	n := 0
	for id, r := range c.rows {
		ok, err := match(req.GetExpr(), req.GetExprTemplateValues(), id, r)
		if err != nil {
			return &milvuspb.MutationResult{Status: invalid("%v", err)}, nil
		}
		if ok {
			delete(c.rows, id)
			n++
		}
	}
	return &milvuspb.MutationResult{Status: merr.Success(), DeleteCnt: int64(n)}, nil
}

func (f *fakeMilvus) Search(_ context.Context, req *milvuspb.SearchRequest) (*milvuspb.SearchResults, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fail := func(st *commonpb.Status) (*milvuspb.SearchResults, error) {
		return &milvuspb.SearchResults{Status: st}, nil
	}
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return fail(st)
	}
	if !c.loaded {
		return fail(merr.Status(merr.WrapErrCollectionNotLoaded(req.GetCollectionName())))
	}
	params := map[string]string{}
	for _, kv := range req.GetSearchParams() {
		params[kv.GetKey()] = kv.GetValue()
	}
	if params["anns_field"] != "embedding" {
		return fail(invalid("anns_field %q", params["anns_field"]))
	}
	topk, err := strconv.Atoi(params["topk"])
	if err != nil || topk <= 0 || topk > 16384 {
		return fail(invalid("topk %q", params["topk"]))
	}
	var phg commonpb.PlaceholderGroup
	if err := proto.Unmarshal(req.GetPlaceholderGroup(), &phg); err != nil || len(phg.GetPlaceholders()) != 1 {
		return fail(invalid("placeholder group"))
	}
	ph := phg.GetPlaceholders()[0]
	if ph.GetType() != commonpb.PlaceholderType_FloatVector || len(ph.GetValues()) != 1 {
		return fail(invalid("want one float vector"))
	}
	raw := ph.GetValues()[0]
	if len(raw) != 4*c.dim {
		return fail(invalid("query dimension %d, want %d", len(raw)/4, c.dim))
	}
	q := make([]float32, c.dim)
	for i := range q {
		q[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	type hit struct {
		id string
		s  float32
	}
	var hits []hit
	for id, r := range c.rows {
		ok, err := match(req.GetDsl(), req.GetExprTemplateValues(), id, r)
		if err != nil {
			return fail(invalid("%v", err))
		}
		if ok {
			hits = append(hits, hit{id, cosine(q, r.vec)})
		}
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].s > hits[j].s })
	if len(hits) > topk {
		hits = hits[:topk]
	}
	ids := make([]string, len(hits))
	scores := make([]float32, len(hits))
	for i, h := range hits {
		ids[i], scores[i] = h.id, h.s
	}
	return &milvuspb.SearchResults{Status: merr.Success(), Results: &schemapb.SearchResultData{
		NumQueries: 1, TopK: int64(topk), Topks: []int64{int64(len(hits))}, Scores: scores,
		Ids: &schemapb.IDs{IdField: &schemapb.IDs_StrId{StrId: &schemapb.StringArray{Data: ids}}},
	}}, nil
}

func cosine(a, b []float32) float32 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return float32(d / math.Sqrt(na*nb))
}
