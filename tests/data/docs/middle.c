int leaf(int n);

__attribute__((noinline)) int middle(int n) { return leaf(n + 1) + 1; }
