// The one place the project's parallel loops are compiled with OpenMP (see util/parallel.hpp).
#include "util/parallel.hpp"

#include <ATen/Parallel.h>

namespace vocablens {
namespace detail {

void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  at::parallel_for(begin, end, grain, f);
}

}  // namespace detail
}  // namespace vocablens
