// Helpers of the `statecut verify` library tests (tests/torch/verify_*.cpp): fixtures, small options, copies of a
// checkpoint with one tensor or one JSON field edited, and row lookup in a report.
#pragma once
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "optimized/io/safetensors.h"
#include "optimized/models/weight_source.h"
#include "optimized/prune/prune.h"
#include "optimized/verify/verify.h"
#include "tests/test_env.h"
#include "tests/test_files.h"

namespace verify_test {
namespace fs = std::filesystem;
using statecut::test::TempDir;
using statecut::verify::CheckResult;
using statecut::verify::Report;
using statecut::verify::Status;

inline const fs::path kRoot = fs::path(STATECUT_SOURCE_DIR);

/// A fixture folder or "" (the test then skips).
inline std::string fixture(const std::string& name) { return statecut::test::fixture_dir(name); }

/// Options for a fast run: 2 windows of 80 tokens (past one chunk of 64, so chunk boundaries and a mid-chunk
/// state carry are exercised), the library's default seed.
inline statecut::verify::VerifyOptions quick(const std::string& dir, const std::string& source = "") {
  statecut::verify::VerifyOptions o;
  o.checkpoint = dir;
  o.source = source;
  o.windows = 2;
  o.len = 80;
  return o;
}

/// The row called `name`, or a failed assertion.
inline const CheckResult& row(const Report& r, const std::string& name) {
  for (const auto& c : r.checks)
    if (c.name == name) return c;
  ADD_FAILURE() << "no check row '" << name << "'";
  static CheckResult none;
  return none;
}

/// Every failing row, one per line, for assertion messages.
inline std::string failures(const Report& r) {
  std::string s;
  for (const auto& c : r.checks)
    if (c.status == Status::Fail) s += c.name + ": " + c.message + " [" + c.where + "]\n";
  return s;
}

/// A copy of a checkpoint folder's files into dst (created).
inline void copy_checkpoint(const std::string& src, const std::string& dst) {
  fs::create_directories(dst);
  for (const auto& e : fs::directory_iterator(src))
    if (e.is_regular_file()) fs::copy_file(e.path(), fs::path(dst) / e.path().filename());
}

/// What rewrite_model fills its writer with, given the file as it was.
using ModelFill = std::function<void(const statecut::io::SafetensorsFile&, statecut::io::SafetensorsWriter&)>;
/// Rewrites dir/model.safetensors with the tensors `fill` adds from the file as it was, its metadata kept (the writer
/// copies what it is given and replaces the file atomically).
inline void rewrite_model(const std::string& dir, const ModelFill& fill) {
  const std::string path = (fs::path(dir) / "model.safetensors").string();
  statecut::io::SafetensorsWriter w;
  {
    const auto f = statecut::io::SafetensorsFile::open(path);
    fill(f, w);
    w.set_metadata(f.metadata());
  }
  w.write(path);
}

/// Rewrites dir/model.safetensors with tensor `name` replaced by edit(tensor) (same dtype and shape expected).
inline void edit_tensor(const std::string& dir, const std::string& name,
                        const std::function<void(torch::Tensor&)>& edit) {
  rewrite_model(dir, [&](const statecut::io::SafetensorsFile& f, statecut::io::SafetensorsWriter& w) {
    bool found = false;
    for (const auto& n : f.names()) {
      const auto& v = f.tensor(n);
      if (n != name) {
        w.add(v);
        continue;
      }
      found = true;
      torch::Tensor t = statecut::tensor_from_view(v).contiguous();
      edit(t);
      t = t.contiguous();
      w.add(n, v.dtype, v.shape, t.data_ptr(), v.nbytes);
    }
    if (!found) ADD_FAILURE() << dir << "/model.safetensors: no tensor " << name;
  });
}

/// Reads, edits and writes back a JSON file.
inline void edit_json(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j;
  {
    std::ifstream f(path);
    j = nlohmann::json::parse(f);
  }
  edit(j);
  std::ofstream(path) << j.dump(2) << "\n";
}

/// `statecut prune` of dir into out with a data-free method (l1) at 50%.
inline void prune_l1(const std::string& dir, const std::string& out, double ratio = 0.5) {
  statecut::PruneOptions o;
  o.checkpoint = dir;
  o.out = out;
  o.method = "l1";
  o.ratio = ratio;
  statecut::prune_checkpoint(o);
}

/// `statecut prune --method <method> --ratio 0.5` of dir on seqs × len tokens of the shipped corpus.
inline void prune_calibrated(const std::string& dir, const std::string& out, const std::string& method,
                             int64_t seqs = 2, int64_t len = 128) {
  statecut::PruneOptions o;
  o.checkpoint = dir;
  o.out = out;
  o.method = method;
  o.ratio = 0.5;
  o.calib = {(kRoot / "assets" / "corpora" / "pydocs_train.txt").string()};
  o.calib_seqs = seqs;
  o.calib_len = len;
  statecut::prune_checkpoint(o);
}

}  // namespace verify_test
