// float32 products on a Linux CPU. MLX's CPU backend multiplies float32 (matmul, addmm, the
// float32 convolutions, attention's two products) through `cblas_sgemm`, and the pip wheel
// (mlx-cpu) links netlib's reference BLAS for it: a plain loop nest at about 2 GFLOP/s, so k
// rows cost k times one row, and a speculative check of k guesses costs k decode steps
// (docs/perf.md, session 25). rmx defines `cblas_sgemm` in its own executable; the dynamic
// linker binds libmlx's call to it (the executable comes first in the lookup order).
//
// Why not a tuned BLAS: OpenBLAS was measured here (docs/perf.md, session 25). It is fast, but
// it picks its kernels by the shape, so an element's bits depend on the rows, columns and length
// of the product it is part of. A sequence would get other tokens alone, in a batch, or checking
// guesses (attention's products grow with the cache), which the engine promises it does not.
// matrixmultiply keeps every element's sum order whatever the shape, but packs the weights on
// every call, 5x slower than OpenBLAS at one row. So these kernels compute each element in one
// fixed order, a function of the sum's length alone:
//   * B transposed (x @ W^T: every weight product): dot products along k, eight partial sums
//     (k mod 8), then one fixed tree. Rows of A stream against rows of W, which are read once
//     per block of rows: memory-bound like a GEMV at a few rows.
//   * B not transposed (attention's scores @ V): rows of B scaled and added in k order, eight
//     columns a vector.
// Either way an element does not depend on its row, its column or the other rows and columns,
// and zero terms past the end (keys a mask hides) leave it unchanged. A transposed A is copied
// first. The columns are split over a few threads; each element is one thread's.
//
// `rmx_cpu_blas_select(1)` (RMX_CPU_BLAS=mlx) sends every call to the BLAS the MLX runtime links
// instead: the one mlx-lm multiplies with on Linux, for comparisons with it bit for bit.
//
// Linux only (build/main.rs compiles it there, optimized in every profile); rmx_mlx.cc holds the
// bridge's functions over the C ones at the end of this file.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

// cblas.h's values, as MLX calls with them.
constexpr int kRowMajor = 101;
constexpr int kNoTrans = 111;

using Sgemm = void (*)(int order, int ta, int tb, int m, int n, int k, float alpha, const float* a,
                       int lda, const float* b, int ldb, float beta, float* c, int ldc);

Sgemm mlx_sgemm() {
  static const Sgemm f = reinterpret_cast<Sgemm>(dlsym(RTLD_NEXT, "cblas_sgemm"));
  return f;
}

std::atomic<bool> use_mlx{false};
std::atomic<uint64_t> calls{0};

// ---- the kernels: C[i][j0..j1) of row-major C = alpha op(A) op(B) + beta C, A row-major ----

struct Product {
  int m, n, k;
  float alpha, beta;
  const float* a;
  int lda;
  const float* b;
  int ldb;
  bool b_trans;
  float* c;
  int ldc;
};

inline float finish(const Product& p, float sum, const float* c) {
  const float v = p.alpha == 1.f ? sum : p.alpha * sum;
  return p.beta == 0.f ? v : std::fma(p.beta, *c, v);
}

// The portable form of each kernel: the same operations in the same order as the vector form
// (fused multiply-adds into eight lanes, the same tree), so both give the same bits.
// The eight partial sums' tree: neighbours first, as the vector form's horizontal adds pair them.
inline float tree8(const float* l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

void dot_rows_portable(const Product& p, int j0, int j1) {
  for (int i = 0; i < p.m; ++i) {
    const float* x = p.a + static_cast<size_t>(i) * p.lda;
    for (int j = j0; j < j1; ++j) {
      const float* w = p.b + static_cast<size_t>(j) * p.ldb;
      float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int k = 0; k < p.k; ++k) lane[k & 7] = std::fma(x[k], w[k], lane[k & 7]);
      float* c = p.c + static_cast<size_t>(i) * p.ldc + j;
      *c = finish(p, tree8(lane), c);
    }
  }
}

