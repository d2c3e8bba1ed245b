// gemm.cpp — framejit's GEMM driver: blocking, packed and streamed paths, thread split, epilogue.
#include "jit/x86/gemm.h"

#include <algorithm>
#include <cstdlib>

#include "jit/x86/gemm_p.h"
#include "jit/x86/gemv.h"
#include "jit/x86/isa.h"
#include "runtime/threads.h"

namespace framejit::jit::x86 {

namespace {

// Note [GEMM blocking]
// The Goto/BLIS loop nest, run by each thread on its task (rows [m0, m1), columns [n0, n1) of C):
//
//   for jc in columns, step NC            B panel KC x NC, packed once per (jc, pc): L3
//     for pc in 0..k, step KC             C accumulates one K block at a time
//       pack B[pc:pc+KC, jc:jc+NC]        as NR-wide micro-panels (KC x NR each)
//       for ic in rows, step MC           A block MC x KC, packed once per (ic, pc): L2
//         pack A[ic:ic+MC, pc:pc+KC]      as row tiles (see Note [GEMM row tiles])
//         for jr in 0..NC, step NR        the B micro-panel stays in L1 across the row tiles
//           for each row tile             its A panel streams from L2
//             micro-kernel: C tile (=|+=) A panel * B micro-panel
//         after the last pc: the epilogue on the MC x NC block of C, still in cache
//
// KC sizes the B micro-panel to half of a 32 KiB L1, MC the A block to a fraction of L2, NC the
// B panel to a few MiB of L3. Packing takes any strides (transposed, strided, negative; see
// gemm_pack.cpp), so kernels only see unit-stride rows. A partial column tile runs the full-width
// kernel on zero-padded B into a scratch tile, then copies its valid columns out.
//
// Note [GEMM row tiles]
// A tile of r rows keeps r * nv accumulators busy; below about 8 independent FMA chains (FMA
// latency x FMA ports) the kernel stalls on latency. So a block's rows are split into
// ceil(mc / MR) tiles as evenly as possible (8 rows: 4 + 4, not 6 + 2), each packed as its own
// MR-wide panel, and there is a kernel for every row count 1..MR.
//
// Note [GEMM streamed B]
// With few row tiles (an MLP layer at batch 8: 8 x 10000 @ 10000 x 1000) each element of B is used
// by a tile or a few, and B is usually far larger than the caches: the time is one pass over B
// from memory. Packing a whole KC x NC panel first would leave the core idle while it waits for
// memory, then compute while memory idles. So when B's rows are contiguous, the streamed path
//   - keeps K blocks small (KC x NC of B about 128 KiB, NC <= 512) and all rows in one block,
//   - has the first row tile of each micro-panel run a stream kernel: it reads B in place (rows
//     ldb apart), writes the micro-panel packed for the other row tiles (which then read it from
//     L1, whatever B's row stride: a power-of-two stride would otherwise thrash one L1 set), and
//     prefetches the same columns of the next K block, one row per k step,
// so that loads of B overlap the FMAs, and the threads (splitting the columns) keep memory busy
// throughout. A partial last micro-panel is packed first, as in the packed path.

struct Blocking {
  int64_t mc, kc, nc;
};

Blocking packed_blocking(const GemmKernelSet& ks) {
  const bool f32 = ks.dtype == rt::DType::Float32;
  switch (ks.isa) {
    case Isa::Scalar: return {128, 256, 2048};
    case Isa::Avx2: return f32 ? Blocking{144, 256, 4096} : Blocking{72, 256, 2048};
    case Isa::Avx512: return f32 ? Blocking{168, 256, 4096} : Blocking{112, 256, 2048};
  }
  return {128, 256, 2048};
}

// Streamed path (Note [GEMM streamed B]): problems of at most this many row tiles...
constexpr int64_t kStreamMaxRowTiles = 8;
// ...read B in blocks of about this many bytes, at most this many columns wide.
constexpr int64_t kStreamBlockBytes = 128 << 10;
constexpr int64_t kStreamMaxCols = 512;
// Below this many multiply-adds per thread, another thread costs more than it saves.
constexpr int64_t kMinMacsPerTask = 64 * 64 * 64;
// Packing one element costs about this many multiply-adds (used to choose the thread split).
constexpr int64_t kPackCostMacs = 8;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// ---- per-thread packing buffers -----------------------------------------------------------------

struct Buffer {
  void* p = nullptr;
  size_t cap = 0;
  ~Buffer() { std::free(p); }
  void* get(size_t bytes) {
    if (bytes > cap) {
      std::free(p);
      cap = static_cast<size_t>(round_up(static_cast<int64_t>(bytes), 4096));
      p = std::aligned_alloc(64, cap);
      if (!p) cap = 0;
    }
    return p;
  }
};

// Grown to the largest block seen and kept: a thread packs into the same memory every call.
// NB: so a GEMM epilogue must not itself run a GEMM on the same thread.
struct Workspace {
  Buffer a, b;
};
thread_local Workspace t_workspace;

// ---- the loop nest ------------------------------------------------------------------------------

template <typename T>
struct Plan {
  const GemmArgs* g;
  const GemmKernelSet* ks;
  GemmPackFn<T> pack_a, pack_b;  // MR- and NR-wide panels
  bool streamed;                 // Note [GEMM streamed B]
  Blocking blk;                  // KC exact (K blocks split k evenly); MC, NC at most
};

// The task as plain loops, for when packing memory cannot be had (keeps gemm() total).
template <typename T>
void naive_task(const GemmArgs& g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* c = static_cast<T*>(g.c);
  for (int64_t i = m0; i < m1; ++i)
    for (int64_t j = n0; j < n1; ++j) {
      T s = 0;
      for (int64_t p = 0; p < g.k; ++p)
        s +=
            a[i * g.a_row_stride + p * g.a_col_stride] * b[p * g.b_row_stride + j * g.b_col_stride];
      c[i * g.ldc + j] = s;
    }
  if (g.epilogue) g.epilogue(g.epilogue_ctx, c + m0 * g.ldc + n0, g.ldc, m0, n0, m1 - m0, n1 - n0);
}

// C[m0:m1, n0:n1] = A[m0:m1, :] @ B[:, n0:n1], then the epilogue per block. See Note [GEMM
// blocking].
template <typename T>
void gemm_task(const Plan<T>& plan, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const GemmArgs& g = *plan.g;
  const GemmKernelSet& ks = *plan.ks;
  const int64_t MR = ks.mr, NR = ks.nr, k = g.k;
  constexpr int64_t es = sizeof(T);
  const T* A = static_cast<const T*>(g.a);
  const T* B = static_cast<const T*>(g.b);
  T* C = static_cast<T*>(g.c);

  // The task's blocks: plan.blk, rows split evenly rather than leaving a thin last block.
  const int64_t nc_max = std::min(plan.blk.nc, round_up(n1 - n0, NR));
  const int64_t kc_max = plan.blk.kc;
  const int64_t mc_max = round_up(ceil_div(m1 - m0, ceil_div(m1 - m0, plan.blk.mc)), MR);
  T* ap = static_cast<T*>(t_workspace.a.get(mc_max * kc_max * es));
  // Packed: the whole KC x NC panel. Streamed: one micro-panel at a time, packed just before use.
  T* bp = static_cast<T*>(t_workspace.b.get((plan.streamed ? NR : nc_max) * kc_max * es));
  if (!ap || !bp) return naive_task<T>(g, m0, m1, n0, n1);
  alignas(64) T scratch[kGemmMaxMr * 128 / sizeof(T)];  // one tile: NR * itemsize <= 128 bytes

  GemmUkrArgs args;
  for (int64_t jc = n0; jc < n1; jc += nc_max) {
    const int64_t nc = std::min(nc_max, n1 - jc);
    for (int64_t pc = 0; pc < k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, k - pc);
      const bool first = pc == 0, last = pc + kc == k;
      const T* bsrc = B + pc * g.b_row_stride + jc * g.b_col_stride;
      // Streamed with B's rows contiguous: what the stream kernels prefetch, the next K block of
      // this panel (or the next panel's first block; at the very end, this block again).
      const T* bnext = nullptr;
      if (plan.streamed && g.b_col_stride == 1)
        bnext = !last ? bsrc + kc * g.b_row_stride : jc + nc < n1 ? B + jc + nc : bsrc;
      if (!plan.streamed) plan.pack_b(bsrc, g.b_col_stride, g.b_row_stride, nc, kc, bp);

      for (int64_t ic = m0; ic < m1; ic += mc_max) {
        const int64_t mc = std::min(mc_max, m1 - ic);
        const int64_t tiles = ceil_div(mc, MR), base = mc / tiles, extra = mc % tiles;
        auto tile_row = [&](int64_t t) { return t * base + std::min(t, extra); };
        for (int64_t t = 0; t < tiles; ++t) {
          const int64_t i0 = tile_row(t), i1 = tile_row(t + 1);
          plan.pack_a(A + (ic + i0) * g.a_row_stride + pc * g.a_col_stride, g.a_row_stride,
                      g.a_col_stride, i1 - i0, kc, ap + t * MR * kc);
        }

        for (int64_t jr = 0; jr < nc; jr += NR) {
          const int64_t nr = std::min(NR, nc - jr);
          // Streamed: a full micro-panel with contiguous rows is read in place by the first row
          // tile's stream kernel, which packs it for the others; any other is packed here.
          const bool in_place = bnext && nr == NR;
          if (plan.streamed && !in_place)
            plan.pack_b(bsrc + jr * g.b_col_stride, g.b_col_stride, g.b_row_stride, nr, kc, bp);
          args.k = kc;
          args.ldb = g.b_row_stride * es;
          args.b_pack = bp;
          args.pf = bnext ? bnext + jr : nullptr;
          for (int64_t t = 0; t < tiles; ++t) {
            const int64_t i0 = tile_row(t);
            const int r = static_cast<int>(tile_row(t + 1) - i0);
            args.a = ap + t * MR * kc;
            const bool stream = in_place && t == 0;
            GemmUkrFn ukr = stream ? ks.ukr_stream[r] : ks.ukr[r];
            args.b = stream          ? static_cast<const void*>(bsrc + jr)
                     : plan.streamed ? bp
                                     : bp + jr * kc;
            T* ctile = C + (ic + i0) * g.ldc + jc + jr;
            if (nr == NR) {
              args.c = ctile;
              args.ldc = g.ldc * es;
              args.accumulate = !first;
              ukr(&args);
              continue;
            }
            args.c = scratch;
            args.ldc = NR * es;
            args.accumulate = 0;
            ukr(&args);
            for (int i = 0; i < r; ++i) {
              T* crow = ctile + i * g.ldc;
              const T* srow = scratch + i * NR;
              if (first)
                std::copy_n(srow, nr, crow);
              else
                for (int64_t j = 0; j < nr; ++j) crow[j] += srow[j];
            }
          }
        }
        if (last && g.epilogue)
          g.epilogue(g.epilogue_ctx, C + ic * g.ldc + jc, g.ldc, ic, jc, mc, nc);
      }
    }
  }
}

// k == 0: C = 0 (an empty sum), and the epilogue still runs (a fused bias still applies).
template <typename T>
void gemm_k0(const GemmArgs& g, const Blocking& blk) {
  T* C = static_cast<T*>(g.c);
  for (int64_t ic = 0; ic < g.m; ic += blk.mc) {
    const int64_t mc = std::min(blk.mc, g.m - ic);
    for (int64_t jc = 0; jc < g.n; jc += blk.nc) {
      const int64_t nc = std::min(blk.nc, g.n - jc);
      for (int64_t i = ic; i < ic + mc; ++i) std::fill_n(C + i * g.ldc + jc, nc, T(0));
      if (g.epilogue) g.epilogue(g.epilogue_ctx, C + ic * g.ldc + jc, g.ldc, ic, jc, mc, nc);
    }
  }
}

// How the threads split C: tm row groups x tn column groups, one task each. A task packs (or
// streams) the A rows and B columns it needs, so a split duplicates that work; the chosen split
// minimizes the largest task's multiply-adds plus operand traffic (in multiply-add equivalents).
// Small problems get one task, which parallel_for runs inline.
struct Split {
  int64_t tm = 1, tn = 1;
};

Split choose_split(int64_t m, int64_t n, int64_t k, int64_t MR, int64_t NR, int threads) {
  const int64_t m_units = ceil_div(m, MR), n_units = ceil_div(n, NR);
  const int64_t max_tasks =
      std::clamp<int64_t>(m * n * k / kMinMacsPerTask, 1, std::max(threads, 1));
  Split best;
  int64_t best_cost = -1;
  for (int64_t tasks = 1; tasks <= max_tasks; ++tasks) {
    for (int64_t tm = 1; tm <= tasks; ++tm) {
      if (tasks % tm != 0) continue;
      const int64_t tn = tasks / tm;
      if (tm > m_units || tn > n_units) continue;
      const int64_t rows = ceil_div(m_units, tm) * MR, cols = ceil_div(n_units, tn) * NR;
      const int64_t cost = rows * cols * k + kPackCostMacs * k * (rows + cols);
      if (best_cost < 0 || cost < best_cost) best_cost = cost, best = {tm, tn};
    }
  }
  return best;
}

template <typename T>
bool gemm_typed(const GemmArgs& g) {
  const GemmKernelSet* ks = gemm_kernel_set(host_isa(), g.dtype);
  if (!ks) ks = gemm_kernel_set(Isa::Scalar, g.dtype);  // generation failed: stay correct
  if (!ks) return false;
  const Blocking blk = packed_blocking(*ks);
  if (g.m <= 0 || g.n <= 0) return true;
  if (g.k <= 0) {
    gemm_k0<T>(g, blk);
    return true;
  }

  const int64_t MR = ks->mr, NR = ks->nr;
  // Inside another parallel_for this call runs inline: one task, no duplicated packing.
  const int threads = rt::in_parallel_region() ? 1 : rt::num_threads();
  const Split split = choose_split(g.m, g.n, g.k, MR, NR, threads);
  const int64_t m_units = ceil_div(g.m, MR), n_units = ceil_div(g.n, NR);

  Plan<T> plan{&g, ks, gemm_pack_fn<T>(ks->isa, MR), gemm_pack_fn<T>(ks->isa, NR), false, blk};
  if (!plan.pack_a || !plan.pack_b) return false;
  // NB: the path and the K blocks depend on the shape alone, never on the thread split, so each
  // element is summed in the same order whatever the number of threads: results are bitwise the
  // same on 1 thread or 64.
  // (A transposed B has no prefetch stream; there the packed path measured as fast or faster.)
  plan.streamed = g.b_col_stride == 1 && m_units <= kStreamMaxRowTiles;
  if (plan.streamed) {
    plan.blk.mc = round_up(g.m, MR);  // one row block: B is streamed once
    plan.blk.nc = std::min(kStreamMaxCols, round_up(g.n, NR));
    plan.blk.kc =
        std::clamp<int64_t>(kStreamBlockBytes / (plan.blk.nc * int64_t{sizeof(T)}), 32, 256);
  }
  plan.blk.kc = ceil_div(g.k, ceil_div(g.k, plan.blk.kc));

  // One pointer captured: the std::function holds it without allocating.
  struct Tasks {
    const Plan<T>* plan;
    Split split;
    int64_t m_units, n_units;
    void run(int64_t t) const {
      const GemmArgs& g = *plan->g;
      const int64_t MR = plan->ks->mr, NR = plan->ks->nr;
      const int64_t i = t / split.tn, j = t % split.tn;
      const int64_t m0 = std::min(g.m, m_units * i / split.tm * MR);
      const int64_t m1 = std::min(g.m, m_units * (i + 1) / split.tm * MR);
      const int64_t n0 = std::min(g.n, n_units * j / split.tn * NR);
      const int64_t n1 = std::min(g.n, n_units * (j + 1) / split.tn * NR);
      if (m0 < m1 && n0 < n1) gemm_task<T>(*plan, m0, m1, n0, n1);
    }
  } const tasks{&plan, split, m_units, n_units};
  const Tasks* tp = &tasks;
  rt::parallel_for(split.tm * split.tn, 1, [tp](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) tp->run(t);
  });
  return true;
}

}  // namespace

bool gemm(const GemmArgs& args) {
  if (gemv(args)) return true;  // Note [Matrix-vector products]
  switch (args.dtype) {
    case rt::DType::Float32: return gemm_typed<float>(args);
    case rt::DType::Float64: return gemm_typed<double>(args);
    default: return false;
  }
}

}  // namespace framejit::jit::x86
