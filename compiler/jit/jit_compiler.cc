// JitCompiler: cache key, cache-entry validation, parallel build with the
// ISA's compiler (posix_spawn, never a shell), atomic publication, dlopen.
#include "compiler/jit/jit_compiler.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "ir/status_macros.h"
#include "compiler/jit/sha256.h"
#include "compiler/jit/subprocess.h"

namespace kiln::jit {
namespace {

// Generated kernels use OpenMP. libgomp's worker threads outlive a parallel
// region, idling in libgomp's own code; if loading a generated library were
// what brought libgomp in, unloading that library would unmap code those
// threads run. Pin libgomp for the life of the process before loading any
// generated library (a no-op when the host already links it).
void PinOpenMpRuntime() {
  static const bool pinned = [] {
    return dlopen("libgomp.so.1", RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE) != nullptr;
  }();
  (void)pinned;
}

// Bump when the key's layout or the build recipe changes meaning.
constexpr absl::string_view kCacheFormat = "kiln-jit-cache v2";
constexpr size_t kMaxNameLength = 128;
constexpr size_t kMaxMessageBytes = 4000;

std::string ErrnoText() { return std::strerror(errno); }

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || s.size() > kMaxNameLength) return false;
  if (!absl::ascii_isalpha(s[0]) && s[0] != '_') return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return absl::ascii_isalnum(c) || c == '_'; });
}

bool IsHeader(const ir::loop::SourceFile& f) { return absl::EndsWith(f.name, ".h"); }

std::string FileName(const ir::loop::SourceFile& f) {
  return IsHeader(f) ? f.name : absl::StrCat(f.name, ".cc");
}

absl::Status ValidateSources(const std::vector<ir::loop::SourceFile>& sources) {
  std::set<std::string> seen;
  int units = 0;
  for (const ir::loop::SourceFile& f : sources) {
    absl::string_view stem = f.name;
    absl::ConsumeSuffix(&stem, ".h");
    if (!IsIdentifier(stem)) {
      return kiln::InternalError("JIT source name '", absl::CEscape(f.name).substr(0, 64),
                                 "' is not a sanitized identifier");
    }
    if (!seen.insert(f.name).second) {
      return kiln::InternalError("JIT source name '", f.name, "' appears twice");
    }
    if (!IsHeader(f)) ++units;
  }
  if (units == 0) return kiln::InternalError("JIT build has no translation unit");
  return absl::OkStatus();
}

std::string Trim(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.size() <= kMaxMessageBytes) return std::string(text);
  return absl::StrCat(text.substr(0, kMaxMessageBytes), "\n... (",
                      text.size() - kMaxMessageBytes, " more bytes)");
}

std::string ShellQuoteForDisplay(const std::vector<std::string>& argv) {
  std::vector<std::string> quoted;
  for (const std::string& a : argv) {
    const bool plain = !a.empty() && std::all_of(a.begin(), a.end(), [](char c) {
      return absl::ascii_isalnum(c) || std::strchr("-_=+./:,@", c) != nullptr;
    });
    if (plain) {
      quoted.push_back(a);
    } else {
      std::string q = "'";
      for (char c : a) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
      quoted.push_back(q + "'");
    }
  }
  return absl::StrJoin(quoted, " ");
}

absl::Status MakeDirs(const std::string& path, mode_t mode) {
  std::string prefix;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    absl::StrAppend(&prefix, "/", part);
    if (mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create directory ", prefix, ": ", ErrnoText()));
    }
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status WriteFile(const std::string& path, absl::string_view contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Size and SHA-256 of a file, streamed.
absl::StatusOr<std::pair<uint64_t, std::string>> FileDigest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  Sha256 h;
  uint64_t size = 0;
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize n = in.gcount();
    if (n <= 0) break;
    h.Update(absl::string_view(buf.data(), static_cast<size_t>(n)));
    size += static_cast<uint64_t>(n);
  }
  if (in.bad()) return absl::InternalError(absl::StrCat("read error on ", path));
  return std::make_pair(size, h.HexDigest());
}

// Removes a flat build directory and its files.
void RemoveTree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") unlink(absl::StrCat(dir, "/", name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

std::string Absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return absl::StrCat(cwd, "/", path);
}

std::string TempRoot() {
  const char* t = std::getenv("TMPDIR");
  return (t != nullptr && t[0] == '/') ? t : "/tmp";
}


// The paths of live RemovedOnSignal objects: fixed slots, so the signal
// handler reads them without allocating. A slot is claimed with a
// compare-and-swap and published once its path is written.
constexpr int kBuildSlots = 64;
constexpr size_t kSlotPath = 4096;
struct BuildSlot {
  std::atomic<int> state{0};  // 0 free, 1 being written, 2 published
  bool is_dir = false;
  char path[kSlotPath] = {};
};
BuildSlot g_build_slots[kBuildSlots];

// Removes the tree under the open directory `fd` (which it closes), at most
// `depth` levels deep, with system calls only (getdents64, openat,
// unlinkat): async-signal-safe. Symbolic links are removed, not followed.
void RemoveContentsRaw(int fd, int depth) {
  alignas(8) char buf[4096];
  for (;;) {
    const long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name.
      unsigned short reclen;
      std::memcpy(&reclen, buf + off + 16, sizeof(reclen));
      const unsigned char type = static_cast<unsigned char>(buf[off + 18]);
      const char* name = buf + off + 19;
      off += reclen;
      if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
      if (type == DT_DIR && depth > 0) {
        const int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (sub >= 0) RemoveContentsRaw(sub, depth - 1);
        unlinkat(fd, name, AT_REMOVEDIR);
      } else {
        unlinkat(fd, name, 0);
      }
    }
  }
  close(fd);
}

