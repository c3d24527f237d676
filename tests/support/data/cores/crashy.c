/* One program, one way to crash per argument: the cores of tests/agents/test_coredump.py. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int crashy_copy(char *to, const char *from); /* libcrashy.so */

struct record { int key; int *value; };
static struct record records[4] = {{3, 0}, {1, 0}, {2, 0}, {0, 0}};
char journal[64]; /* .bss: where the misaligned return lands */
volatile int sink;

__attribute__((noinline)) void note(int value) { sink += value; }

__attribute__((noinline)) int parse_record(int *field) { return *field + 1; }

__attribute__((noinline)) size_t count_name(const char *name) { return strlen(name); }

__attribute__((noinline)) int compare_records(const void *a, const void *b) {
    return *((const struct record *)a)->value - *((const struct record *)b)->value;
}

__attribute__((noinline)) void *worker_loop(void *arg) {
    note(1);
    return (void *)(long)parse_record((int *)arg);
}

__attribute__((noinline)) void check_invariant(int count) {
    if (count != 4) abort();
    note(count);
}

/* Overwrites its own return address with 0, then returns: pc 0, and `ret` popped the 0. */
__attribute__((noinline)) void smash_return(void) {
    note(2);
    ((void **)__builtin_frame_address(0))[1] = 0;
}

/* Returns with %rsp 8 bytes off: one word too many on the stack, so `ret` pops it (the
 * address of a .bss object) instead of the return address. */
__attribute__((noinline)) void unbalanced(void) {
    note(3);
    __asm__ volatile("leave\n\tpush %0\n\tret" : : "r"(journal) : "memory");
}

/* An aligned SSE store to a stack slot 8 bytes off its 16-byte alignment: #GP, SI_KERNEL. */
__attribute__((noinline)) void mix_vectors(void) {
    note(4);
    __asm__ volatile("mov %%rsp, %%rax\n\tand $-16, %%rsp\n\tsub $8, %%rsp\n\t"
                     "movaps %%xmm0, (%%rsp)\n\tmov %%rax, %%rsp" : : : "rax", "memory");
}

/* A fault caught by the program's own SIGSEGV handler, which gives up: the core's stack runs
 * through the signal trampoline (__restore_rt) back to the faulting function. */
__attribute__((noinline)) void on_fault(int signo) {
    note(signo);
    abort();
}

__attribute__((noinline)) int load_config(int *entry) { return *entry * 2; }

/* Calls into libc with %rsp 8 bytes off its ABI alignment (strlen faults on the NULL). */
__attribute__((noinline)) size_t measure_unaligned(const char *name) {
    size_t length;
    __asm__ volatile("sub $8, %%rsp\n\tcall strlen@PLT\n\tadd $8, %%rsp"
                     : "=a"(length) : "D"(name)
                     : "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "memory", "cc");
    return length;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    char *bad = argc > 9 ? argv[0] : (char *)16;
    if (!strcmp(mode, "null")) return parse_record(argc > 9 ? &argc : NULL);
    if (!strcmp(mode, "strlen")) return (int)count_name(argc > 9 ? argv[0] : NULL);
    if (!strcmp(mode, "library")) return crashy_copy(bad, "text");
    if (!strcmp(mode, "qsort")) { qsort(records, 4, sizeof records[0], compare_records); return 0; }
    if (!strcmp(mode, "thread")) {
        pthread_t worker;
        pthread_create(&worker, NULL, worker_loop, argc > 9 ? &argc : NULL);
        pthread_join(worker, NULL);
        return 0;
    }
    if (!strcmp(mode, "abort")) { check_invariant(argc); return 0; }
    if (!strcmp(mode, "return-to-null")) { smash_return(); return 0; }
    if (!strcmp(mode, "misaligned-return")) { unbalanced(); return 0; }
    if (!strcmp(mode, "sse")) { mix_vectors(); return 0; }
    if (!strcmp(mode, "handler")) {
        signal(SIGSEGV, on_fault);
        return load_config(argc > 9 ? &argc : NULL);
    }
    if (!strcmp(mode, "misaligned-call")) return (int)measure_unaligned(argc > 9 ? argv[0] : NULL);
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
