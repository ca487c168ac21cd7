// Cleaning up when foundryc is interrupted (SIGINT, SIGTERM, SIGHUP): the work folder it is
// writing is removed and the compiler processes it started are ended, so that neither a
// half-written OUTDIR.tmp-* folder nor an orphaned compiler outlives it. The handler only makes
// async-signal-safe calls, so the folders and processes to clean up are registered beforehand.
#pragma once
#include <sys/types.h>

#include <csignal>
#include <string>

namespace foundry {

// Installs the handlers: on SIGINT, SIGTERM or SIGHUP the registered process groups get SIGTERM
// and are waited for, the registered folders are removed, and the process then dies of the same
// signal (so that its parent sees why). Call once, from main(); a library user may do without.
void install_interrupt_cleanup();

// A folder removed, recursively, if the process is interrupted while this object lives.
class RemoveOnInterrupt {
 public:
  explicit RemoveOnInterrupt(const std::string& path);
  ~RemoveOnInterrupt();
  RemoveOnInterrupt(const RemoveOnInterrupt&) = delete;
  RemoveOnInterrupt& operator=(const RemoveOnInterrupt&) = delete;

 private:
  int slot_ = -1;  // -1: no free slot (the folder is then left behind on an interrupt)
};

// A child process, leader of its own process group, ended with its group on an interrupt.
// Register it while the interrupt signals are deferred (InterruptsDeferred), between its start
// and the registration, so that no interrupt falls in between.
void register_child_group(pid_t pid);
void unregister_child_group(pid_t pid);

// Holds SIGINT, SIGTERM and SIGHUP back in this thread while it lives (they are delivered when it
// ends): for steps that must not be cut in two, such as swapping the output folder into place.
class InterruptsDeferred {
 public:
  InterruptsDeferred();
  ~InterruptsDeferred();
  InterruptsDeferred(const InterruptsDeferred&) = delete;
  InterruptsDeferred& operator=(const InterruptsDeferred&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace foundry
