/* LD_PRELOAD shim that kills its process (SIGKILL, as `kill -9` would) at
 * the Nth call that changes a file under one directory, so a test can
 * interrupt a program at every such moment and look at what it left.
 *
 *   FLX_CRASH_DIR=/abs/dir  the directory watched (files directly in it, and
 *                           the directory itself: fsync of the directory counts)
 *   FLX_CRASH_AT=N          1-based; without it nothing is killed
 *
 * Counted calls: write() (the Nth writes the first half of its bytes, then
 * the process dies: a file cut off mid-write), fsync(), rename(),
 * renameat(), unlink(), unlinkat() and remove() (the process dies before
 * the call). Writes through stdio from
 * inside libc are not seen; the checkpoint writer uses write() directly. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static long calls;

static int in_dir(const char* path) {
  const char* dir = getenv("FLX_CRASH_DIR");
  if (!dir || !*dir || !path) return 0;
  size_t n = strlen(dir);
  return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static int fd_in_dir(int fd) {
  if (!getenv("FLX_CRASH_AT")) return 0;
  char link[64], path[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n < 0) return 0;
  path[n] = '\0';
  return in_dir(path);
}

static int path_in_dir(const char* p) {
  char path[PATH_MAX];
  return getenv("FLX_CRASH_AT") && realpath(p, path) && in_dir(path);
}

/* Is this the call to die at? */
static int due(void) {
  const char* at = getenv("FLX_CRASH_AT");
  return at && ++calls == atol(at);
}

static void die(void) {
  kill(getpid(), SIGKILL);
  for (;;) pause();
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void* buf, size_t count) {
  if (fd > 2 && fd_in_dir(fd) && due()) {
    REAL(write)(fd, buf, count / 2);
    die();
  }
  return REAL(write)(fd, buf, count);
}

int fsync(int fd) {
  if (fd_in_dir(fd) && due()) die();
  return REAL(fsync)(fd);
}

int rename(const char* from, const char* to) {
  if (path_in_dir(from) && due()) die();
  return REAL(rename)(from, to);
}

/* A name relative to a directory descriptor: in the watched directory when
 * that directory is the watched one. */
static int at_in_dir(int dirfd, const char* name) {
  if (!getenv("FLX_CRASH_AT") || !name) return 0;
  return name[0] == '/' ? path_in_dir(name) : fd_in_dir(dirfd);
}

int renameat(int olddirfd, const char* from, int newdirfd, const char* to) {
  if (at_in_dir(olddirfd, from) && due()) die();
  return REAL(renameat)(olddirfd, from, newdirfd, to);
}

int unlinkat(int dirfd, const char* path, int flags) {
  if (at_in_dir(dirfd, path) && due()) die();
  return REAL(unlinkat)(dirfd, path, flags);
}

int unlink(const char* path) {
  if (path_in_dir(path) && due()) die();
  return REAL(unlink)(path);
}

int remove(const char* path) {
  if (path_in_dir(path) && due()) die();
  return REAL(remove)(path);
}
