// posix_spawn with output captured in anonymous memory files (memfd), so two
// streams never deadlock on full pipes; the child leads its own process group
// so a timeout kills the compiler driver and everything it started.
#include "compiler/jit/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace kiln::jit {
namespace {

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string ErrnoText(int err) { return std::strerror(err); }

std::string ReadCapture(int fd, size_t max_bytes) {
  std::string out;
  if (lseek(fd, 0, SEEK_SET) < 0) return out;
  char buf[8192];
  while (out.size() < max_bytes) {
    const ssize_t n = read(fd, buf, std::min(sizeof(buf), max_bytes - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

// Waits for `pid`; after `timeout` kills its process group. Returns the raw
// wait status.
int WaitFor(pid_t pid, absl::Duration timeout, bool* timed_out) {
  int status = 0;
  if (timeout == absl::InfiniteDuration()) {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
  }
  const absl::Time deadline = absl::Now() + timeout;
  // A pidfd becomes readable when the process exits, so the wait ends with
  // it (a compile is one of a build's few steps: polling's naps would add
  // up to a noticeable part of a small build). Kernels before 5.3 have
  // none: then poll with growing naps.
#ifdef SYS_pidfd_open
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  const int pidfd = -1;
#endif
  absl::Duration nap = absl::Microseconds(200);
  while (true) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) {
      if (pidfd >= 0) close(pidfd);  // pidfds are close-on-exec
      return status;
    }
    if (absl::Now() >= deadline) {
      *timed_out = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (pidfd >= 0) close(pidfd);
      return status;
    }
    if (pidfd >= 0) {
      pollfd p = {pidfd, POLLIN, 0};
      const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now()) + 1;
      poll(&p, 1, static_cast<int>(std::min<int64_t>(std::max<int64_t>(ms, 1), 1000)));
      continue;
    }
    absl::SleepFor(nap);
    nap = std::min(nap * 2, absl::Milliseconds(20));
  }
}

}  // namespace

absl::StatusOr<std::string> FindProgram(absl::string_view program) {
  if (program.empty()) return absl::InvalidArgumentError("empty program name");
  if (program.find('/') != absl::string_view::npos) {
    std::string path(program);
    if (!IsExecutableFile(path)) {
      return absl::NotFoundError(absl::StrCat("program ", path, " is not an executable file"));
    }
    return path;
  }
  const char* env_path = std::getenv("PATH");
  const std::string search = env_path != nullptr ? env_path : "/usr/local/bin:/usr/bin:/bin";
  for (absl::string_view dir : absl::StrSplit(search, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", program);
    if (IsExecutableFile(candidate)) return candidate;
  }
  return absl::NotFoundError(
      absl::StrCat("program '", program, "' not found on PATH (", search, ")"));
}

absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const ProcessOptions& options) {
  if (argv.empty()) return absl::InvalidArgumentError("RunProcess: empty argv");
  absl::StatusOr<std::string> program = FindProgram(argv[0]);
  if (!program.ok()) return program.status();

  Fd out_fd(memfd_create("kiln_stdout", MFD_CLOEXEC));
  Fd err_fd(options.merge_stderr ? -1 : memfd_create("kiln_stderr", MFD_CLOEXEC));
  if (out_fd.get() < 0 || (!options.merge_stderr && err_fd.get() < 0)) {
    return absl::InternalError(absl::StrCat("memfd_create: ", ErrnoText(errno)));
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t empty_mask, default_signals;
  sigemptyset(&empty_mask);
  posix_spawnattr_setsigmask(&attr, &empty_mask);
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGPIPE);
  sigaddset(&default_signals, SIGINT);
  sigaddset(&default_signals, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  if (!options.working_dir.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, options.working_dir.c_str());
  }
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, options.merge_stderr ? out_fd.get() : err_fd.get(),
                                   2);

  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  pid_t pid = 0;
  const int rc = posix_spawn(&pid, program->c_str(), &actions, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot start ", *program, ": ", ErrnoText(rc)));
  }

  ProcessResult result;
  const int status = WaitFor(pid, options.timeout, &result.timed_out);
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  } else {
    result.exit_code = -1;
  }
  result.stdout_text = ReadCapture(out_fd.get(), options.max_output_bytes);
  if (!options.merge_stderr) {
    result.stderr_text = ReadCapture(err_fd.get(), options.max_output_bytes);
  }
  return result;
}

}  // namespace kiln::jit
