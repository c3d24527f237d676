/* An LD_PRELOAD twin for pipe-mode tests on a host whose core_pattern must not change.
 *
 * With CRASHREG_TWIN_READY=FILE in the environment, the constructor forks before main: the
 * parent goes on, crashes and dumps a real core (ulimit -c, core_pattern `core`); the child
 * runs the very same code on the very same address space (fork keeps the layout), and where
 * the parent took its fatal signal the child's handler holds it: it writes its pid to FILE and
 * pauses for good. Its stacks at and above the red zone are the parent's at the crash (the
 * kernel puts a signal frame below the 128-byte red zone), so a pipe handler fed the parent's
 * core on stdin reads from /proc/<child> what it would read from the dying process itself.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static char ready_path[4096], partial_path[4200], pid_line[32];

static void hold(int signo) {
    int fd = open(partial_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    (void)signo;
    if (fd >= 0) {
        (void)!write(fd, pid_line, strlen(pid_line));
        close(fd);
        rename(partial_path, ready_path);
    }
    for (;;) pause();
}

__attribute__((constructor)) static void twin(void) {
    const char *ready = getenv("CRASHREG_TWIN_READY");
    struct rlimit none = {0, 0};
    struct sigaction action;
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};
    if (!ready || strlen(ready) >= sizeof ready_path || fork() != 0) return;
    snprintf(ready_path, sizeof ready_path, "%s", ready);
    snprintf(partial_path, sizeof partial_path, "%s.partial", ready);
    snprintf(pid_line, sizeof pid_line, "%d\n", getpid());
    setrlimit(RLIMIT_CORE, &none);
    memset(&action, 0, sizeof action);
    action.sa_handler = hold;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) sigaction(fatal[i], &action, NULL);
}