void axpy_rows_portable(const Product& p, int j0, int j1) {
  for (int i = 0; i < p.m; ++i) {
    const float* x = p.a + static_cast<size_t>(i) * p.lda;
    for (int j = j0; j < j1; ++j) {
      float acc = 0.f;
      for (int k = 0; k < p.k; ++k) acc = std::fma(x[k], p.b[static_cast<size_t>(k) * p.ldb + j], acc);
      float* c = p.c + static_cast<size_t>(i) * p.ldc + j;
      *c = finish(p, acc, c);
    }
  }
}

#if defined(__x86_64__)
#define RMX_AVX2 __attribute__((target("avx2,fma")))

// tree8 of eight accumulators at once, one sum a lane: two rounds of horizontal adds pair
// neighbours ((l0+l1), (l2+l3), then their sums), and the halves' sums meet last.
RMX_AVX2 inline __m256 tree8x8(const __m256* v) {
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  // u0 = [s0 s1 s2 s3 | t0 t1 t2 t3]: the low and high halves' sums of v0..v3 (u1: v4..v7).
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// Lanes 0..r-1 of the next 8 (r < 8): the rest read as zero, as the portable form's loop stops.
RMX_AVX2 inline __m256i tail_mask(int r) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(r), idx);
}

// R rows of A against S rows of W at a time (R x S accumulators), k in steps of 8. Rows past the
// product's (r >= mi) repeat its last one and are not stored: every accumulator is its own sum,
// so the tile's shape changes which elements are computed together, never how.
template <int R, int S>
RMX_AVX2 void dot_tile(const Product& p, int i0, int mi, int j0, int j1) {
  const int k8 = p.k / 8 * 8;
  const __m256i tail = tail_mask(p.k - k8);
  const float* x[R];
  for (int r = 0; r < R; ++r) x[r] = p.a + static_cast<size_t>(i0 + std::min(r, mi - 1)) * p.lda;
  for (int jb = j0; jb < j1; jb += S) {
    const int nj = std::min(S, j1 - jb);
    const float* w[S];
    for (int s = 0; s < S; ++s) w[s] = p.b + static_cast<size_t>(jb + std::min(s, nj - 1)) * p.ldb;
    __m256 acc[R][S];
    for (int r = 0; r < R; ++r)
      for (int s = 0; s < S; ++s) acc[r][s] = _mm256_setzero_ps();
    for (int k = 0; k < k8; k += 8) {
      __m256 wv[S];
      for (int s = 0; s < S; ++s) wv[s] = _mm256_loadu_ps(w[s] + k);
      for (int r = 0; r < R; ++r) {
        const __m256 xv = _mm256_loadu_ps(x[r] + k);
        for (int s = 0; s < S; ++s) acc[r][s] = _mm256_fmadd_ps(xv, wv[s], acc[r][s]);
      }
    }
    if (k8 < p.k) {
      __m256 wv[S];
      for (int s = 0; s < S; ++s) wv[s] = _mm256_maskload_ps(w[s] + k8, tail);
      for (int r = 0; r < R; ++r) {
        const __m256 xv = _mm256_maskload_ps(x[r] + k8, tail);
        for (int s = 0; s < S; ++s) acc[r][s] = _mm256_fmadd_ps(xv, wv[s], acc[r][s]);
      }
    }
    // Reduce the accumulators eight at a time (padding the last group with zeros).
    constexpr int N = R * S, G = (N + 7) / 8;
    float sums[G * 8];
    for (int g = 0; g < G; ++g) {
      __m256 v[8];
      for (int e = 0; e < 8; ++e) {
        const int a = g * 8 + e;
        v[e] = a < N ? acc[a / S][a % S] : _mm256_setzero_ps();
      }
      _mm256_storeu_ps(sums + g * 8, tree8x8(v));
    }
    for (int r = 0; r < std::min(R, mi); ++r) {
      float* c = p.c + static_cast<size_t>(i0 + r) * p.ldc + jb;
      for (int s = 0; s < nj; ++s) c[s] = finish(p, sums[r * S + s], c + s);
    }
  }
}

