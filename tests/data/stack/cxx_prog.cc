// C++ test program for frame names (pysframe stack against gdb's bt): templates, a lambda run
// by std::thread, an exception in flight (a destructor running while it unwinds), an inlined
// helper.  Prints READY once every thread is spinning; the test then stops it with SIGSTOP.
#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

static std::atomic<int> spinning{0};
static volatile int stop = 0;

namespace shapes {

template <typename T>
struct Box {
    T value;
    __attribute__((noinline)) T spin_inside(int depth) {
        spinning.fetch_add(1);
        while (!stop) {
        }
        return value + depth;
    }
};

}  // namespace shapes

// Inlined into each caller: gdb shows a frame of its own for it, with its caller's PC.
static inline __attribute__((always_inline)) int inlined_helper(shapes::Box<int>& box, int n) {
    return box.spin_inside(n) * 3 + n;
}

template <int N>
__attribute__((noinline)) int recurse(shapes::Box<int>& box) {
    int result = N == 0 ? inlined_helper(box, N) : recurse<(N > 0 ? N - 1 : 0)>(box);
    asm volatile("" ::: "memory");
    return result + 1;
}

struct Guard {
    shapes::Box<long> box{7};
    __attribute__((noinline)) ~Guard() { box.spin_inside(1); }
};

__attribute__((noinline)) void throw_through_guard() {
    Guard guard;
    throw std::runtime_error("in flight");
}

int main(int argc, char** argv) {
    (void)argc;
    (void)argv;
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; i++) {
        threads.emplace_back([i] {
            shapes::Box<int> box{i};
            std::printf("%d\n", recurse<3>(box));
        });
    }
    threads.emplace_back([] {
        try {
            throw_through_guard();
        } catch (const std::exception& error) {
            std::puts(error.what());
        }
    });
    while (spinning.load() < 3) {
    }
    std::puts("READY");
    std::fflush(stdout);
    for (auto& thread : threads) {
        thread.join();
    }
    return 0;
}
