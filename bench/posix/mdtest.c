/*
 * mdtest-lite: an mdtest-like metadata benchmark through any POSIX path
 * (IOR's mdtest is not packaged here). N processes (fork, no MPI) each
 * work in a unique directory DIR/p<rank>; each phase starts on a common
 * barrier and ends when the last process finishes, and its rate is
 * N * M / (that span), as mdtest's "-F -u" (files only, unique dirs).
 *
 *   mdtest -n FILES_PER_PROC -p PROCS -d DIR
 *
 * Phases: create (open O_CREAT|O_EXCL|O_WRONLY + close: empty files),
 * stat, remove (unlink). Prints one JSON line per phase:
 * {"bench":"mdtest","phase":"create","procs":4,"files_per_proc":2000,
 *  "ops":8000,"seconds":..,"ops_per_s":..}
 * Exit status 1 if any operation failed (named on stderr); then no JSON.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { CREATE, STAT, REMOVE, PHASES };
static const char *names[PHASES] = {"create", "stat", "remove"};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Reads exactly one byte (a barrier token); 0 on end of file. */
static int get(int fd) {
    char c;
    for (;;) {
        ssize_t n = read(fd, &c, 1);
        if (n == 1) return 1;
        if (n < 0 && errno == EINTR) continue;
        return 0;
    }
}

static void put(int fd) {
    char c = 'x';
    while (write(fd, &c, 1) < 0 && errno == EINTR) {}
}

/* One process: for each phase, wait for the go, run it, report done. */
static int child(const char *dir, int rank, long files, int go, int done) {
    char path[4096];
    snprintf(path, sizeof path, "%s/p%d", dir, rank);
    if (mkdir(path, 0755) != 0) {
        fprintf(stderr, "mdtest: mkdir %s: %s\n", path, strerror(errno));
        return 1;
    }
    int failed = 0;
    for (int phase = 0; phase < PHASES; phase++) {
        if (!get(go)) return 1;
        for (long i = 0; i < files && !failed; i++) {
            snprintf(path, sizeof path, "%s/p%d/f.%ld", dir, rank, i);
            if (phase == CREATE) {
                int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
                if (fd < 0 || close(fd) != 0) failed = 1;
            } else if (phase == STAT) {
                struct stat st;
                if (stat(path, &st) != 0 || st.st_size != 0) failed = 1;
            } else if (unlink(path) != 0) {
                failed = 1;
            }
            if (failed) fprintf(stderr, "mdtest: %s %s: %s\n", names[phase], path, strerror(errno));
        }
        put(done);
        if (failed) return 1;
    }
    snprintf(path, sizeof path, "%s/p%d", dir, rank);
    if (rmdir(path) != 0) {
        fprintf(stderr, "mdtest: rmdir %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    long files = 1000;
    int procs = 4;
    const char *dir = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "n:p:d:")) != -1) {
        switch (opt) {
        case 'n': files = atol(optarg); break;
        case 'p': procs = atoi(optarg); break;
        case 'd': dir = optarg; break;
        default:
            fprintf(stderr, "usage: mdtest -n FILES_PER_PROC -p PROCS -d DIR\n");
            return 2;
        }
    }
    if (!dir || files < 1 || procs < 1 || procs > 1024) {
        fprintf(stderr, "usage: mdtest -n FILES_PER_PROC -p PROCS -d DIR\n");
        return 2;
    }
    int go[2], done[2];
    if (pipe(go) != 0 || pipe(done) != 0) {
        perror("mdtest: pipe");
        return 1;
    }
    for (int rank = 0; rank < procs; rank++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("mdtest: fork");
            return 1;
        }
        if (pid == 0) {
            close(go[1]);
            close(done[0]);
            _exit(child(dir, rank, files, go[0], done[1]));
        }
    }
    close(go[0]);
    close(done[1]);
    double seconds[PHASES];
    int ok = 1;
    for (int phase = 0; phase < PHASES && ok; phase++) {
        double start = now();
        for (int rank = 0; rank < procs; rank++) put(go[1]);
        for (int rank = 0; rank < procs; rank++) {
            if (!get(done[0])) ok = 0; /* a process died */
        }
        seconds[phase] = now() - start;
    }
    close(go[1]); /* a process still waiting for a go sees end of file */
    for (int rank = 0; rank < procs; rank++) {
        int status;
        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ok = 0;
    }
    if (!ok) {
        fprintf(stderr, "mdtest: a process failed\n");
        return 1;
    }
    long ops = files * procs;
    for (int phase = 0; phase < PHASES; phase++) {
        printf("{\"bench\":\"mdtest\",\"phase\":\"%s\",\"procs\":%d,\"files_per_proc\":%ld,\"ops\":%ld,"
               "\"seconds\":%.6f,\"ops_per_s\":%.1f}\n",
               names[phase], procs, files, ops, seconds[phase], ops / seconds[phase]);
    }
    return 0;
}
