// A C++ program for the perf naming tests: templates, a lambda passed to std::sort (called
// back from libstdc++'s sorting templates), virtual calls and exceptions thrown and caught.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace shapes {
struct Shape {
  virtual ~Shape() = default;
  virtual long area(const std::string &tag) const = 0;
};
template <typename T> struct Box : Shape {
  T side;
  explicit Box(T s) : side(s) {}
  __attribute__((noinline)) long area(const std::string &tag) const override {
    return static_cast<long>(side * side) + static_cast<long>(tag.size());
  }
};
}  // namespace shapes

template <typename T> __attribute__((noinline)) long sorted_sum(std::vector<T> &values, int round) {
  std::sort(values.begin(), values.end(), [round](T a, T b) { return (a ^ round) < (b ^ round); });
  long sum = 0;
  for (size_t i = 0; i < values.size(); i += 97) sum += values[i];
  return sum;
}

__attribute__((noinline)) void maybe_throw(int round) {
  if (round % 5 == 0) throw std::runtime_error("round " + std::to_string(round));
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.5;
  std::vector<int> values(20000);
  std::vector<std::unique_ptr<shapes::Shape>> boxes;
  boxes.emplace_back(new shapes::Box<int>(3));
  boxes.emplace_back(new shapes::Box<double>(2.5));
  long total = 0;
  for (int round = 0; round < static_cast<int>(seconds * 400); round++) {
    for (auto &v : values) v = rand();
    total += sorted_sum(values, round);
    for (auto &box : boxes) total += box->area("tag");
    try {
      maybe_throw(round);
    } catch (const std::exception &error) {
      total += static_cast<long>(std::string(error.what()).size());
    }
  }
  printf("%ld\n", total);
  return 0;
}
