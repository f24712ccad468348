// Division by a divisor known at launch, as a multiply and a shift (host and device).
#pragma once

#include <cuda_runtime.h>  // __host__ / __device__ (empty for a plain C++ compiler)

#include <cstdint>

namespace ferry::cuda {

// Divides dividends below 2^31 by `divisor` (1 to 2^31): with l = ceil(log2(divisor)) and
// multiplier = ceil(2^(31 + l) / divisor) (below 2^32), x * multiplier / 2^(31 + l) exceeds
// x / divisor by less than x / 2^(31 + l) < 1 / divisor, so its floor is the quotient.
struct FastDivisor {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 1u << 31;
  std::uint32_t shift = 31;  // 31 + l
};

inline FastDivisor make_fast_divisor(std::uint32_t divisor) {
  FastDivisor fast;
  if (divisor == 0) return fast;  // callers pass at least 1; keep a valid divide-by-1
  std::uint32_t log = 0;
  while ((std::uint64_t{1} << log) < divisor) ++log;
  const std::uint64_t power = std::uint64_t{1} << (31 + log);
  fast.divisor = divisor;
  fast.multiplier = static_cast<std::uint32_t>((power + divisor - 1) / divisor);
  fast.shift = 31 + log;
  return fast;
}

// dividend / fast.divisor, for dividend < 2^31.
__host__ __device__ inline std::uint32_t fast_divide(std::uint32_t dividend,
                                                     const FastDivisor& fast) {
  return static_cast<std::uint32_t>((std::uint64_t{dividend} * fast.multiplier) >> fast.shift);
}

}  // namespace ferry::cuda
