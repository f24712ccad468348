// The tensor cores' ceilings for a 256-bit Hamming tile (16 rows x 8 queries), the forms a scan
// can take: two chained b1 and.popc products (CUDA's scan: popc(a AND NOT q) + popc(NOT a AND q)),
// one b1 xor.popc product, one b1 and.popc product (not a distance alone: the bound the issue's
// "0.05 ms" came from), and eight int8 m16n8k32 products (each bit a byte, as Vulkan's int8
// cooperative matrices take it). Each loop holds only the products, 8 independent chains a
// warp: what the hardware allows, not a search. It also checks that xor.popc equals the pair.
//
// Not part of the build (it needs sm_80 or later and measures hardware, not ferry); on the GPU
// machine: nvcc -O3 -arch=sm_90 tools/ceilings/tensor_cores.cu -o ceilings && ./ceilings
// Figures: docs/PERFORMANCE.md, "Search on the H200, eighth part".
#include <cuda_runtime.h>

#include <cstdio>

namespace {

#define FERRY_B1_MMA(op, d, a, b, c)                                                            \
  asm volatile("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32." op                          \
               ".popc {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"                \
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), \
                 "r"(c[1]), "r"(c[2]), "r"(c[3]))
#define FERRY_I8_MMA(d, a, b, c)                                                                \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "                              \
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"                      \
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), \
                 "r"(c[1]), "r"(c[2]), "r"(c[3]))

enum Form { kAndPair, kXor, kAndOnce, kInt8, kForms };
const char* const kFormNames[kForms] = {"b1 and.popc x2", "b1 xor.popc x1", "b1 and.popc x1",
                                        "int8 m16n8k32 x8"};
constexpr int kChains = 8;

template <int F>
__global__ void products(const unsigned* in, int* out, int iters) {
  unsigned a[4], na[4], b[2], nb[2];
  for (int e = 0; e < 4; ++e) {
    a[e] = in[(e + threadIdx.x) & 255];
    na[e] = ~a[e];
  }
  b[0] = in[threadIdx.x];
  b[1] = in[threadIdx.x + 1];
  nb[0] = ~b[0];
  nb[1] = ~b[1];
  int d[kChains][4];
  for (int t = 0; t < kChains; ++t)
    for (int e = 0; e < 4; ++e) d[t][e] = t;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int t = 0; t < kChains; ++t) {
      if (F == kAndPair) {
        FERRY_B1_MMA("and", d[t], a, nb, d[t]);
        FERRY_B1_MMA("and", d[t], na, b, d[t]);
      } else if (F == kXor) {
        FERRY_B1_MMA("xor", d[t], a, b, d[t]);
      } else if (F == kAndOnce) {
        FERRY_B1_MMA("and", d[t], a, b, d[t]);
      } else {
#pragma unroll
        for (int s = 0; s < 8; ++s) FERRY_I8_MMA(d[t], a, b, d[t]);
      }
    }
  }
  int sum = 0;
  for (int t = 0; t < kChains; ++t) sum += d[t][0] + d[t][1] + d[t][2] + d[t][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;  // keeps the products live
}

// xor.popc against the and.popc pair on one warp's random fragments: counts the mismatches.
__global__ void compare_forms(const unsigned* in, int* mismatches) {
  const unsigned l = threadIdx.x;
  const unsigned a[4] = {in[4 * l], in[4 * l + 1], in[4 * l + 2], in[4 * l + 3]};
  const unsigned na[4] = {~a[0], ~a[1], ~a[2], ~a[3]};
  const unsigned b[2] = {in[200 + l], in[300 + l]}, nb[2] = {~b[0], ~b[1]};
  const int c[4] = {-7, 3, 0, -100};
  int x[4], e[4], y[4];
  FERRY_B1_MMA("xor", x, a, b, c);
  FERRY_B1_MMA("and", e, a, nb, c);
  FERRY_B1_MMA("and", y, na, b, e);
  for (int i = 0; i < 4; ++i)
    if (x[i] != y[i]) atomicAdd(mismatches, 1);
}

}  // namespace

int main() {
  unsigned host[512];
  unsigned state = 12345;
  for (unsigned& v : host) {
    state = state * 1664525u + 1013904223u;
    v = state ^ (state >> 13);
  }
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  unsigned* in = nullptr;
  int *out = nullptr, *mismatches = nullptr;
  if (cudaMalloc(&in, sizeof host) != cudaSuccess ||
      cudaMalloc(&out, sms * 16 * 128 * sizeof(int)) != cudaSuccess ||
      cudaMalloc(&mismatches, sizeof(int)) != cudaSuccess) {
    std::printf("no device memory\n");
    return 1;
  }
  cudaMemcpy(in, host, sizeof host, cudaMemcpyHostToDevice);
  cudaMemset(mismatches, 0, sizeof(int));
  compare_forms<<<1, 32>>>(in, mismatches);
  int bad = -1;
  cudaMemcpy(&bad, mismatches, sizeof bad, cudaMemcpyDeviceToHost);
  std::printf("xor.popc against the and.popc pair: %d mismatches of 128\n", bad);

  cudaEvent_t begin, end;
  cudaEventCreate(&begin);
  cudaEventCreate(&end);
  for (int form = 0; form < kForms; ++form) {
    for (int blocks_per_sm : {4, 8, 16}) {
      const int grid = sms * blocks_per_sm, block = 128;
      const int iters = form == kInt8 ? 512 : form == kXor ? 1024 : 4096;
      float best = 1e30f;
      for (int rep = 0; rep < 3; ++rep) {  // the first is a warm-up
        cudaEventRecord(begin);
        if (form == kAndPair) products<kAndPair><<<grid, block>>>(in, out, iters);
        if (form == kXor) products<kXor><<<grid, block>>>(in, out, iters);
        if (form == kAndOnce) products<kAndOnce><<<grid, block>>>(in, out, iters);
        if (form == kInt8) products<kInt8><<<grid, block>>>(in, out, iters);
        cudaEventRecord(end);
        cudaEventSynchronize(end);
        float ms = 0;
        cudaEventElapsedTime(&ms, begin, end);
        if (rep > 0 && ms < best) best = ms;
      }
      const double tiles = double(grid) * (block / 32) * iters * kChains;
      const double per_second = tiles / (best * 1e-3);
      // 1000 queries x 1M rows of 256 bits: 7.8125M tiles of 16 x 8.
      std::printf("%-17s %2d warps/SM: %6.1f G tiles/s; 1000 x 1M x 256-bit at this rate %.3f ms"
                  " (%s)\n",
                  kFormNames[form], blocks_per_sm * 4, per_second * 1e-9,
                  7.8125e6 / per_second * 1e3, cudaGetErrorString(cudaGetLastError()));
    }
  }
  return 0;
}