void RemoveTreeRaw(const char* dir) {
  const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  RemoveContentsRaw(fd, /*depth=*/8);
  rmdir(dir);
}

}  // namespace

RemovedOnSignal::RemovedOnSignal(const std::string& path, bool is_dir) {
  if (path.size() >= kSlotPath) return;
  for (int i = 0; i < kBuildSlots; ++i) {
    int expected = 0;
    if (!g_build_slots[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(g_build_slots[i].path, path.c_str(), path.size() + 1);
    g_build_slots[i].is_dir = is_dir;
    g_build_slots[i].state.store(2);
    slot_ = i;
    return;
  }
}

RemovedOnSignal::~RemovedOnSignal() {
  if (slot_ >= 0) g_build_slots[slot_].state.store(0);
}

void RemoveBuildsInProgress() {
  for (BuildSlot& slot : g_build_slots) {
    if (slot.state.load() != 2) continue;
    if (slot.is_dir) {
      RemoveTreeRaw(slot.path);
    } else {
      unlink(slot.path);
    }
  }
}

int SweepStaleBuildDirs(const std::string& temp_root, const std::string& cache_dir,
                        absl::Duration age) {
  const time_t cutoff = absl::ToTimeT(absl::Now() - age);
  int removed = 0;
  auto stale = [&](const std::string& path, bool want_dir) {
    struct stat st;
    return lstat(path.c_str(), &st) == 0 && st.st_uid == geteuid() &&
           (want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) && st.st_mtime < cutoff;
  };
  auto scan = [&](const std::string& dir, auto&& match, bool want_dir) {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return;
    std::vector<std::string> doomed;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      const std::string path = absl::StrCat(dir, "/", name);
      if (match(name) && stale(path, want_dir)) doomed.push_back(path);
    }
    closedir(d);
    for (const std::string& path : doomed) {
      if (want_dir) {
        RemoveTreeRaw(path.c_str());
      } else {
        unlink(path.c_str());
      }
      ++removed;
    }
  };
  scan(temp_root, [](const std::string& n) { return absl::StartsWith(n, "kiln_jit_"); }, true);
  // <hash>.tmp.<pid>.<n>.so / .exe: an artifact not yet renamed into place.
  scan(cache_dir, [](const std::string& n) { return absl::StrContains(n, ".tmp."); }, false);
  return removed;
}

namespace {

// This process's private cache for when the configured one is not writable:
// made once (mkdtemp, 0700, under $TMPDIR) and removed at exit and on the
// signals kilnc handles (RemoveBuildsInProgress). A loaded library stays
// mapped after its file is removed.
std::string* g_fallback_cache = nullptr;

void RemoveFallbackCache() {
  if (g_fallback_cache != nullptr) RemoveTreeRaw(g_fallback_cache->c_str());
}

absl::StatusOr<std::string> PrivateFallbackCache() {
  // std::mutex, not absl::Mutex: TSan sees it (docs/decisions/0057).
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (g_fallback_cache == nullptr) {
    std::string made = absl::StrCat(TempRoot(), "/kiln-cache-", getuid(), "-XXXXXX");
    if (mkdtemp(made.data()) == nullptr) {
      return absl::PermissionDeniedError(absl::StrCat(
          "the JIT cache is not writable and no private cache could be made in ", TempRoot()));
    }
    g_fallback_cache = new std::string(made);
    new RemovedOnSignal(made, /*is_dir=*/true);  // for the life of the process
    std::atexit(RemoveFallbackCache);
  }
  return *g_fallback_cache;
}

// `cxx --version`'s first line, once per compiler per process.
absl::StatusOr<std::string> CompilerVersion(const std::string& compiler_path) {
  static std::mutex mu;
  static auto* versions = new std::map<std::string, std::string>;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = versions->find(compiler_path);
    if (it != versions->end()) return it->second;
  }
  ProcessOptions opts;
  opts.merge_stderr = true;
  opts.timeout = absl::Seconds(60);
  KILN_ASSIGN_OR_RETURN(ProcessResult r, RunProcess({compiler_path, "--version"}, opts));
  if (r.exit_code != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        compiler_path, " --version exited with ", r.exit_code, ": ", Trim(r.stdout_text)));
  }
  std::string first(absl::StripAsciiWhitespace(
      absl::string_view(r.stdout_text).substr(0, r.stdout_text.find('\n'))));
  std::lock_guard<std::mutex> lock(mu);
  versions->emplace(compiler_path, first);
  return first;
}

