/* A shared library the test program calls through: lib_call calls back into the program. */
__attribute__((noinline)) int lib_call(int (*callback)(int), int n)
{
    volatile int keep = n;
    int result = callback(keep);
    return result + keep;
}
