// Writes lines to stdout and flushes each: with stdout a pipe nobody reads, the program
// blocks for good in write(2) under fflush, with libio's inlined vtable checks on its stack.
#include <stdio.h>
#include <string.h>

int main(void) {
    char line[100];
    memset(line, 'x', sizeof line - 1);
    line[sizeof line - 1] = '\0';
    for (;;) {
        puts(line);
        fflush(stdout);
    }
}