// Holds an exclusive flock on <cache>/<hash>.lock for the scope, so builds of
// one entry in several threads or processes happen once. flock belongs to the
// open file description, so two threads of one process exclude each other too.
// Without a lock (a filesystem without flock) correctness still rests on the
// atomic rename; only duplicate work is lost.
class EntryLock {
 public:
  explicit EntryLock(const std::string& path)
      : fd_(open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600)) {
    if (fd_ >= 0) {
      while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  ~EntryLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;

 private:
  int fd_;
};

std::string MetaText(absl::string_view hash, absl::string_view kind, uint64_t size,
                     absl::string_view sha) {
  return absl::StrCat(kCacheFormat, "\nhash ", hash, "\nkind ", kind, "\nsize ", size,
                      "\nsha256 ", sha, "\n");
}

// Empty when the entry is complete and intact; else why it is not. `*absent`
// is set when neither file exists (a plain miss, nothing to evict).
std::string CheckEntry(const std::string& artifact, const std::string& meta,
                       absl::string_view hash, absl::string_view kind, bool* absent) {
  struct stat st;
  const bool have_artifact = stat(artifact.c_str(), &st) == 0;
  absl::StatusOr<std::string> meta_text = ReadFile(meta);
  *absent = !have_artifact && !meta_text.ok();
  if (*absent) return "absent";
  if (!have_artifact) return "the cached binary is missing";
  if (!meta_text.ok()) return "the .meta file is missing";
  absl::StatusOr<std::pair<uint64_t, std::string>> digest = FileDigest(artifact);
  if (!digest.ok()) return std::string(digest.status().message());
  if (*meta_text != MetaText(hash, kind, digest->first, digest->second)) {
    return absl::StrCat("size or checksum differs from the .meta record (file has ",
                        digest->first, " bytes)");
  }
  return "";
}

// Highway's headers take most of a generated unit's compile time;
// precompiled once, a unit including them costs a small fraction of it
// (docs/decisions/0052-jit-cold-compile.md). Generated units include these
// themselves, so the header only changes where their text is parsed, never
// what it means. Every header a generated unit includes is one of these or
// included by them: their contents key the cache (PreludeHeaders).
constexpr absl::string_view kPchName = "kiln_jit_pch.h";
constexpr absl::string_view kPchText =
    "// kiln JIT precompiled header (compiler/jit). DO NOT EDIT.\n"
    "#include <stddef.h>\n#include <stdint.h>\n#include <string.h>\n"
    "#include <algorithm>\n#include <cmath>\n#include <limits>\n"
    "#include <type_traits>\n"
    "#include \"hwy/highway.h\"\n#include \"hwy/contrib/math/math-inl.h\"\n";

bool UsesHighway(const ir::loop::SourceFile& f) {
  return !IsHeader(f) && absl::StrContains(f.text, "#include \"hwy/highway.h\"");
}

// A field-separated SHA-256: each field length-prefixed, so no two different
// field lists hash the same bytes.
class KeyHash {
 public:
  void Add(absl::string_view field) {
    h_.Update(absl::StrCat(field.size(), ":"));
    h_.Update(field);
  }
  std::string Hex() const { return h_.HexDigest(); }

 private:
  Sha256 h_;
};

// What identifies a file's version without reading it: replacing or
// rewriting a file changes its ctime, which no user call can set back.
std::string StatStamp(const struct stat& st) {
  return absl::StrCat(st.st_size, " ", st.st_ino, " ", st.st_mtim.tv_sec, ".",
                      st.st_mtim.tv_nsec, " ", st.st_ctim.tv_sec, ".", st.st_ctim.tv_nsec);
}

// The files of a `cxx -M` rule, in order, without the target and `source`.
std::vector<std::string> DependencyFiles(absl::string_view rule, absl::string_view source) {
  std::vector<std::string> files;
  const std::string joined = absl::StrReplaceAll(rule, {{"\\\n", " "}});
  bool target = true;
  for (absl::string_view token : absl::StrSplit(joined, absl::ByAnyChar(" \t\n"),
                                                absl::SkipEmpty())) {
    if (target) {
      target = !absl::EndsWith(token, ":");
      continue;
    }
    if (token == source) continue;
    if (std::find(files.begin(), files.end(), token) == files.end()) {
      files.emplace_back(token);
    }
  }
  return files;
}

// The contents of every header generated code can include (kPchText and all
// it pulls in, as `cxx -M` with `flags` lists them), as one SHA-256: a field
// of every cache key, since the binaries depend on those headers as much as
// on the sources. The list, each file's stamp and its SHA-256 are recorded
// in <dir>/headers-<key>; while every stamp still matches, only stats are
// made. `*scanned` is set when the headers had to be listed and read again.
// Never an error: headers that cannot be listed give a fingerprint that
// says why (and a build that will report its own error).
std::string PreludeHeaders(const std::string& dir, const std::string& compiler,
                           absl::string_view version, const std::vector<std::string>& flags,
                           const ProcessOptions& base, bool* scanned) {
  *scanned = false;
  KeyHash key;
  key.Add(kCacheFormat);
  key.Add("headers");
  key.Add(compiler);
  key.Add(version);
  for (const std::string& f : flags) {
    if (f != "-shared") key.Add(f);
  }
  key.Add(kPchText);
  const std::string record = absl::StrCat(dir, "/headers-", key.Hex());
  const std::string header_line = absl::StrCat(kCacheFormat, " headers");

  // Lines "<sha256> <stamp> \t<path>"; the fingerprint hashes sha and path.
  auto fingerprint_of = [](const std::vector<std::pair<std::string, std::string>>& files) {
    KeyHash h;
    h.Add(absl::StrCat(files.size()));
    for (const auto& [sha, path] : files) {
      h.Add(path);
      h.Add(sha);
    }
    return h.Hex();
  };
  if (absl::StatusOr<std::string> text = ReadFile(record); text.ok()) {
    std::vector<absl::string_view> lines = absl::StrSplit(*text, '\n', absl::SkipEmpty());
    std::vector<std::pair<std::string, std::string>> files;
    bool current = !lines.empty() && lines[0] == header_line;
    for (size_t i = 1; current && i < lines.size(); ++i) {
      std::vector<absl::string_view> parts = absl::StrSplit(lines[i], absl::MaxSplits('\t', 1));
      struct stat st;
      current = parts.size() == 2 && parts[0].size() > 65 &&
                stat(std::string(parts[1]).c_str(), &st) == 0 &&
                parts[0].substr(65) == absl::StrCat(StatStamp(st), " ");
      if (current) files.emplace_back(std::string(parts[0].substr(0, 64)), std::string(parts[1]));
    }
    if (current && !files.empty()) return fingerprint_of(files);
  }

  *scanned = true;
  // The listing compiles a copy of the header: in `dir` when it can be
  // written (the record goes there too), else in $TMPDIR.
  const bool writable = MakeDirs(dir, 0700).ok() && access(dir.c_str(), W_OK) == 0;
  const std::string scan_dir = writable ? dir : TempRoot();
  std::string source_path = absl::StrCat(scan_dir, "/kiln_headers_XXXXXX.h");
  const int fd = mkstemps(source_path.data(), 2);
  if (fd < 0) return absl::StrCat("unlisted: cannot write in ", scan_dir);
  const RemovedOnSignal source_in_progress(source_path, /*is_dir=*/false);
  const bool wrote = write(fd, kPchText.data(), kPchText.size()) ==
                     static_cast<ssize_t>(kPchText.size());
  close(fd);
  const std::string source = source_path.substr(scan_dir.size() + 1);
  std::vector<std::string> cmd = {compiler};
  for (const std::string& f : flags) {
    if (f != "-shared") cmd.push_back(f);
  }
  cmd.insert(cmd.end(), {"-M", "-x", "c++-header", source});
  ProcessOptions popts = base;
  popts.working_dir = scan_dir;
  popts.merge_stderr = false;
  popts.max_output_bytes = 1 << 20;
  absl::StatusOr<ProcessResult> r =
      wrote ? RunProcess(cmd, popts) : absl::InternalError("short write");
  unlink(source_path.c_str());
  if (!r.ok() || r->exit_code != 0 || r->timed_out) {
    return absl::StrCat("unlisted: ", r.ok() ? Trim(r->stderr_text) : r.status().ToString());
  }
  std::vector<std::pair<std::string, std::string>> files;
  std::string text = absl::StrCat(header_line, "\n");
  bool recent = false;
  for (const std::string& path : DependencyFiles(r->stdout_text, source)) {
    const std::string full = path[0] == '/' ? path : absl::StrCat(scan_dir, "/", path);
    struct stat st;
    if (stat(full.c_str(), &st) != 0) return absl::StrCat("unlisted: cannot stat ", full);
    absl::StatusOr<std::pair<uint64_t, std::string>> digest = FileDigest(full);
    if (!digest.ok()) return absl::StrCat("unlisted: ", digest.status().message());
    absl::StrAppend(&text, digest->second, " ", StatStamp(st), " \t", full, "\n");
    files.emplace_back(digest->second, full);
    // A file changed within the timestamps' resolution of now could change
    // again without changing its stamp: such a list is not recorded.
    recent = recent || std::max(st.st_mtim.tv_sec, st.st_ctim.tv_sec) + 2 >= time(nullptr);
  }
  if (files.empty()) return "unlisted: the compiler listed no header";
  // A missing or stale record only costs a rescan, so a failed write is not
  // an error.
  if (writable && !recent) {
    static std::atomic<uint64_t> counter{0};
    const std::string temp = absl::StrCat(record, ".tmp.", getpid(), ".", counter++);
    if (!WriteFile(temp, text).ok() || rename(temp.c_str(), record.c_str()) != 0) {
      unlink(temp.c_str());
    }
  }
  return fingerprint_of(files);
}

std::string PchMetaText(absl::string_view hash, uint64_t size) {
  return absl::StrCat(kCacheFormat, "\nhash ", hash, "\nkind pch\nsize ", size, "\n");
}

// True when <dir>/kiln_jit_pch.h.gch is complete (its .meta, written after
// it, records its size). GCC checks that it was made by this compiler with
// compatible flags (-Winvalid-pch says when it is not used); the key of
// `dir` covers the headers' contents, which GCC does not check.
bool PchReady(const std::string& dir, absl::string_view hash) {
  struct stat st;
  const std::string gch = absl::StrCat(dir, "/", kPchName, ".gch");
  if (stat(gch.c_str(), &st) != 0) return false;
  absl::StatusOr<std::string> meta = ReadFile(absl::StrCat(dir, "/meta"));
  return meta.ok() && *meta == PchMetaText(hash, static_cast<uint64_t>(st.st_size));
}

// True when making or using the header in `dir` failed within the last day
// (<dir>/failed says how): it is not tried again before. A failure that
// passes (memory, disk space) costs a day without the header, not forever.
bool PchFailed(const std::string& dir) {
  struct stat st;
  return stat(absl::StrCat(dir, "/failed").c_str(), &st) == 0 &&
         st.st_mtime + 24 * 3600 > time(nullptr);
}

// Builds the precompiled header into `dir` unless another builder holds its
// lock (then this build simply goes without). True when it is ready.
bool BuildPch(const std::string& dir, absl::string_view hash, const std::string& compiler,
              const std::vector<std::string>& flags, const ProcessOptions& base) {
  if (!MakeDirs(dir, 0700).ok()) return false;
  const int fd = open(absl::StrCat(dir, "/lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) return false;
  if (PchReady(dir, hash)) return true;
  const std::string header = absl::StrCat(dir, "/", kPchName);
  const std::string suffix = absl::StrCat(".tmp.", getpid());
  const std::string gch = absl::StrCat(header, ".gch");
  const std::string meta = absl::StrCat(dir, "/meta");
  unlink(meta.c_str());
  if (!WriteFile(header + suffix, kPchText).ok() ||
      rename((header + suffix).c_str(), header.c_str()) != 0) {
    return false;
  }
  std::vector<std::string> cmd = {compiler};
  for (const std::string& f : flags) {
    if (f != "-shared") cmd.push_back(f);
  }
  cmd.insert(cmd.end(), {"-x", "c++-header", header, "-o", gch + suffix});
  ProcessOptions popts = base;
  popts.working_dir = dir;
  const RemovedOnSignal gch_in_progress(gch + suffix, /*is_dir=*/false);
  absl::StatusOr<ProcessResult> r = RunProcess(cmd, popts);
  struct stat st;
  if (!r.ok() || r->exit_code != 0 || r->timed_out ||
      stat((gch + suffix).c_str(), &st) != 0 ||
      rename((gch + suffix).c_str(), gch.c_str()) != 0) {
    unlink((gch + suffix).c_str());
    // A compiler that refuses the header will refuse it again: record that,
    // so later builds do not pay for the attempt. A timeout or a failure to
    // start may be passing, so it is not recorded.
    if (r.ok() && r->exit_code != 0 && !r->timed_out) {
      if (WriteFile(absl::StrCat(dir, "/failed", suffix), Trim(r->stdout_text)).ok()) {
        rename(absl::StrCat(dir, "/failed", suffix).c_str(), absl::StrCat(dir, "/failed").c_str());
      }
    }
    return false;
  }
  if (!WriteFile(meta + suffix, PchMetaText(hash, static_cast<uint64_t>(st.st_size))).ok() ||
      rename((meta + suffix).c_str(), meta.c_str()) != 0) {
    return false;
  }
  unlink(absl::StrCat(dir, "/failed").c_str());  // an expired record
  return true;
}

// Forgets a precompiled header a unit failed against or GCC did not use.
// One made by this very build (`fresh`) would fail the same way when made
// again, so that is recorded (PchFailed); an older one may have been
// damaged since, so the next build makes it again.
void DiscardPch(const std::string& dir, bool fresh) {
  unlink(absl::StrCat(dir, "/meta").c_str());
  unlink(absl::StrCat(dir, "/", kPchName, ".gch").c_str());
  if (fresh) {
    const std::string temp = absl::StrCat(dir, "/failed.tmp.", getpid());
    if (WriteFile(temp, "units did not build against the header just made\n").ok()) {
      rename(temp.c_str(), absl::StrCat(dir, "/failed").c_str());
    }
  }
}

// GCC's -Winvalid-pch warning: the precompiled header was found but not
// used (the unit was compiled from the plain header, correctly but slowly).
bool PchRejected(const absl::StatusOr<ProcessResult>& r) {
  return r.ok() && absl::StrContains(r->stdout_text, "[-Winvalid-pch]");
}

}  // namespace

std::string DefaultCacheDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return absl::StrCat(xdg, "/kiln");
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/') return absl::StrCat(home, "/.cache/kiln");
  return absl::StrCat(TempRoot(), "/kiln-cache-", getuid());
}

LoadedLibrary::LoadedLibrary(void* handle, CompileStats stats)
    : handle_(handle), stats_(std::move(stats)) {}

LoadedLibrary::~LoadedLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

absl::StatusOr<void*> LoadedLibrary::Symbol(absl::string_view name) const {
  const std::string n(name);
  dlerror();
  void* sym = dlsym(handle_, n.c_str());
  if (sym == nullptr) {
    const char* err = dlerror();
    return absl::NotFoundError(absl::StrCat("JIT library ", stats_.path, " has no symbol '",
                                            n, "'", err ? absl::StrCat(": ", err) : ""));
  }
  return sym;
}

struct JitCompiler::Entry {
  std::string path;
  void* handle = nullptr;  // kSharedLibrary only
  CompileStats stats;
};

JitCompiler::JitCompiler(JitOptions options)
    : options_(std::move(options)),
      isa_(options_.isa != nullptr ? options_.isa : isa::BestHostIsa()),
      cache_dir_(Absolute(options_.cache_dir.empty() ? DefaultCacheDir()
                                                      : options_.cache_dir)) {
  for (std::string& dir : options_.include_dirs) dir = Absolute(dir);
  options_.keep_source_dir = Absolute(options_.keep_source_dir);
  options_.temp_dir = Absolute(options_.temp_dir);
}

absl::StatusOr<std::shared_ptr<LoadedLibrary>> JitCompiler::Compile(
    std::vector<ir::loop::SourceFile> sources) {
  if (isa_ == nullptr) return absl::FailedPreconditionError("no VecISA module is linked in");
  if (!isa_->emulator.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ISA '", isa_->name, "' code runs only under its emulator (", isa_->emulator,
        "): it cannot be loaded into this process; use CompileExecutable and "
        "RunExecutable"));
  }
  if (isa_->host_supports == nullptr || !isa_->host_supports()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this CPU does not support ISA '", isa_->name, "': loading its code would fault"));
  }
  KILN_ASSIGN_OR_RETURN(Entry entry, Build(Kind::kSharedLibrary, sources));
  return std::make_shared<LoadedLibrary>(entry.handle, std::move(entry.stats));
}

