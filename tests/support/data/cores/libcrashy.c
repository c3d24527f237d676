/* A shared library of the program's own, faulting on a bad pointer. */
__attribute__((noinline)) int crashy_copy(char *to, const char *from) {
    int copied = 0;
    while ((to[copied] = from[copied]) != 0) copied++;
    return copied;
}
