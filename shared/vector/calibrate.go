package vector

// Calibration: the recall of a graph at a given candidate list size (ef)
// depends on the data far more than on its size — embeddings of real text lie
// near a low-dimensional surface and are easy, random high-dimensional vectors
// are the worst case. So instead of one ef for every collection, each graph
// measures itself after it is built: leave-one-out queries (stored vectors,
// their own hit removed) are answered exactly and through the graph with
// growing ef, and the smallest ef whose recall reaches the target (plus a
// margin for sampling error) is kept, for k = 10 and k = 50. A graph that
// cannot reach the target, or would compute more than a third as many
// similarities as the exact scan, is marked unusable: the collection stays on
// exact search, which is then the faster of the two anyway.

const (
	calibrationQueries = 100
	calibrationMargin  = 0.02
	maxEf              = 2048
)

var calibrationEfs = []int{32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048}

// minCalibrationNodes is the smallest collection a graph calibrates on.
const minCalibrationNodes = 1000

// calibrate sets h.ef10, h.ef50 and h.usable, querying with the held-out
// slots of s (the snapshot the graph was built from).
func (h *hnsw) calibrate(s *snapshot, target float64) {
	if len(h.heldOut) == 0 {
		return
	}
	held := make(map[int32]bool, len(h.heldOut))
	for _, x := range h.heldOut {
		held[x] = true
	}
	// The truth: each query's exact top 50 among the graph's nodes.
	truth := make([][]int32, len(h.heldOut))
	for i, x := range h.heldOut {
		t := s.exact(s.vec(x), 50+len(h.heldOut), nil, 1)
		sortCands(t.h)
		for _, c := range t.h {
			if len(truth[i]) == 50 {
				break
			}
			if !held[c.slot] {
				truth[i] = append(truth[i], c.slot)
			}
		}
	}
	goal := min(target+calibrationMargin, 1)
	w := h.newWorker()
	var ok10, ok50 bool
	h.ef10, h.recall, h.visits, ok10 = h.calibrateK(s, w, truth, 10, goal)
	h.ef50, _, _, ok50 = h.calibrateK(s, w, truth, 50, goal)
	h.usable = ok10 && ok50 && h.visits*3 <= float64(s.live)
}

// calibrateK finds the smallest ef reaching goal recall@k.
func (h *hnsw) calibrateK(s *snapshot, w *hnswWorker, truth [][]int32, k int, goal float64) (ef int, recall, visits float64, ok bool) {
	want := make([]map[int32]bool, len(truth))
	for i, t := range truth {
		want[i] = make(map[int32]bool, k)
		for _, slot := range t[:min(k, len(t))] {
			want[i][slot] = true
		}
	}
	for _, ef := range calibrationEfs {
		if ef < k {
			continue
		}
		found, total := 0, 0
		w.dists = 0
		for i, x := range h.heldOut {
			cands := h.searchWith(s, w, s.vec(x), ef)
			for _, c := range cands[:min(k, len(cands))] {
				if want[i][c.slot] {
					found++
				}
			}
			total += len(want[i])
		}
		recall = float64(found) / float64(total)
		visits = float64(w.dists) / float64(len(h.heldOut))
		if recall >= goal {
			return ef, recall, visits, true
		}
	}
	return maxEf, recall, visits, false
}

// efFor is the candidate list size for a search of k.
func (h *hnsw) efFor(k int) int {
	switch {
	case k <= 10:
		return max(h.ef10, k)
	case k <= 50:
		return max(h.ef10+(h.ef50-h.ef10)*(k-10)/40, k)
	default:
		return min(max(h.ef50*k/50, k), 4*maxEf)
	}
}
