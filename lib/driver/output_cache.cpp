#include "foundry/driver/output_cache.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "foundry/frontend/frontend.h"
#include "foundry/support/error.h"

namespace foundry {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFilePrefix = "file:";    // a part that is a file of the folder: "file:NAME"
constexpr const char* kWarnings = "warnings";  // the compile's warnings, one per line

// This foundryc, by content: a rebuilt foundryc may generate other code under the same version.
const std::string& foundryc_identity() {
  static const std::string identity = build::hash_file("/proc/self/exe");
  return identity;
}

// A name that writes into the folder itself: no path, no hidden file, nothing a shell would mind.
bool plain_file_name(const std::string& name) {
  auto plain = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; };
  return !name.empty() && name.size() < 200 && name[0] != '.' && std::all_of(name.begin(), name.end(), plain);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

std::string output_cache_key(const PipelineOptions& opts, const std::string& name, const build::CompileOptions& build) {
  if (!build.use_cache || opts.dump_ir || opts.stop_after || (!opts.emit_so && !opts.emit_static)) return "";
  if (!starts_with_zip_magic(opts.input)) return "";  // a folder or a bare model.json: many files
  std::string input = build::hash_file(opts.input);
  if (input.empty() || foundryc_identity().empty()) return "";
  // Every option that changes a file of the folder. (PipelineOptions: a new one goes here too.)
  return build::hash_hex({"foundry-outputs 1", foundryc_identity(), build::toolchain_identity(build), input,
                          "name=" + name, "emit_source=" + std::to_string(opts.emit_source),
                          "emit_so=" + std::to_string(opts.emit_so), "emit_static=" + std::to_string(opts.emit_static),
                          "fusion=" + std::to_string(opts.fusion), "static_fallback=" + std::to_string(opts.static_fallback),
                          "target=" + opts.target, "threads=" + std::to_string(opts.threads),
                          "vectorize=" + std::to_string(opts.vectorize), "debug_buffers=" + std::to_string(opts.debug_buffers),
                          "device=" + opts.device, "cuda_arch=" + opts.cuda_arch, "tf32=" + std::to_string(opts.tf32)});
}

bool fetch_outputs(const std::string& key, const build::CompileOptions& build, const fs::path& dir) {
  build::CompileCache cache = build::cache_of(build);
  std::string why;
  auto miss = [&](const std::string& reason) {
    if (!reason.empty()) spdlog::info("output cache: {}", reason);
    return false;
  };
  std::optional<build::CacheEntry> entry = cache.load(key, why);
  if (!entry) return miss(why);
  std::vector<std::pair<std::string, std::string_view>> files;
  for (const auto& [part, where] : entry->parts) {
    if (part == kWarnings) continue;
    std::string file = part.rfind(kFilePrefix, 0) == 0 ? part.substr(std::strlen(kFilePrefix)) : "";
    if (!plain_file_name(file)) return miss("entry " + key + " ignored: it names a file " + part);
    files.emplace_back(file, entry->part(part));
  }
  // The built products, from the build's entry (the key manifest.json records).
  nlohmann::json m = nlohmann::json::parse(entry->part(std::string(kFilePrefix) + "manifest.json"), nullptr, false);
  std::string built = m.is_object() && m.contains("hash") && m["hash"].is_string() ? m["hash"].get<std::string>() : "";
  if (built.size() != 32 || built.find_first_not_of("0123456789abcdef") != std::string::npos)
    return miss("entry " + key + " ignored: it has no manifest.json naming the build");
  if (!cache.fetch(built, build::built_products(dir.string(), build), why)) return miss(why);
  for (const auto& [file, bytes] : files)
    if (!build::write_file_atomically((dir / file).string(), bytes)) throw UserError("cannot write " + (dir / file).string());
  for (const std::string& w : split_lines(std::string(entry->part(kWarnings)))) spdlog::warn("{}", w);
  return true;
}

void store_outputs(const std::string& key, const build::CompileOptions& build, const fs::path& dir,
                   const std::vector<std::string>& warnings) {
  std::vector<std::pair<std::string, std::string>> parts;
  std::vector<std::string> built;
  for (const auto& [path, suffix] : build::built_products(dir.string(), build)) built.push_back(fs::path(path).filename());
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name[0] == '.' || std::find(built.begin(), built.end(), name) != built.end()) continue;
    if (!entry.is_regular_file(ec) || !plain_file_name(name)) return;  // a folder this cache does not describe
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    if (!in && !in.eof()) return;
    parts.emplace_back(kFilePrefix + name, bytes.str());
  }
  if (ec) return;
  std::string text;
  for (const std::string& w : warnings) text += w + "\n";
  parts.emplace_back(kWarnings, text);
  build::cache_of(build).store_bytes(key, parts);
}

// ---- WarningRecorder ----

// Outside an anonymous namespace: WarningRecorder::State, which has external linkage, holds one
// (GCC warns of a field whose type has internal linkage when this file is part of a unity batch).
namespace recording {

class RecordingSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> lines;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (msg.level == spdlog::level::warn) lines.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}
};

}  // namespace recording

struct WarningRecorder::State {
  std::shared_ptr<spdlog::logger> logger = spdlog::default_logger();
  spdlog::level::level_enum level = logger->level();
  std::vector<spdlog::level::level_enum> sink_levels;
  std::shared_ptr<recording::RecordingSink> sink = std::make_shared<recording::RecordingSink>();
};

WarningRecorder::WarningRecorder() : state_(std::make_unique<State>()) {
  // The logger lets warnings through to this sink; its other sinks keep to the level the user chose.
  for (auto& s : state_->logger->sinks()) {
    state_->sink_levels.push_back(s->level());
    s->set_level(std::max(s->level(), state_->level));
  }
  state_->logger->sinks().push_back(state_->sink);
  state_->logger->set_level(std::min(state_->level, spdlog::level::warn));
}

WarningRecorder::~WarningRecorder() {
  auto& sinks = state_->logger->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), state_->sink), sinks.end());
  for (size_t k = 0; k < sinks.size() && k < state_->sink_levels.size(); ++k) sinks[k]->set_level(state_->sink_levels[k]);
  state_->logger->set_level(state_->level);
}

std::vector<std::string> WarningRecorder::warnings() const { return state_->sink->lines; }

}  // namespace foundry
