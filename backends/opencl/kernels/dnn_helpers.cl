// Helpers: volumes, coordinates, and the work-group sum used by the
// per-channel reductions.
#if IS_FLOAT
inline long vol(long4 s) { return s.x * s.y * s.z; }
inline long4 coords(long i, long4 s) { return (long4)(i % s.x, (i / s.x) % s.y, i / (s.x * s.y), 0); }
inline long flat(long4 i, long4 s) { return (i.z * s.y + i.y) * s.x + i.x; }

// The sum of v over the work-group (its size a power of two, as
// ocl_program.cpp picks it), returned to every work-item. The first barrier
// lets the previous call's readers of part[0] finish before it is reused.
inline AT group_sum(AT v, local AT* part) {
  size_t l = get_local_id(0), n = get_local_size(0);
  barrier(CLK_LOCAL_MEM_FENCE);
  part[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t h = n / 2; h > 0; h >>= 1) {
    if (l < h) part[l] += part[l + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return part[0];
}
#define MAX_LOCAL 64
#endif