// The weights stream once for every 8 rows of A (or fewer): a few rows cost about what one
// costs, as their bytes bound a product of few rows.
RMX_AVX2 void dot_rows_avx2(const Product& p, int j0, int j1) {
  for (int i0 = 0; i0 < p.m;) {
    const int left = p.m - i0;
    if (left >= 5) {
      // 32 accumulators spill registers, which costs less than streaming the weights twice: 8
      // rows of a 49,152 x 576 product took 4.3-4.9 ms so (2.0-2.3 ms for one row), 5.9-6.1 ms
      // as 8 x 2 tiles, 8.6-9.2 ms as two 4 x 3 passes, on the development machine.
      dot_tile<8, 4>(p, i0, std::min(8, left), j0, j1);
      i0 += 8;
    } else if (left >= 3) {
      dot_tile<4, 3>(p, i0, left, j0, j1);
      i0 += 4;
    } else if (left == 2) {
      dot_tile<2, 6>(p, i0, 2, j0, j1);
      i0 += 2;
    } else {
      dot_tile<1, 8>(p, i0, 1, j0, j1);
      i0 += 1;
    }
  }
}

// Up to 4 rows of A, 16 columns of B at a time; an element's sum runs along k in order.
RMX_AVX2 void axpy_rows_avx2(const Product& p, int j0, int j1) {
  for (int i0 = 0; i0 < p.m; i0 += 4) {
    const int mi = std::min(4, p.m - i0);
    for (int jb = j0; jb < j1; jb += 16) {
      const int nj = std::min(16, j1 - jb);
      const __m256i m0 = tail_mask(std::min(8, nj));
      const __m256i m1 = tail_mask(std::max(0, nj - 8));
      __m256 acc[4][2];
      for (int r = 0; r < 4; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
      const bool whole = nj == 16;
      for (int k = 0; k < p.k; ++k) {
        const float* bk = p.b + static_cast<size_t>(k) * p.ldb + jb;
        const __m256 b0 = whole ? _mm256_loadu_ps(bk) : _mm256_maskload_ps(bk, m0);
        const __m256 b1 = whole ? _mm256_loadu_ps(bk + 8) : _mm256_maskload_ps(bk + 8, m1);
        for (int r = 0; r < mi; ++r) {
          const __m256 xv = _mm256_set1_ps(p.a[static_cast<size_t>(i0 + r) * p.lda + k]);
          acc[r][0] = _mm256_fmadd_ps(xv, b0, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(xv, b1, acc[r][1]);
        }
      }
      for (int r = 0; r < mi; ++r) {
        float sums[16];
        _mm256_storeu_ps(sums, acc[r][0]);
        _mm256_storeu_ps(sums + 8, acc[r][1]);
        float* c = p.c + static_cast<size_t>(i0 + r) * p.ldc + jb;
        for (int s = 0; s < nj; ++s) c[s] = finish(p, sums[s], c + s);
      }
    }
  }
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#endif

void run_columns(const Product& p, int j0, int j1) {
#if defined(__x86_64__)
  if (has_avx2()) {
    p.b_trans ? dot_rows_avx2(p, j0, j1) : axpy_rows_avx2(p, j0, j1);
    return;
  }
#endif
  p.b_trans ? dot_rows_portable(p, j0, j1) : axpy_rows_portable(p, j0, j1);
}

// ---- a few threads over the columns ----

// Threads kept for the products, each handed a range of columns per call; the caller takes the
// first. Idle threads wait on a condition variable (no spinning between products).
class Pool {
 public:
  Pool() : size_(std::clamp<int>(static_cast<int>(std::thread::hardware_concurrency()), 1, 8)) {
    for (int t = 1; t < size_; ++t) threads_.emplace_back([this, t] { serve(t); });
  }
  int size() const { return size_; }

  // Runs part(t) for t in [0, parts) and returns when all have finished.
  void run(int parts, const std::function<void(int)>& part) {
    std::lock_guard<std::mutex> one(call_);  // one product at a time across the process
    {
      std::lock_guard<std::mutex> g(m_);
      part_ = &part;
      parts_ = parts;
      left_ = parts - 1;
      ++round_;
    }
    cv_.notify_all();
    part(0);
    std::unique_lock<std::mutex> g(m_);
    done_.wait(g, [this] { return left_ == 0; });
    part_ = nullptr;
  }

 private:
  void serve(int t) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* part;
      {
        std::unique_lock<std::mutex> g(m_);
        cv_.wait(g, [&] { return round_ != seen; });
        seen = round_;
        if (t >= parts_) continue;
        part = part_;
      }
      (*part)(t);
      std::lock_guard<std::mutex> g(m_);
      if (--left_ == 0) done_.notify_one();
    }
  }

  const int size_;
  std::vector<std::thread> threads_;
  std::mutex call_, m_;
  std::condition_variable cv_, done_;
  const std::function<void(int)>* part_ = nullptr;
  int parts_ = 0, left_ = 0;
  uint64_t round_ = 0;
};

Pool& pool() {
  // Never destroyed: its threads wait for work until the process ends.
  static Pool* p = new Pool();
  return *p;
}

void product(Product p, int ta) {
  std::vector<float> at;
  if (ta != kNoTrans) {
    // A is k x m (lda a row): lay it out m x k first; the values are the same.
    at.resize(static_cast<size_t>(p.m) * p.k);
    for (int kk = 0; kk < p.k; ++kk)
      for (int i = 0; i < p.m; ++i)
        at[static_cast<size_t>(i) * p.k + kk] = p.a[static_cast<size_t>(kk) * p.lda + i];
    p.a = at.data();
    p.lda = p.k;
  }
  // Columns in whole blocks of 16 per thread. Products under a million multiply-adds run on the
  // caller alone: waking a thread cost more than it saved for attention's (measured: 8 queries
  // over 1,024 keys, q k^T and p V per layer 1.2 ms alone, 2.1 ms split).
  const double work = static_cast<double>(p.m) * p.n * p.k;
  const int blocks = (p.n + 15) / 16;
  const int parts = work < (1 << 20) ? 1 : std::min(pool().size(), blocks);
  if (parts <= 1) {
    run_columns(p, 0, p.n);
    return;
  }
  const int per = (blocks + parts - 1) / parts * 16;
  pool().run(parts, [&](int t) {
    const int j0 = t * per, j1 = std::min(p.n, j0 + per);
    if (j0 < j1) run_columns(p, j0, j1);
  });
}

}  // namespace

