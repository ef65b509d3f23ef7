/* The instructions one thread executes in user space per value it takes, counted exactly by
 * single-stepping it with ptrace(2): the figure of central-notify-socket-instructions, which the
 * machine's load cannot move.
 *
 *   step-counter PID THREAD SYSCALL SKIP VALUES
 *     Waits (up to 30 s) for the thread of process PID named THREAD (/proc/PID/task/{}/comm),
 *     attaches to it and steps it. A value's work ends where the thread makes the system call
 *     SYSCALL (epoll_wait or poll: where it waits for the next value); the first SKIP such spans
 *     are left out, the next VALUES are counted, then it detaches. Prints
 *       steps values=<n> instructions=<median> mean=<mean> pages=<median> calls=<median> syscalls=<median>
 *     per value: instructions executed, distinct 4 KiB pages of code they came from, call
 *     instructions (direct and indirect) and system calls. A system call counts as one instruction.
 *
 * Stepped, the thread runs some thousand times slower, so values must come far apart (the
 * benchmark paces them at 10 a second) for each to be taken alone, as at a link's pace. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAGES 4096

/* The thread of `pid` named `name`, or 0. */
static pid_t find_thread(pid_t pid, const char *name) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *tasks = opendir(path);
    if (tasks == NULL) return 0;
    pid_t found = 0;
    struct dirent *entry;
    while (found == 0 && (entry = readdir(tasks)) != NULL) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
        char comm_path[320], comm[32] = "";
        snprintf(comm_path, sizeof comm_path, "/proc/%d/task/%s/comm", pid, entry->d_name);
        FILE *file = fopen(comm_path, "r");
        if (file == NULL) continue;
        if (fgets(comm, sizeof comm, file) != NULL) {
            comm[strcspn(comm, "\n")] = 0;
            if (strcmp(comm, name) == 0) found = atoi(entry->d_name);
        }
        fclose(file);
    }
    closedir(tasks);
    return found;
}

static int compare(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static long median(long *values, int count) {
    qsort(values, count, sizeof *values, compare);
    return values[count / 2];
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: step-counter PID THREAD epoll_wait|poll SKIP VALUES\n");
        return 2;
    }
    pid_t pid = atoi(argv[1]);
    long boundary = strcmp(argv[3], "poll") == 0 ? SYS_poll : SYS_epoll_wait;
    int skip = atoi(argv[4]), values = atoi(argv[5]);
    pid_t thread = 0;
    for (int tries = 0; thread == 0 && tries < 3000; tries++) {
        thread = find_thread(pid, argv[2]);
        if (thread == 0) usleep(10000);
    }
    if (thread == 0) {
        fprintf(stderr, "step-counter: no thread named %s in process %d\n", argv[2], pid);
        return 1;
    }
    if (ptrace(PTRACE_SEIZE, thread, 0, 0) != 0 || ptrace(PTRACE_INTERRUPT, thread, 0, 0) != 0) {
        perror("step-counter: ptrace");
        return 1;
    }
    int status;
    if (waitpid(thread, &status, __WALL) < 0) {
        perror("step-counter: waitpid");
        return 1;
    }
    long *instructions = calloc(values, sizeof(long)), *pages = calloc(values, sizeof(long));
    long *calls = calloc(values, sizeof(long)), *syscalls = calloc(values, sizeof(long));
    static uint64_t seen_pages[MAX_PAGES];
    int page_count = 0;
    long steps = 0, call_count = 0, syscall_count = 0;
    int spans = -1; /* the span before the first boundary is partial */
    while (spans < skip + values) {
        struct user_regs_struct registers;
        if (ptrace(PTRACE_GETREGS, thread, 0, &registers) != 0) break;
        errno = 0;
        long word = ptrace(PTRACE_PEEKTEXT, thread, registers.rip, 0);
        if (errno != 0) break;
        unsigned char byte[8];
        memcpy(byte, &word, sizeof byte);
        int is_syscall = byte[0] == 0x0f && byte[1] == 0x05;
        if (is_syscall && (long)registers.rax == boundary) {
            int index = spans - skip;
            if (index >= 0) {
                instructions[index] = steps;
                pages[index] = page_count;
                calls[index] = call_count;
                syscalls[index] = syscall_count;
            }
            spans++;
            steps = call_count = syscall_count = 0;
            page_count = 0;
        }
        steps++;
        uint64_t page = registers.rip >> 12;
        int known = 0;
        for (int i = 0; i < page_count && !known; i++) known = seen_pages[i] == page;
        if (!known && page_count < MAX_PAGES) seen_pages[page_count++] = page;
        syscall_count += is_syscall;
        /* call rel32 (e8), or call r/m (ff /2), after a REX prefix if there is one. */
        int at = (byte[0] & 0xf0) == 0x40 ? 1 : 0;
        if (byte[at] == 0xe8 || (byte[at] == 0xff && ((byte[at + 1] >> 3) & 7) == 2)) call_count++;
        if (ptrace(PTRACE_SINGLESTEP, thread, 0, 0) != 0) break;
        if (waitpid(thread, &status, __WALL) < 0 || WIFEXITED(status) || WIFSIGNALED(status)) break;
    }
    int counted = spans - skip;
    ptrace(PTRACE_DETACH, thread, 0, 0);
    if (counted < 1) {
        fprintf(stderr, "step-counter: the thread ended after %d values\n", spans < 0 ? 0 : spans);
        return 1;
    }
    if (counted > values) counted = values;
    double mean = 0;
    for (int i = 0; i < counted; i++) mean += instructions[i];
    mean /= counted;
    printf("steps values=%d instructions=%ld mean=%.0f pages=%ld calls=%ld syscalls=%ld\n", counted,
           median(instructions, counted), mean, median(pages, counted), median(calls, counted),
           median(syscalls, counted));
    return 0;
}
