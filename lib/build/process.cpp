#include "foundry/build/process.h"

#include "foundry/support/interrupt.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace foundry::build {
namespace {

struct Running {
  pid_t pid = -1;
  int out_fd = -1;
  ProcessResult result;
};

Running start(const std::vector<std::string>& argv, const std::string& cwd) {
  Running r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.result.output = std::string("cannot create a pipe: ") + std::strerror(errno);
    r.result.exit_code = 127;
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The child leads a process group of its own, which an interrupt of foundryc ends as a whole
  // (a compiler driver and the compilers it runs); it starts with no signal held back.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  int rc;
  {
    InterruptsDeferred deferred;  // no interrupt between its start and its registration
    rc = posix_spawnp(&r.pid, args[0], &actions, &attr, args.data(), environ);
    if (rc == 0) register_child_group(r.pid);
  }
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    r.pid = -1;
    r.result.exit_code = 127;
    r.result.output = "cannot run " + argv[0] + ": " + std::strerror(rc);
    return r;
  }
  r.out_fd = fds[0];
  return r;
}

void finish(Running& r) {
  if (r.pid < 0) return;
  int status = 0;
  while (waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {
  }
  unregister_child_group(r.pid);
  r.result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::vector<ProcessResult> run_programs(const std::vector<std::vector<std::string>>& argvs, const std::string& cwd,
                                        const WhileRunning& while_running) {
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  std::vector<Running> running;
  for (const auto& argv : argvs) running.push_back(start(argv, cwd));
  auto report = [&] {
    if (!while_running) return;
    std::vector<bool> still;
    for (const auto& r : running) still.push_back(r.out_fd >= 0);
    while_running(still);
  };
  report();
  // Drain every pipe until all close, so that no child blocks on a full pipe.
  while (true) {
    std::vector<pollfd> fds;
    std::vector<Running*> owners;
    for (auto& r : running)
      if (r.out_fd >= 0) {
        fds.push_back({r.out_fd, POLLIN, 0});
        owners.push_back(&r);
      }
    if (fds.empty()) break;
    int ready = poll(fds.data(), fds.size(), while_running ? 250 : -1);
    if (ready < 0 && errno != EINTR) break;
    if (ready == 0) report();  // nothing to read: a tick
    for (size_t i = 0; ready > 0 && i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        owners[i]->result.output.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(owners[i]->out_fd);
        owners[i]->out_fd = -1;
        owners[i]->result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
        report();
      }
    }
  }
  std::vector<ProcessResult> results;
  for (auto& r : running) {
    finish(r);
    results.push_back(std::move(r.result));
  }
  return results;
}

ProcessResult run_program(const std::vector<std::string>& argv, const std::string& cwd) {
  return run_programs({argv}, cwd).front();
}

}  // namespace foundry::build