absl::StatusOr<std::string> JitCompiler::CompileExecutable(std::vector<ir::loop::SourceFile> sources,
                                                           CompileStats* stats) {
  if (isa_ == nullptr) return absl::FailedPreconditionError("no VecISA module is linked in");
  KILN_ASSIGN_OR_RETURN(Entry entry, Build(Kind::kExecutable, sources));
  if (stats != nullptr) *stats = entry.stats;
  return entry.path;
}

absl::StatusOr<RunResult> JitCompiler::RunExecutable(const std::string& path,
                                                     const std::vector<std::string>& args) {
  if (isa_ == nullptr) return absl::FailedPreconditionError("no VecISA module is linked in");
  std::vector<std::string> argv =
      absl::StrSplit(isa_->emulator, ' ', absl::SkipWhitespace());
  if (argv.empty() && (isa_->host_supports == nullptr || !isa_->host_supports())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this CPU does not support ISA '", isa_->name, "' and it has no emulator"));
  }
  argv.push_back(Absolute(path));
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions opts;
  opts.timeout = options_.run_timeout;
  KILN_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(argv, opts));
  if (r.timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(
        ShellQuoteForDisplay(argv), " did not finish within ",
        absl::FormatDuration(options_.run_timeout)));
  }
  return RunResult{r.exit_code, std::move(r.stdout_text), std::move(r.stderr_text)};
}

