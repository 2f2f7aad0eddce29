package vector

import "golang.org/x/sys/cpu"

// useAVX2 is decided once from the CPU's features; it is a constant of the
// machine, not state.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dot returns the inner product of a and b (len(b) ≥ len(a)).
func dot(a, b []float32) float32 {
	if useAVX2 {
		if len(b) < len(a) {
			panic("vector: dot of unequal lengths")
		}
		return dotAVX2(a, b)
	}
	return dotGeneric(a, b)
}

// dotAVX2 is implemented in dot_amd64.s with 256-bit fused multiply-adds.
//
//go:noescape
func dotAVX2(a, b []float32) float32
