/* Touches argv[1] MiB of its own memory (a nonzero byte in every page, so no page of its core
 * is a hole), then crashes in its own function: the crash lab's large process, whose core the
 * handler must decide on without reading it. */
#include <stdlib.h>
#include <sys/mman.h>

__attribute__((noinline)) long checksum_region(const volatile long *region, size_t words) {
    long sum = 0;
    for (size_t i = 0; i < words; i++) sum += region[i];
    return sum;
}

int main(int argc, char **argv) {
    size_t size = (argc > 1 ? strtoul(argv[1], NULL, 10) : 0) << 20;
    char *memory = size ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : NULL;
    for (size_t at = 0; memory != MAP_FAILED && at < size; at += 4096) memory[at] = 1;
    return (int)checksum_region(NULL, 1 + size / sizeof(long)); /* the region it should have been */
}
