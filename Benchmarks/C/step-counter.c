/* The instructions one thread executes in user space per value it takes, counted exactly by
 * single-stepping it with ptrace(2): the figure of central-notify-socket-instructions, which the
 * machine's load cannot move.
 *
 *   step-counter PID THREAD SYSCALL SKIP VALUES
 *     Waits (up to 30 s) for the thread of process PID named THREAD (/proc/PID/task/{}/comm),
 *     attaches to it and steps it. A value's work ends where the thread makes the system call
 *     SYSCALL (epoll_pwait, which Able's event loops wait in, or poll: glibc's poll(), which is
 *     the ppoll system call on architectures without poll, such as arm64; where the thread waits
 *     for the next value); the first SKIP such spans are left out, the next VALUES are counted,
 *     then it detaches. Prints
 *       steps values=<n> instructions=<median> mean=<mean> pages=<median> calls=<median> syscalls=<median>
 *     per value: instructions executed, distinct 4 KiB pages of code they came from, call
 *     instructions (direct and indirect) and system calls. A system call counts as one instruction.
 *
 * Stepped, the thread runs some thousand times slower, so values must come far apart (the
 * benchmark paces them at 10 a second) for each to be taken alone, as at a link's pace.
 *
 * Reading the registers and decoding the instruction at the program counter is per architecture:
 * x86_64 and aarch64. */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAGES 4096

/* The stopped thread's next instruction: where it is, whether it is a system call (and which) or a
 * call. */
struct step {
    uint64_t address;
    int is_syscall, is_call;
    long syscall;
};

#if defined(__x86_64__)
static int read_step(pid_t thread, struct step *step) {
    struct user_regs_struct registers;
    if (ptrace(PTRACE_GETREGS, thread, 0, &registers) != 0) return -1;
    errno = 0;
    long word = ptrace(PTRACE_PEEKTEXT, thread, registers.rip, 0);
    if (errno != 0) return -1;
    unsigned char byte[8];
    memcpy(byte, &word, sizeof byte);
    step->address = registers.rip;
    step->is_syscall = byte[0] == 0x0f && byte[1] == 0x05;
    step->syscall = (long)registers.rax;
    /* call rel32 (e8), or call r/m (ff /2), after a REX prefix if there is one. */
    int at = (byte[0] & 0xf0) == 0x40 ? 1 : 0;
    step->is_call = byte[at] == 0xe8 || (byte[at] == 0xff && ((byte[at + 1] >> 3) & 7) == 2);
    return 0;
}
#elif defined(__aarch64__)
static int read_step(pid_t thread, struct step *step) {
    /* arm64 has no PTRACE_GETREGS: the general registers come as the NT_PRSTATUS register set. */
    struct user_regs_struct registers;
    struct iovec vector = {.iov_base = &registers, .iov_len = sizeof registers};
    if (ptrace(PTRACE_GETREGSET, thread, (void *)NT_PRSTATUS, &vector) != 0) return -1;
    errno = 0;
    long word = ptrace(PTRACE_PEEKTEXT, thread, registers.pc, 0);
    if (errno != 0) return -1;
    uint32_t instruction = (uint32_t)word; /* little-endian: the word's low half is at pc */
    step->address = registers.pc;
    step->is_syscall = instruction == 0xd4000001; /* svc #0 */
    step->syscall = (long)registers.regs[8];      /* the system call's number is in x8 */
    /* bl imm26, or blr xn. */
    step->is_call = (instruction & 0xfc000000) == 0x94000000 || (instruction & 0xfffffc1f) == 0xd63f0000;
    return 0;
}
#else
#error "step-counter decodes x86_64 and aarch64 instructions only"
#endif

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
        fprintf(stderr, "usage: step-counter PID THREAD epoll_pwait|poll SKIP VALUES\n");
        return 2;
    }
    pid_t pid = atoi(argv[1]);
#ifdef SYS_poll
    long poll_call = SYS_poll;
#else
    long poll_call = SYS_ppoll;
#endif
    long boundary;
    if (strcmp(argv[3], "poll") == 0) {
        boundary = poll_call;
    } else if (strcmp(argv[3], "epoll_pwait") == 0) {
        boundary = SYS_epoll_pwait;
    } else {
        fprintf(stderr, "step-counter: SYSCALL is epoll_pwait or poll, not %s\n", argv[3]);
        return 2;
    }
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
        struct step step;
        if (read_step(thread, &step) != 0) break;
        if (step.is_syscall && step.syscall == boundary) {
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
        uint64_t page = step.address >> 12;
        int known = 0;
        for (int i = 0; i < page_count && !known; i++) known = seen_pages[i] == page;
        if (!known && page_count < MAX_PAGES) seen_pages[page_count++] = page;
        syscall_count += step.is_syscall;
        call_count += step.is_call;
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
