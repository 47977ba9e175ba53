// A C++ program to profile: worker threads sorting through std::sort with a lambda
// comparator, virtual calls into a class hierarchy, std::function callbacks, a std::map, an
// exception thrown and caught now and then, and a template recursion; argv[1] is how many
// seconds it runs.  Built with -O2 -fomit-frame-pointer.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace shapes {
struct Shape {
    virtual ~Shape() = default;
    virtual double area(int scale) const = 0;
};
struct Square final : Shape {
    double side;
    explicit Square(double s) : side(s) {}
    __attribute__((noinline)) double area(int scale) const override {
        double total = 0;
        for (int i = 0; i < scale; i++) total += side * side / (i + 1);
        return total;
    }
};
struct Circle final : Shape {
    double radius;
    explicit Circle(double r) : radius(r) {}
    __attribute__((noinline)) double area(int scale) const override {
        double total = 0;
        for (int i = 0; i < scale; i++) total += 3.14159 * radius * radius / (i + 2);
        return total;
    }
};
}  // namespace shapes

template <int N>
struct Unroll {
    __attribute__((noinline)) static long run(std::vector<int> &v, long acc) {
        std::sort(v.begin(), v.end(), [](int a, int b) { return (a ^ N) < (b ^ N); });
        return Unroll<N - 1>::run(v, acc + v[N % v.size()]);
    }
};
template <>
struct Unroll<0> {
    static long run(std::vector<int> &v, long acc) { return acc + v[0]; }
};

__attribute__((noinline)) long checked(int value) {
    if (value % 97 == 0) throw std::runtime_error("a multiple of 97");
    return value;
}

__attribute__((noinline)) long with_callbacks(const std::function<long(int)> &each, int n) {
    long total = 0;
    for (int i = 0; i < n; i++) {
        try {
            total += each(i);
        } catch (const std::exception &) {
            total -= 1;
        }
    }
    return total;
}

static long work(unsigned seed, double seconds) {
    using clock = std::chrono::steady_clock;
    auto end = clock::now() + std::chrono::duration<double>(seconds);
    std::vector<std::unique_ptr<shapes::Shape>> all;
    for (int i = 0; i < 16; i++) {
        if (i % 2) all.push_back(std::make_unique<shapes::Square>(i));
        else all.push_back(std::make_unique<shapes::Circle>(i));
    }
    std::map<std::string, long> counts;
    long total = 0;
    while (clock::now() < end) {
        std::vector<int> v(400);
        for (auto &x : v) x = rand_r(&seed);
        total += Unroll<6>::run(v, 0);
        for (const auto &shape : all) total += static_cast<long>(shape->area(200));
        total += with_callbacks([&](int i) { return checked(i + v[i % v.size()]); }, 300);
        counts[std::to_string(total % 100)] += 1;
    }
    return total + static_cast<long>(counts.size());
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
    std::vector<std::thread> threads;
    std::vector<long> results(2);
    for (unsigned i = 0; i < 2; i++)
        threads.emplace_back([&, i] { results[i] = work(i + 1, seconds); });
    long total = work(7, seconds);
    for (auto &thread : threads) thread.join();
    std::printf("%ld\n", (total + results[0] + results[1]) & 0xff);
    return 0;
}
