/* Failure classes beside crashy.c's (issue 40): a call through a garbage function pointer, a
 * signal handler that crashes in its own code, a string copied over a return address, a bad
 * pointer handed to the C library's math library, a stack buffer handed to free (the C
 * library's heap, or jemalloc's linked in, faults inside itself), and a write one past a heap
 * buffer (built with AddressSanitizer: its runtime reports it and aborts), and a runaway
 * recursion on the main thread's stack, on a thread's, and under a crash reporter's SIGSEGV
 * handler (on an alternate stack) that aborts. Built hardened as distributions build (
 * _FORTIFY_SOURCE, a stack protector): a fortified memcpy past a buffer and a string copied
 * over a canary, each stopped by the C library's check from code its header inlined in the
 * program. Built static (the C library in the program's own module): strlen handed NULL, a
 * lock that was never made, a double free, besides libm and free above. Argument: the class
 * to crash as. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*handler_fn)(int);

struct plugin { char name[16]; handler_fn run; };

/* The pointer is not code: unmapped memory, or the plugin's own (writable, not executable) data. */
__attribute__((noinline)) int dispatch(struct plugin *plugin, int value) {
    return plugin->run(value) + 1;
}

static volatile int *registry_slot;

/* The handler itself dereferences NULL: its own bug, whatever the signal interrupted. */
__attribute__((noinline)) void on_reload(int signo) {
    *registry_slot = signo;
}

__attribute__((noinline)) void serve_requests(void) {
    raise(SIGUSR1);
}

/* Built without a stack protector: the `ret` takes ASCII for an address, which is not
 * canonical, and faults on the `ret` itself. */
static const char *volatile long_name = "a name much longer than the eight bytes it is copied into";

__attribute__((noinline)) int copy_name(const char *name) {
    char buf[8];
    strcpy(buf, name);
    return buf[0];
}

/* Hardened: memcpy is glibc's fortified wrapper (bits/string_fortified.h), inlined here, whose
 * __memcpy_chk sees the copy is longer than the buffer and aborts. */
__attribute__((noinline)) int copy_header(const char *header, size_t length) {
    char field[8];
    memcpy(field, header, length);
    return field[0];
}

/* Hardened: a copy four bytes past the buffer (byte by byte, which no fortified wrapper
 * checks) overwrites the stack protector's canary beside it, not the return address, and the
 * return checks the canary. */
__attribute__((noinline)) int label_of(const char *name) {
    char label[8];
    char *volatile into = label;
    for (size_t at = 0; at < sizeof label + 4; at++)
        into[at] = name[at];
    return label[0];
}

/* modf stores the whole part through `whole`: NULL faults in libm, the program's bug. */
__attribute__((noinline)) double fraction_of(double value, double *whole) {
    return modf(value, whole) * 2.0;
}

/* Frees what malloc never gave: a buffer on its own stack. */
__attribute__((noinline)) void forget_buffer(void) {
    char buffer[64];
    memset(buffer, 1, sizeof buffer);
    void *volatile start = buffer + 16;
    free(start);
}

/* Writes one byte past the end of what malloc gave: AddressSanitizer's runtime stops it there. */
__attribute__((noinline)) int append_record(char *record, int length) {
    for (int at = 0; at <= length; at++)
        record[at] = (char)at;
    return record[0];
}

/* Handed NULL, the C library's strlen faults (its result used: no tail call). */
__attribute__((noinline)) size_t name_length(const char *name) {
    return strlen(name) + 1;
}

/* A lock that was never made: a pointer into nothing. */
__attribute__((noinline)) int lock_table(pthread_mutex_t *lock) {
    int locked = pthread_mutex_lock(lock);
    return locked + pthread_mutex_unlock(lock);
}

/* Frees one buffer twice: the C library's heap aborts on the second. */
__attribute__((noinline)) int drop_twice(char *record) {
    free(record);
    free(record);
    return 1;
}

/* Recurses until the stack's guard stops it (its result used: no tail call to loop on). */
__attribute__((noinline)) long walk_tree(long depth) {
    volatile char node[256];
    node[0] = (char)depth;
    return walk_tree(depth + 1) + node[0];
}

/* A crash reporter's handler: it would log, then it aborts (the core is SIGABRT's). */
static void report_and_abort(int signo) {
    (void)signo;
    abort();
}

static void *walk_in_a_thread(void *depth) {
    return (void *)walk_tree((long)depth);
}

/* AddressSanitizer's options for a build with it (unused otherwise): abort, so the kernel
 * writes a core, as a fleet's sanitizer builds are configured to. */
const char *__asan_default_options(void) {
    return "abort_on_error=1:disable_coredump=0:unmap_shadow_on_exit=1";
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    struct plugin plugin;
    memset(&plugin, 0, sizeof plugin);
    if (!strcmp(mode, "garbage-call")) {
        plugin.run = (handler_fn)(argc > 9 ? (long)main : 0x5a5a5a5a000L);
        return dispatch(&plugin, argc);
    }
    if (!strcmp(mode, "data-call")) {
        plugin.run = (handler_fn)(void *)plugin.name;
        return dispatch(&plugin, argc);
    }
    if (!strcmp(mode, "handler-bug")) {
        signal(SIGUSR1, on_reload);
        serve_requests();
        return 0;
    }
    if (!strcmp(mode, "smash"))
        return copy_name(long_name);
    if (!strcmp(mode, "free-stack")) {
        forget_buffer();
        return 0;
    }
    if (!strcmp(mode, "heap-overflow")) {
        char *record = malloc(16);
        return append_record(record, 16);
    }
    if (!strcmp(mode, "recurse"))
        return (int)walk_tree(argc);
    if (!strcmp(mode, "recurse-caught")) {
        static char alternate[1 << 16];
        stack_t spare = {.ss_sp = alternate, .ss_size = sizeof alternate};
        struct sigaction action = {.sa_handler = report_and_abort, .sa_flags = SA_ONSTACK};
        sigaltstack(&spare, NULL);
        sigaction(SIGSEGV, &action, NULL);
        return (int)walk_tree(argc);
    }
    if (!strcmp(mode, "thread-recurse")) {
        pthread_t thread;
        pthread_attr_t attributes;
        pthread_attr_init(&attributes);
        pthread_attr_setstacksize(&attributes, 256 << 10);
        pthread_create(&thread, &attributes, walk_in_a_thread, (void *)(long)argc);
        return pthread_join(thread, NULL);
    }
    if (!strcmp(mode, "fortify"))  /* the results are used: main stays on the stack (no tail call) */
        return copy_header(long_name, strlen(long_name)) == 'a';
    if (!strcmp(mode, "canary"))
        return label_of(long_name) == 'a';
    if (!strcmp(mode, "string-null")) {
        const char *volatile name = NULL;
        return (int)name_length(name);
    }
    if (!strcmp(mode, "mutex-null")) {
        pthread_mutex_t *volatile lock = (pthread_mutex_t *)16;
        return lock_table(lock);
    }
    if (!strcmp(mode, "double-free"))
        return drop_twice(malloc(48));
    if (!strcmp(mode, "libm-null")) {
        double *whole = argc > 9 ? malloc(sizeof *whole) : NULL;
        return (int)fraction_of(argc + 0.5, whole);
    }
    return 2;
}