extern "C" void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha,
                            const float* a, int lda, const float* b, int ldb, float beta,
                            float* c, int ldc) {
  calls.fetch_add(1, std::memory_order_relaxed);
  if (use_mlx.load(std::memory_order_relaxed)) {
    Sgemm f = mlx_sgemm();
    if (f == nullptr) {
      std::fprintf(stderr, "rmx: the MLX runtime links no cblas_sgemm to fall back to\n");
      std::abort();
    }
    f(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (m <= 0 || n <= 0) return;
  if (order != kRowMajor) {
    // Column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T: the same storage.
    std::swap(m, n);
    std::swap(a, b);
    std::swap(lda, ldb);
    std::swap(ta, tb);
  }
  // B transposed: its rows are op(B)'s columns, k long (the dot form); else k rows of n.
  product(Product{m, n, std::max(k, 0), alpha, beta, a, lda, b, ldb, tb != kNoTrans, c, ldc}, ta);
}

extern "C" {

void rmx_cpu_blas_select(int mlx) { use_mlx.store(mlx != 0, std::memory_order_relaxed); }

int rmx_cpu_blas_is_mlx() { return use_mlx.load(std::memory_order_relaxed) ? 1 : 0; }

uint64_t rmx_cpu_blas_calls() { return calls.load(std::memory_order_relaxed); }

// The kernels' instruction set and threads, for `rmx doctor`.
const char* rmx_cpu_blas_kernels() {
  static const std::string what = [] {
#if defined(__x86_64__)
    const char* simd = has_avx2() ? "AVX2 + FMA" : "portable";
#else
    const char* simd = "portable";
#endif
    return std::string(simd) + ", " + std::to_string(pool().size()) + " threads";
  }();
  return what.c_str();
}

}  // extern "C"
