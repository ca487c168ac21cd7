// The interrupt handler and what it cleans up. Everything it touches is a fixed-size table of
// atomics and character arrays filled before the signal can arrive; removing a folder uses
// openat/getdents64/unlinkat directly (std::filesystem allocates, which a handler must not).
#include "foundry/support/interrupt.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace foundry {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kMaxFolders = 8;
constexpr int kMaxChildren = 64;

struct FolderSlot {
  enum State { kFree, kClaimed, kArmed };
  std::atomic<int> state{kFree};
  char path[PATH_MAX] = {};
};
FolderSlot g_folders[kMaxFolders];
std::atomic<pid_t> g_children[kMaxChildren];

sigset_t interrupt_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kSignals) sigaddset(&set, s);
  return set;
}

struct Dirent64 {  // the kernel's struct linux_dirent64
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];
};

// Removes `name` (a file, or a folder and everything in it; symbolic links are removed, not
// followed) relative to the open folder `dirfd`.
void remove_tree_at(int dirfd, const char* name, int depth) {
  if (unlinkat(dirfd, name, 0) == 0 || (errno != EISDIR && errno != EPERM) || depth > 32) return;
  int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  // Removing entries while reading the folder may skip some: read it again until it is empty.
  for (int pass = 0; pass < 8 && unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno == ENOTEMPTY; ++pass) {
    lseek(fd, 0, SEEK_SET);
    alignas(8) char buf[2048];
    long n;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
      for (long off = 0; off < n;) {
        const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
        off += d->d_reclen;
        if (std::strcmp(d->d_name, ".") != 0 && std::strcmp(d->d_name, "..") != 0)
          remove_tree_at(fd, d->d_name, depth + 1);
      }
    }
  }
  close(fd);
}

// Ends each registered child's process group: SIGTERM (compilers remove their temporary files),
// then waits for the group to be gone, SIGKILL after about five seconds.
void end_children() {
  for (auto& c : g_children)
    if (pid_t p = c.load(); p > 0) kill(-p, SIGTERM);
  for (auto& c : g_children) {
    pid_t p = c.load();
    if (p <= 0) continue;
    while (waitpid(p, nullptr, 0) < 0 && errno == EINTR) {
    }
    for (int tick = 0; kill(-p, 0) == 0; ++tick) {
      if (tick == 500) kill(-p, SIGKILL);
      if (tick > 600) break;
      timespec ten_ms{0, 10 * 1000 * 1000};
      nanosleep(&ten_ms, nullptr);
    }
  }
}

void on_interrupt(int sig) {
  int saved = errno;
  end_children();
  for (auto& f : g_folders)
    if (f.state.load() == FolderSlot::kArmed) remove_tree_at(AT_FDCWD, f.path, 0);
  errno = saved;
  signal(sig, SIG_DFL);
  raise(sig);  // delivered when the handler returns: the process dies of it
}

}  // namespace

void install_interrupt_cleanup() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sa.sa_mask = interrupt_signals();  // one cleanup at a time
  for (int s : kSignals) {
    struct sigaction old {};
    sigaction(s, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;  // `nohup foundryc ...`: still ignored
    sigaction(s, &sa, nullptr);
  }
}

RemoveOnInterrupt::RemoveOnInterrupt(const std::string& path) {
  if (path.size() >= PATH_MAX) return;
  for (int i = 0; i < kMaxFolders; ++i) {
    FolderSlot& f = g_folders[i];
    int expected = FolderSlot::kFree;
    if (!f.state.compare_exchange_strong(expected, FolderSlot::kClaimed)) continue;
    std::memcpy(f.path, path.c_str(), path.size() + 1);  // before arming: the handler reads it then
    f.state.store(FolderSlot::kArmed);
    slot_ = i;
    return;
  }
}

RemoveOnInterrupt::~RemoveOnInterrupt() {
  if (slot_ >= 0) g_folders[slot_].state.store(FolderSlot::kFree);
}

void register_child_group(pid_t pid) {
  for (auto& c : g_children) {
    pid_t free_slot = 0;
    if (c.compare_exchange_strong(free_slot, pid)) return;
  }
}

void unregister_child_group(pid_t pid) {
  for (auto& c : g_children) {
    pid_t mine = pid;
    if (c.compare_exchange_strong(mine, 0)) return;
  }
}

InterruptsDeferred::InterruptsDeferred() {
  sigset_t set = interrupt_signals();
  pthread_sigmask(SIG_BLOCK, &set, &previous_);
}

InterruptsDeferred::~InterruptsDeferred() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

}  // namespace foundry
