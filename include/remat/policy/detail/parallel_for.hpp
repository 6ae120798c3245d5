#pragma once
// parallel_for: f(0) .. f(n-1) on up to `threads` threads (0: the hardware's), each index once,
// in an order that depends on the threads' timing; f writes what it finds where only it
// writes (a slot per index), or under its own lock.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace remat::detail {

template <class F>
void parallel_for(std::size_t n, int threads, F&& f) {
  const auto hardware = static_cast<int>(std::thread::hardware_concurrency());
  const int count = static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(std::max(1, threads > 0 ? threads : hardware)),
                            std::max<std::size_t>(n, 1)));
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) f(i);
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < count; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

}  // namespace remat::detail