absl::StatusOr<JitCompiler::Entry> JitCompiler::Build(Kind kind,
                                                      const std::vector<ir::loop::SourceFile>& sources) {
  const absl::Time start = absl::Now();
  KILN_RETURN_IF_ERROR(ValidateSources(sources));
  const std::string& cxx = options_.compiler.empty() ? isa_->cxx : options_.compiler;
  absl::StatusOr<std::string> compiler = FindProgram(cxx);
  if (!compiler.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the C++ compiler for ISA '", isa_->name, "' is unavailable: ",
        compiler.status().message()));
  }
  KILN_ASSIGN_OR_RETURN(std::string version, CompilerVersion(*compiler));

  const bool shared = kind == Kind::kSharedLibrary;
  const absl::string_view kind_name = shared ? "so" : "exe";
  // Flags for both compiling and linking, in command-line order.
  std::vector<std::string> flags = isa_->cxx_flags;
  for (const std::string& f : options_.optimization_flags) {
    if (shared || f != "-shared") flags.push_back(f);
  }
  flags.insert(flags.end(), options_.extra_flags.begin(), options_.extra_flags.end());
  for (const std::string& dir : options_.include_dirs) flags.push_back("-I" + dir);

  ProcessOptions popts;
  popts.merge_stderr = true;
  popts.timeout = options_.compile_timeout;
  popts.max_output_bytes = 64 * 1024;

  // The headers generated code includes, by content: a field of the key,
  // since a new Highway changes the binaries as surely as new sources do.
  const std::string pch_root =
      options_.precompiled_header_dir.empty() ? cache_dir_ : options_.precompiled_header_dir;
  const absl::Time t_headers = absl::Now();
  bool scanned_headers = false;
  const std::string headers =
      PreludeHeaders(pch_root, *compiler, version, flags, popts, &scanned_headers);

  KeyHash key;
  key.Add(kCacheFormat);
  key.Add(kind_name);
  key.Add(isa_->name);
  key.Add(*compiler);
  key.Add(version);
  key.Add(headers);
  key.Add(absl::StrCat(flags.size()));
  for (const std::string& f : flags) key.Add(f);
  key.Add(absl::StrCat(options_.link_flags.size()));
  for (const std::string& f : options_.link_flags) key.Add(f);
  key.Add(absl::StrCat(sources.size()));
  for (const ir::loop::SourceFile& f : sources) {
    key.Add(f.name);
    key.Add(f.text);
  }

  Entry entry;
  CompileStats& stats = entry.stats;
  stats.hash = key.Hex();
  if (scanned_headers) stats.header_scan_time = absl::Now() - t_headers;
  stats.translation_units = static_cast<int>(
      std::count_if(sources.begin(), sources.end(), [](const ir::loop::SourceFile& f) { return !IsHeader(f); }));
  // A cache this process cannot write (read-only, another user's) still
  // serves its intact entries; a miss builds into a private temporary cache
  // instead, and says so, rather than failing in the C++ compiler.
  std::string cache = cache_dir_;
  if (!MakeDirs(cache_dir_, 0700).ok() || access(cache_dir_.c_str(), W_OK) != 0) {
    const std::string why = ErrnoText();
    const std::string primary = absl::StrCat(cache_dir_, "/", stats.hash);
    bool primary_absent = false;
    if (!CheckEntry(absl::StrCat(primary, shared ? ".so" : ".exe"), primary + ".meta", stats.hash,
                    kind_name, &primary_absent)
             .empty()) {
      KILN_ASSIGN_OR_RETURN(cache, PrivateFallbackCache());
      stats.cache_note = absl::StrCat("JIT cache '", cache_dir_, "' is not writable (", why,
                                      "); built in the private temporary cache '", cache, "'");
    }
  }
  const std::string base = absl::StrCat(cache, "/", stats.hash);
  entry.path = stats.path = absl::StrCat(base, shared ? ".so" : ".exe");
  const std::string meta = base + ".meta";

  KILN_RETURN_IF_ERROR(MakeDirs(cache, 0700));
  EntryLock lock(base + ".lock");

  bool absent = false;
  std::string problem = CheckEntry(entry.path, meta, stats.hash, kind_name, &absent);
  if (problem.empty() && shared) {
    PinOpenMpRuntime();
    entry.handle = dlopen(entry.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (entry.handle == nullptr) {
      const char* err = dlerror();
      problem = absl::StrCat("dlopen failed: ", err ? err : "unknown error");
    }
  }
  if (problem.empty()) {
    stats.cache_hit = true;
    stats.wall_time = absl::Now() - start;
    return entry;
  }
  if (!absent) {
    stats.evicted_reason = problem;
    unlink(meta.c_str());
    unlink(entry.path.c_str());
  }

  // Build in a private directory; compile with it as the working directory
  // and relative file names, so the objects do not depend on where it was.
  const std::string temp_root =
      options_.temp_dir.empty() ? absl::StrCat(cache, "/tmp") : options_.temp_dir;
  KILN_RETURN_IF_ERROR(MakeDirs(temp_root, 0700));
  static std::once_flag swept;  // once per process: leftovers of killed runs
  std::call_once(swept, [&] { SweepStaleBuildDirs(temp_root, cache, absl::Hours(24)); });
  std::string build_dir = absl::StrCat(temp_root, "/kiln_jit_XXXXXX");
  if (mkdtemp(build_dir.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp in ", temp_root, ": ", ErrnoText()));
  }
  const RemovedOnSignal build_dir_in_progress(build_dir, /*is_dir=*/true);
  for (const ir::loop::SourceFile& f : sources) {
    KILN_RETURN_IF_ERROR(WriteFile(absl::StrCat(build_dir, "/", FileName(f)), f.text));
  }
  static std::atomic<uint64_t> counter{0};
  const std::string temp_artifact = absl::StrCat(base, ".tmp.", getpid(), ".", counter++,
                                                 shared ? ".so" : ".exe");
  const RemovedOnSignal artifact_in_progress(temp_artifact, /*is_dir=*/false);

  // Units, compiled in parallel (a lone unit is compiled by the link command).
  std::vector<const ir::loop::SourceFile*> units;
  std::vector<std::string> link_cmd = {*compiler};
  link_cmd.insert(link_cmd.end(), flags.begin(), flags.end());
  for (const ir::loop::SourceFile& f : sources) {
    if (IsHeader(f)) continue;
    if (stats.translation_units == 1) {
      link_cmd.push_back(FileName(f));
      continue;
    }
    units.push_back(&f);
    link_cmd.push_back(f.name + ".o");
  }
  link_cmd.insert(link_cmd.end(), {"-o", temp_artifact});
  link_cmd.insert(link_cmd.end(), options_.link_flags.begin(), options_.link_flags.end());

  popts.working_dir = build_dir;

  // The precompiled header: its own cache entry, keyed like a library.
  const int highway_units = static_cast<int>(
      std::count_if(sources.begin(), sources.end(), UsesHighway));
  std::string pch_dir;
  std::atomic<bool> pch_ready{false};
  bool build_pch = false;
  std::function<void()> pch_build;
  if (options_.precompiled_header && highway_units > 0 &&
      !absl::StartsWith(headers, "unlisted")) {
    KeyHash pch_key;
    pch_key.Add(kCacheFormat);
    pch_key.Add("pch");
    pch_key.Add(isa_->name);
    pch_key.Add(*compiler);
    pch_key.Add(version);
    pch_key.Add(headers);
    for (const std::string& f : flags) {
      if (f != "-shared") pch_key.Add(f);
    }
    pch_key.Add(kPchText);
    const std::string pch_hash = pch_key.Hex();
    pch_dir = absl::StrCat(pch_root, "/pch-", pch_hash);
    pch_ready = PchReady(pch_dir, pch_hash);
    build_pch = !pch_ready && highway_units >= options_.precompiled_header_min_units &&
                !PchFailed(pch_dir);
    if (build_pch) {
      // Built while the other workers start on units without it.
      const std::string dir = pch_dir, hash = pch_hash, cxx_path = *compiler;
      const std::vector<std::string> pch_flags = flags;
      pch_build = [dir, hash, cxx_path, pch_flags, popts, &pch_ready, &stats] {
        const absl::Time t = absl::Now();
        if (BuildPch(dir, hash, cxx_path, pch_flags, popts)) pch_ready = true;
        stats.precompiled_header_time = absl::Now() - t;
      };
    }
  }
  const std::string pch_header = absl::StrCat(pch_dir, "/", kPchName);
  auto unit_cmd = [&](const ir::loop::SourceFile& f, bool with_pch) {
    std::vector<std::string> cmd = {*compiler};
    cmd.insert(cmd.end(), flags.begin(), flags.end());
    if (with_pch) cmd.insert(cmd.end(), {"-Winvalid-pch", "-include", pch_header});
    cmd.insert(cmd.end(), {"-c", FileName(f), "-o", f.name + ".o"});
    return cmd;
  };

  std::vector<std::vector<std::string>> compile_cmds(units.size());
  // One byte per unit, not std::vector<bool>: worker threads set their own
  // unit's flag, and packed bits would share words between them.
  std::vector<char> used_pch(units.size(), 0);
  std::vector<absl::StatusOr<ProcessResult>> results(
      units.size(), absl::UnknownError("not run"));
  {
    const size_t tasks = units.size() + (build_pch ? 1 : 0);
    const size_t workers =
        std::min<size_t>(tasks, std::max(1u, std::thread::hardware_concurrency()));
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (size_t w = 0; w < workers; ++w) {
      pool.emplace_back([&] {
        for (size_t t = next++; t < tasks; t = next++) {
          if (build_pch && t == 0) {
            pch_build();
            continue;
          }
          const size_t i = t - (build_pch ? 1 : 0);
          used_pch[i] = pch_ready && UsesHighway(*units[i]) ? 1 : 0;
          compile_cmds[i] = unit_cmd(*units[i], used_pch[i]);
          results[i] = RunProcess(compile_cmds[i], popts);
        }
      });
    }
    for (std::thread& t : pool) t.join();
  }
  auto failed_result = [](const absl::StatusOr<ProcessResult>& r) {
    return !r.ok() || r->exit_code != 0 || r->timed_out;
  };
  // A unit that failed against the precompiled header gets a plain compile;
  // if that works, the header was at fault and is discarded. A unit GCC
  // compiled without it (from the plain header) is built, and the header is
  // discarded too, to be made again by the next build.
  bool discard_pch = false;
  for (size_t i = 0; i < units.size(); ++i) {
    if (used_pch[i] && !failed_result(results[i]) && PchRejected(results[i])) {
      used_pch[i] = 0;
      discard_pch = true;
    }
    if (!used_pch[i] || !failed_result(results[i])) continue;
    compile_cmds[i] = unit_cmd(*units[i], false);
    used_pch[i] = 0;
    results[i] = RunProcess(compile_cmds[i], popts);
    discard_pch = discard_pch || !failed_result(results[i]);
  }
  const std::vector<std::string>* failed_cmd = nullptr;
  absl::StatusOr<ProcessResult> failed = absl::UnknownError("not run");
  for (size_t i = 0; i < results.size() && failed_cmd == nullptr; ++i) {
    if (failed_result(results[i])) {
      failed_cmd = &compile_cmds[i];
      failed = std::move(results[i]);
    }
  }
  stats.precompiled_header_units =
      static_cast<int>(std::count(used_pch.begin(), used_pch.end(), 1));
  if (failed_cmd == nullptr) {
    // A lone unit is compiled here: against the header when it is ready.
    std::vector<std::string> lone_cmd = link_cmd;
    const bool lone_pch = stats.translation_units == 1 && pch_ready && highway_units == 1;
    if (lone_pch) {
      lone_cmd.insert(lone_cmd.begin() + 1 + flags.size(),
                      {"-Winvalid-pch", "-include", pch_header});
    }
    absl::StatusOr<ProcessResult> linked = RunProcess(lone_pch ? lone_cmd : link_cmd, popts);
    if (lone_pch && failed_result(linked)) {
      linked = RunProcess(link_cmd, popts);
      discard_pch = discard_pch || !failed_result(linked);
    } else if (lone_pch && PchRejected(linked)) {
      discard_pch = true;
    } else if (lone_pch) {
      stats.precompiled_header_units = 1;
    }
    if (failed_result(linked)) {
      failed_cmd = &link_cmd;
      failed = std::move(linked);
    }
  }
  if (discard_pch) {
    DiscardPch(pch_dir, /*fresh=*/build_pch);
    stats.precompiled_header_units = 0;
  }
  if (failed_cmd != nullptr) {
    unlink(temp_artifact.c_str());
    std::string kept = build_dir;
    if (!options_.keep_source_dir.empty()) {
      kept = absl::StrCat(options_.keep_source_dir, "/", stats.hash);
      absl::Status moved = MakeDirs(kept, 0755);
      for (const ir::loop::SourceFile& f : sources) {
        if (moved.ok()) moved = WriteFile(absl::StrCat(kept, "/", FileName(f)), f.text);
      }
      if (moved.ok()) {
        RemoveTree(build_dir);
      } else {
        kept = build_dir;
      }
    }
    (void)WriteFile(absl::StrCat(kept, "/failed_command.txt"),
                    absl::StrCat("cd ", kept, " && ", ShellQuoteForDisplay(*failed_cmd), "\n"));
    if (!failed.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot run the C++ compiler: ", failed.status().message(), "; sources kept in ",
          kept));
    }
    const std::string why = failed->timed_out
                                ? absl::StrCat("timed out after ",
                                               absl::FormatDuration(options_.compile_timeout))
                                : absl::StrCat("exited with status ", failed->exit_code);
    return absl::InternalError(absl::StrCat(
        "JIT build for ISA '", isa_->name, "' failed: ", *compiler, " ", why,
        "; sources kept in ", kept, "\n", Trim(failed->stdout_text)));
  }
  RemoveTree(build_dir);

  // Publish: the binary first, then the record that vouches for it; both by
  // rename, so no reader ever sees a partial file under a final name.
  absl::StatusOr<std::pair<uint64_t, std::string>> digest = FileDigest(temp_artifact);
  if (!digest.ok()) {
    unlink(temp_artifact.c_str());
    return digest.status();
  }
  const std::string temp_meta = absl::StrCat(temp_artifact, ".meta");
  absl::Status wrote =
      WriteFile(temp_meta, MetaText(stats.hash, kind_name, digest->first, digest->second));
  if (!wrote.ok() || rename(temp_artifact.c_str(), entry.path.c_str()) != 0 ||
      rename(temp_meta.c_str(), meta.c_str()) != 0) {
    const std::string err = wrote.ok() ? ErrnoText() : std::string(wrote.message());
    unlink(temp_artifact.c_str());
    unlink(temp_meta.c_str());
    return absl::InternalError(
        absl::StrCat("cannot publish ", entry.path, " in the JIT cache: ", err));
  }
  if (shared) {
    PinOpenMpRuntime();
    entry.handle = dlopen(entry.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (entry.handle == nullptr) {
      const char* err = dlerror();
      return absl::InternalError(absl::StrCat("dlopen of freshly built ", entry.path,
                                              " failed: ", err ? err : "unknown error"));
    }
  }
  stats.wall_time = absl::Now() - start;
  return entry;
}

}  // namespace kiln::jit
