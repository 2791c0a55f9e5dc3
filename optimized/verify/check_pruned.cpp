// `pruned` (a statecut.json is present): the record is valid for this checkpoint, and with the unpruned source
// every kept q/k row and conv channel is the source's row bit for bit, in the recorded order, and every other tensor
// (and every other row of a packed tensor) is identical. The row map is rebuilt here from the record and the
// source's geometry alone (DESIGN.md §4), independently of surgery.cpp's index arithmetic.
#include <algorithm>
#include <filesystem>
#include <set>

#include "optimized/io/checkpoint.h"
#include "optimized/prune/prune_record.h"
#include "optimized/prune/surgery.h"
#include "optimized/verify/check_rotation.h"
#include "optimized/verify/verify_checks.h"

namespace statecut::verify {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// Where a row of a pruned tensor comes from.
struct RowOrigin {
  int64_t src_row = 0;
  int layer = -1, head = -1, kept = -1;  ///< -1: a row outside the q/k blocks
  std::string block;                     ///< "q" / "k" / "q conv" / "k conv"
  int64_t src_row0 = -1;                 ///< a rotated row (src_row −1): the source row of its head's channel 0
  int64_t dk = 0;                        ///< a rotated row: its source head's dk
};

struct PrunedBlock {
  std::string tensor, kind;
  int64_t offset, stride;
  const PrunableLayer* L;
  const std::vector<std::vector<int64_t>>* keep;  ///< null for a rotation
};

std::string bias_of(const std::string& w) {
  const std::string suf = ".weight";
  return w.size() > suf.size() && w.compare(w.size() - suf.size(), suf.size(), suf) == 0
             ? w.substr(0, w.size() - suf.size()) + ".bias"
             : "";
}

/// tensor → its pruned rows' origins, for every tensor holding a q/k block of the source geometry.
std::map<std::string, std::vector<RowOrigin>> row_maps(const WeightSource& src, const std::vector<PrunableLayer>& layers,
                                                       const std::map<int, std::vector<std::vector<int64_t>>>& keep,
                                                       int new_dk) {
  std::map<std::string, std::vector<PrunedBlock>> blocks;
  for (const auto& L : layers) {
    const auto it = keep.find(L.layer);
    const auto* kp = (it == keep.end() || it->second.empty()) ? nullptr : &it->second;  // null: a rotation
    const int64_t dk = L.head_k_dim;
    auto add = [&](const std::string& t, const std::string& kind, int64_t off, int64_t stride) {
      if (t.empty()) return;
      const int64_t head_stride = head_row_stride(stride, dk);
      blocks[t].push_back({t, kind, off, head_stride, &L, kp});
      // a bias beside a q/k block (a conv's; Mamba-2's in_proj with use_bias) loses the same rows (surgery.cpp)
      const std::string b = bias_of(t);
      if (!b.empty() && src.has(b)) blocks[b].push_back({b, kind + " bias", off, head_stride, &L, kp});
    };
    add(L.q_weight, "q", L.q_row_offset, L.q_row_stride);
    add(L.k_weight, "k", L.k_row_offset, L.k_row_stride);
    add(L.q_conv, "q conv", L.q_conv_offset, dk);
    add(L.k_conv, "k conv", L.k_conv_offset, dk);
  }
  std::map<std::string, std::vector<RowOrigin>> out;
  for (const auto& [name, bl] : blocks) {
    const int64_t rows = src.shape(name)[0];
    std::vector<const PrunedBlock*> owner(rows, nullptr);
    std::vector<int> head(rows, -1);
    std::vector<int64_t> chan(rows, -1);
    for (const auto& b : bl)
      for (int h = 0; h < b.L->num_key_heads; ++h)
        for (int64_t c = 0; c < b.L->head_k_dim; ++c) {
          const int64_t r = b.offset + h * b.stride + c;
          if (r < rows) owner[r] = &b, head[r] = h, chan[r] = c;
        }
    auto& m = out[name];
    for (int64_t r = 0; r < rows; ++r) {
      if (!owner[r]) {
        m.push_back({r, -1, -1, -1, ""});
      } else if (chan[r] == 0) {
        const PrunedBlock& b = *owner[r];
        const int h = head[r];
        if (!b.keep) {  // rotation: k' rows that are no source row
          for (int i = 0; i < new_dk; ++i)
            m.push_back({-1, b.L->layer, h, i, b.kind, b.offset + h * b.stride, b.L->head_k_dim});
          continue;
        }
        const auto& kh = (*b.keep)[h];
        for (size_t i = 0; i < kh.size(); ++i)
          m.push_back({b.offset + h * b.stride + kh[i], b.L->layer, h, static_cast<int>(i), b.kind});
      }
    }
  }
  return out;
}

bool rows_equal(const torch::Tensor& a, int64_t ra, const torch::Tensor& b, int64_t rb) {
  return torch::equal(a[ra], b[rb]);
}

/// The unpruned source as this check reads it, once: its config.json (a source that cannot be read is the input's
/// fault, exit 2, not a failed check) and its linear-attention layers, or why it has none (the weights row names it).
struct SourceModel {
  std::string dir;
  json cfg;
  std::vector<PrunableLayer> layers;
  std::string layers_error;
};

SourceModel read_source(const std::string& source) {
  SourceModel sm;
  sm.dir = source;
  try {
    sm.cfg = io::read_config(source);
  } catch (const std::exception& e) {
    throw Unreadable(e.what());
  }
  try {
    sm.layers = prunable_layers_from_config(sm.cfg, (fs::path(source) / "config.json").string());
  } catch (const std::exception& e) {
    sm.layers_error = e.what();
  }
  return sm;
}

/// The source's geometry against the keep sets (before any row is indexed by them): the same model_type, every source
/// layer with one keep set per key head (a rotation: none), each channel inside the source's dk. Empty when they fit.
std::vector<std::string> source_geometry_problems(const Context& ctx, const SourceModel& sm,
                                                  const std::map<int, std::vector<std::vector<int64_t>>>& keep) {
  const std::string& source = sm.dir;
  const std::vector<PrunableLayer>& src_layers = sm.layers;
  std::vector<std::string> problems;
  if (!sm.layers_error.empty()) problems.push_back(sm.layers_error);
  const auto type_of = [](const json& c) {
    return c.contains("model_type") && c["model_type"].is_string() ? c["model_type"].get<std::string>() : std::string("?");
  };
  if (type_of(sm.cfg) != type_of(ctx.config))
    problems.push_back(source + ": model_type '" + type_of(sm.cfg) + "', this checkpoint's '" + type_of(ctx.config) + "'");
  for (const auto& L : src_layers) {
    const auto it = keep.find(L.layer);
    if (it == keep.end()) {
      problems.push_back(source + ": layer " + std::to_string(L.layer) + " has no keep sets in the record");
      continue;
    }
    if (it->second.empty()) continue;  // a rotation
    if (static_cast<int>(it->second.size()) != L.num_key_heads) {
      problems.push_back(source + ": layer " + std::to_string(L.layer) + " has " + std::to_string(L.num_key_heads) +
                         " key heads, the record " + std::to_string(it->second.size()) + " keep sets");
      continue;
    }
    for (size_t h = 0; h < it->second.size(); ++h)
      for (const int64_t c : it->second[h])
        if (c < 0 || c >= L.head_k_dim) {
          problems.push_back(source + ": " + at_head(L.layer, static_cast<int>(h)) + ": the record keeps channel " +
                             std::to_string(c) + " of a source head of dk " + std::to_string(L.head_k_dim));
          break;
        }
  }
  for (const auto& [layer, k] : keep)
    if (std::none_of(src_layers.begin(), src_layers.end(), [&](const PrunableLayer& L) { return L.layer == layer; }))
      problems.push_back(source + ": layer " + std::to_string(layer) + " of the record is not a linear-attention layer there");
  return problems;
}

/// No statecut.json: the keep sets the weights imply, each pruned q row matched to the source row it equals (the first
/// channel of that head not taken yet); rows that equal none go to `unmatched`.
std::map<int, std::vector<std::vector<int64_t>>> infer_keep(const Context& ctx, const WeightSource& src,
                                                            const std::vector<PrunableLayer>& src_layers,
                                                            std::vector<std::string>& unmatched) {
  std::map<int, std::vector<std::vector<int64_t>>> keep;
  for (const auto& P : ctx.layers) {
    const PrunableLayer* L = nullptr;
    for (const auto& x : src_layers)
      if (x.layer == P.layer) L = &x;
    if (!L || L->num_key_heads != P.num_key_heads || L->q_weight != P.q_weight) continue;  // the geometry check names it
    const torch::Tensor a = ctx.weights->raw(P.q_weight), b = src.raw(L->q_weight);
    const int64_t ps = head_row_stride(P.q_row_stride, P.head_k_dim), ss = head_row_stride(L->q_row_stride, L->head_k_dim);
    auto& kl = keep[P.layer];
    for (int h = 0; h < P.num_key_heads; ++h) {
      std::vector<int64_t> kh;
      std::vector<bool> used(static_cast<size_t>(L->head_k_dim), false);
      for (int i = 0; i < P.head_k_dim; ++i) {
        const int64_t pr = P.q_row_offset + h * ps + i;
        int64_t found = -1;
        for (int64_t c = 0; pr < a.size(0) && c < L->head_k_dim && found < 0; ++c) {
          const int64_t sr = L->q_row_offset + h * ss + c;
          if (!used[static_cast<size_t>(c)] && sr < b.size(0) && rows_equal(a, pr, b, sr)) found = c;
        }
        if (found < 0) {
          unmatched.push_back(P.q_weight + " row " + std::to_string(pr) + " (" + at_head(P.layer, h) + ", q channel " +
                              std::to_string(i) + ") equals no source q row of that head");
          found = 0;
        }
        used[static_cast<size_t>(found)] = true;
        kh.push_back(found);
      }
      kl.push_back(std::move(kh));
    }
  }
  return keep;
}

/// What the rotated heads' check found, for a passing (or skipped) row's message.
std::vector<std::string> rotation_notes(const RotationSummary& rot) {
  std::vector<std::string> out;
  const int64_t determined = rot.heads - rot.undetermined;
  if (determined > 0) {
    char worst[32];
    std::snprintf(worst, sizeof worst, "%.2g", rot.worst);
    out.push_back(std::to_string(determined) + " rotated heads are one orthonormal T per head times the source's q/k " +
                  "rows and T∘T times its conv filters, within the stored dtype's rounding (worst at " + worst +
                  " of the bound)");
  }
  if (rot.undetermined > 0)
    out.push_back(std::to_string(rot.undetermined) + " rotated heads not determined by the source: " +
                  rot.first_undetermined);
  if (rot.unchecked > 0)
    out.push_back(std::to_string(rot.unchecked) + " rotated heads fine-tuned in every q/k tensor: shape only");
  return out;
}

/// Where two tensors of one shape first differ: " (first at row r)" for a tensor of rows, else "".
std::string first_differing_row(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.dim() < 1 || !a.sizes().equals(b.sizes()) || a.scalar_type() != b.scalar_type()) return "";
  const torch::Tensor diff = a.reshape({a.size(0), -1}).ne(b.reshape({b.size(0), -1})).any(1);
  const torch::Tensor rows = diff.nonzero();
  return rows.size(0) == 0 ? "" : " (first at row " + std::to_string(rows[0][0].item<int64_t>()) + ")";
}

/// With the source: kept rows bit-identical in the recorded order, everything else identical.
/// `tuned`: tensors a fine-tune changed after the surgery (statecut.json "changed_tensors"): their rows are counted
/// against the geometry but their values are not compared.
CheckResult weights_row(Context& ctx, const SourceModel& sm, const WeightSource& src,
                        const std::map<int, std::vector<std::vector<int64_t>>>& keep, bool rotation,
                        const std::set<std::string>& tuned = {}, RecoveredRotations* recovered = nullptr,
                        const std::string& convs_unchecked = "") {
  const std::string& source = sm.dir;
  const std::vector<PrunableLayer>& src_layers = sm.layers;
  CheckResult r;
  r.name = "pruned.weights";
  r.relation = "==";
  r.threshold = 0;
  r.reason = "subset surgery copies bytes: every kept row/channel must be the source's, in the recorded order, "
             "and nothing else may change (DESIGN.md §4)";
  if (rotation)
    r.reason += "; a rotation (pca) writes each head's q/k rows as fl(T W) and its conv filters as fl((T∘T) C) with "
                "one orthonormal T: T is recovered by least squares and held within the rounding bounds of "
                "check_rotation.h";
  std::vector<std::string> problems = source_geometry_problems(ctx, sm, keep);
  if (!problems.empty()) {  // the keep sets cannot index this source's rows
    r.figure = static_cast<double>(problems.size());
    r.status = Status::Fail;
    r.where = "source";
    r.message = first_problem(problems);
    r.details["problems"] = problems;
    return r;
  }
  const auto maps = row_maps(src, src_layers, keep, ctx.layers.front().head_k_dim);
  const auto pn = ctx.weights->names(), sn = src.names();
  const std::set<std::string> pset(pn.begin(), pn.end()), sset(sn.begin(), sn.end());
  for (const auto& n : sn)
    if (!pset.count(n)) problems.push_back(n + ": in the source, missing here");
  for (const auto& n : pn)
    if (!sset.count(n)) problems.push_back(n + ": not in the source");
  int64_t rows_checked = 0, other_rows = 0, tensors_same = 0;
  std::map<std::pair<int, int>, RotatedHead> rotated;  // (layer, head) → its rotated blocks (a pca step)
  for (const auto& n : pn) {
    if (!sset.count(n)) continue;
    const torch::Tensor a = ctx.weights->raw(n), b = src.raw(n);
    const auto it = maps.find(n);
    const bool is_tuned = tuned.count(n) > 0;
    if (it == maps.end()) {
      if (a.scalar_type() != b.scalar_type() || !a.sizes().equals(b.sizes()) || (!is_tuned && !torch::equal(a, b))) {
        problems.push_back(n + ": differs from the source" + first_differing_row(a, b) +
                           " (only q/k rows and their conv channels may change)");
        if (r.where.empty()) r.where = n;
      } else if (!is_tuned) {
        ++tensors_same;
      }
      continue;
    }
    const auto& m = it->second;
    if (a.scalar_type() != b.scalar_type() || a.size(0) != static_cast<int64_t>(m.size())) {
      problems.push_back(n + ": " + std::to_string(a.size(0)) + " rows, the record and the source's geometry give " +
                         std::to_string(m.size()));
      if (r.where.empty()) r.where = n;
      continue;
    }
    for (size_t p = 0; p < m.size() && !is_tuned; ++p) {
      const RowOrigin& o = m[p];
      if (o.src_row < 0) {  // a rotated row: no source row of its own; the head's rows are checked together below
        RotatedHead& rh = rotated[{o.layer, o.head}];
        rh.layer = o.layer, rh.head = o.head, rh.dk = o.dk;
        if (rh.blocks.empty() || rh.blocks.back().tensor != n || rh.blocks.back().kind != o.block)
          rh.blocks.push_back({n, o.block, {}, o.src_row0});
        rh.blocks.back().rows.push_back(static_cast<int64_t>(p));
        continue;
      }
      ++(o.layer >= 0 ? rows_checked : other_rows);
      if (rows_equal(a, static_cast<int64_t>(p), b, o.src_row)) continue;
      std::string msg = n + " row " + std::to_string(p);
      if (o.layer >= 0) {
        const PrunableLayer* L = nullptr;
        for (const auto& x : src_layers)
          if (x.layer == o.layer) L = &x;
        const int64_t base = o.src_row - keep.at(o.layer)[o.head][o.kept];
        msg += " (" + at_head(o.layer, o.head) + ", " + o.block + " channel " + std::to_string(o.kept) +
               " of the record = source channel " + std::to_string(keep.at(o.layer)[o.head][o.kept]) + ")";
        std::string found;
        for (int64_t c = 0; L && c < L->head_k_dim && found.empty(); ++c)
          if (rows_equal(a, static_cast<int64_t>(p), b, base + c)) found = "holds source channel " + std::to_string(c);
        msg += found.empty() ? " matches no source channel of that head" : " " + found;
        if (r.where.empty()) r.where = at_head(o.layer, o.head) + " " + o.block;
      } else {
        msg += " (outside the q/k blocks) differs from source row " + std::to_string(o.src_row);
        if (r.where.empty()) r.where = n;
      }
      problems.push_back(msg);
    }
  }
  RotationSummary rot;
  if (!rotated.empty()) {
    std::vector<RotatedHead> heads;
    for (auto& [key, h] : rotated) {
      if (!convs_unchecked.empty())  // the conv filters of this chain follow no one rotation: q/k rows only
        h.blocks.erase(std::remove_if(h.blocks.begin(), h.blocks.end(),
                                      [](const RotatedBlock& b) { return b.kind.find("conv") != std::string::npos; }),
                       h.blocks.end());
      heads.push_back(std::move(h));
    }
    rot = check_rotated_heads(*ctx.weights, src, heads, problems, r.where, recovered);
  }
  // config.json: the source's with the family's dk edit, nothing else.
  if (!ctx.layers.empty()) {
    const json expect = pruned_config(sm.cfg, ctx.layers.front().head_k_dim, source);
    for (const auto& [k, v] : expect.items())
      if (!ctx.config.contains(k) || ctx.config[k] != v)
        problems.push_back(ctx.config_path + ": '" + k + "' = " + (ctx.config.contains(k) ? ctx.config[k].dump() : "absent") +
                           " but the source's config with the dk edit has " + v.dump());
    for (const auto& [k, v] : ctx.config.items())
      if (!expect.contains(k)) problems.push_back(ctx.config_path + ": '" + k + "' is not in the source's config");
  }
  r.figure = static_cast<double>(problems.size());
  // Heads whose T the source does not determine: their rotation is not proven, so the row is not a pass.
  r.status = !problems.empty()                                   ? Status::Fail
             : rot.undetermined > 0 || !convs_unchecked.empty() ? Status::Skip
                                                                 : Status::Pass;
  std::vector<std::string> parts;
  if (rows_checked > 0 || !rotation)
    parts.push_back(std::to_string(rows_checked) + " kept q/k rows and conv channels equal the source's bit for bit");
  if (other_rows > 0)
    parts.push_back(std::to_string(other_rows) + " other rows of the packed tensors holding them identical");
  if (rotation)
    for (auto& note : rotation_notes(rot)) parts.push_back(std::move(note));
  parts.push_back(std::to_string(tensors_same) + " other tensors identical");
  if (!tuned.empty()) parts.push_back(std::to_string(tuned.size()) + " fine-tuned tensors held to shape only");
  parts.push_back("config = source's + the dk edit (source " + source + ")");
  std::string joined;
  for (const auto& p : parts) joined += (joined.empty() ? "" : "; ") + p;
  r.message = !problems.empty() ? first_problem(problems) : convs_unchecked.empty() ? joined : convs_unchecked + "; " + joined;
  r.details["problems"] = problems;
  return r;
}

/// --source without a statecut.json (a checkpoint pruned elsewhere, or whose record was dropped on the way): the
/// keep sets are inferred from the q rows, then every k row, conv channel and other tensor is held to them as with a
/// record. When not one q row is a source row, the checkpoint is checked as a rotation (pca) instead. Nothing
/// inferred is trusted that the weights do not show.
void check_pruned_without_record(Context& ctx, std::vector<CheckResult>& out) {
  const std::string source = ctx.opt.source;
  const std::string why = "no statecut.json: the keep sets are inferred from the q rows against --source " + source;
  if (ctx.layers.empty()) {
    out.push_back(skipped("pruned", ctx.no_layers_reason()));
    return;
  }
  if (!ctx.weights) {
    out.push_back(skipped("pruned.weights", "the weights do not open: " + ctx.load_error));
    return;
  }
  const SourceModel sm = read_source(source);
  const WeightSource src = WeightSource::open_dir(source);
  ctx.say("pruned: weights against " + source + " (keep sets inferred: no statecut.json)");
  std::vector<std::string> unmatched;
  const auto keep = infer_keep(ctx, src, sm.layers, unmatched);
  out.push_back(skipped("pruned.record", why));
  int64_t q_rows = 0;
  for (const auto& [layer, heads] : keep)
    for (const auto& kh : heads) q_rows += static_cast<int64_t>(kh.size());
  if (q_rows > 0 && static_cast<int64_t>(unmatched.size()) == q_rows) {
    // Not one q row is a source row: no subset, but perhaps a rotation (pca), which the weights alone can show.
    std::map<int, std::vector<std::vector<int64_t>>> rot;
    for (const auto& [layer, heads] : keep) rot[layer] = {};
    CheckResult w = weights_row(ctx, sm, src, rot, true);
    w.message += " (no statecut.json and no q row equals a source row: checked as a rotation, pca's surgery, "
                 "against --source " + source + ")";
    out.push_back(std::move(w));
    out.push_back(skipped("pruned.certificate", "no statecut.json: no method or calibration to re-derive"));
    return;
  }
  if (!unmatched.empty()) {
    CheckResult r;
    r.name = "pruned.weights";
    r.relation = "==";
    r.threshold = 0;
    r.reason = "a pruned checkpoint keeps a subset of its source's q/k channels: every q row must be one of the source's";
    r.figure = static_cast<double>(unmatched.size());
    r.status = Status::Fail;
    r.where = "q rows";
    r.message = first_problem(unmatched) + " (" + why + ")";
    r.details["problems"] = unmatched;
    out.push_back(std::move(r));
    return;
  }
  CheckResult w = weights_row(ctx, sm, src, keep, false);
  w.message += " (" + why + ")";
  out.push_back(std::move(w));
  out.push_back(skipped("pruned.certificate", "no statecut.json: no method or calibration to re-derive"));
}

/// The pruning steps of a record's chain since its last step without a selection (statecut train starts a chain):
/// how many there are and how many rotated (pca), and the first rotating step's source.
struct ChainRotations {
  int steps = 0, rotations = 0;
  std::string rotated_step;
};

ChainRotations chain_rotations(const json& rec) {
  ChainRotations c;
  const auto visit = [&](const json& step, bool last) {
    if (pruning_step_kind(step) == PruningStep::None) {
      c = ChainRotations();  // no pruning: the chain starts after it
      return;
    }
    ++c.steps;
    if (pruning_step_kind(step) != PruningStep::Rotation) return;
    if (++c.rotations == 1) {
      const std::string from = step.contains("source") && step["source"].is_object()
                                   ? step["source"].value("checkpoint", std::string("?"))
                                   : std::string("?");
      c.rotated_step = last ? "this step" : "the step from " + from;
    }
  };
  if (rec.contains("history") && rec["history"].is_array())
    for (const auto& h : rec["history"]) visit(h, false);
  visit(rec, true);
  return c;
}

}  // namespace

/// The keys of which a pruning record (prune.cpp, prune_record.cpp) has at least one.
constexpr const char* kPruningKeys[] = {"selection", "method", "new_head_k_dim", "head_k_dim", "original", "history",
                                        "keep_from"};

void check_pruned(Context& ctx, std::vector<CheckResult>& out) {
  const fs::path rec_path = fs::path(ctx.dir) / "statecut.json";
  if (!fs::exists(rec_path)) {
    if (ctx.opt.source.empty()) {
      out.push_back(skipped("pruned", "no statecut.json: not a checkpoint written by statecut prune"));
      return;
    }
    check_pruned_without_record(ctx, out);
    return;
  }
  json rec;
  try {
    rec = io::read_json_file(rec_path.string());
  } catch (const std::exception& e) {
    CheckResult r;
    r.name = "pruned.record";
    r.status = Status::Fail;
    r.message = e.what();
    out.push_back(r);
    return;
  }
  if (ctx.layers.empty()) {
    out.push_back(skipped("pruned", ctx.no_layers_reason()));
    return;
  }
  // statecut train and a fine-tune of an unpruned model write a statecut.json too, with no pruning in it: there is
  // no keep set to check (they failed here as records without a selection).
  if (rec.is_object() && std::none_of(std::begin(kPruningKeys), std::end(kPruningKeys),
                                      [&](const char* k) { return rec.contains(k); })) {
    std::string what;
    for (const char* k : {"train", "finetune"})
      if (rec.contains(k)) what += std::string(what.empty() ? "" : " and ") + "statecut " + k;
    out.push_back(skipped("pruned", rec_path.string() + " records " + (what.empty() ? "no run statecut knows" : what) +
                                        ", no pruning: no keep sets to check" +
                                        (ctx.opt.source.empty() ? "" : " (--source is not compared)")));
    return;
  }
  std::map<int, std::vector<std::vector<int64_t>>> keep;
  bool rotation = false;
  CheckResult rr = record_row(ctx, rec, keep, &rotation);
  const bool record_ok = rr.status == Status::Pass;
  out.push_back(std::move(rr));

  // The source: --source, else the record's own source path when it still exists.
  std::string source = ctx.opt.source;
  std::string source_note;
  if (source.empty() && rec.contains("source") && rec["source"].contains("checkpoint")) {
    const std::string p = rec["source"]["checkpoint"].get<std::string>();
    if (fs::exists(fs::path(p) / "config.json")) source = p, source_note = " (from statecut.json)";
  }
  if (source.empty()) {
    out.push_back(skipped("pruned.weights", "give --source DIR (the unpruned checkpoint) to compare the weights bit for bit"));
    out.push_back(skipped("pruned.certificate", "needs --source DIR"));
    return;
  }
  if (!record_ok) {
    out.push_back(skipped("pruned.weights", "the record is invalid"));
    out.push_back(skipped("pruned.certificate", "the record is invalid"));
    return;
  }
  const SourceModel sm = read_source(source);
  // Pruned in several steps and checked against the first source: the keep sets composed back to it ("original").
  bool composed = false;
  const int64_t src_dk = sm.layers.empty() ? -1 : sm.layers.front().head_k_dim;  // else the weights row names it
  const std::string step_source = rec.contains("source") && rec["source"].is_object()
                                      ? rec["source"].value("checkpoint", std::string("?"))
                                      : std::string("?");
  // The record names this very folder as the step's source: its dk must be the record's head_k_dim (an edited
  // head_k_dim would otherwise send the check down the paths for an earlier source, and skip it).
  std::error_code same_ec;
  const int64_t rec_dk = rec.contains("head_k_dim") && rec["head_k_dim"].is_number_integer()
                             ? rec["head_k_dim"].get<int64_t>()
                             : int64_t{-1};
  if (src_dk > 0 && rec_dk != src_dk && step_source != "?" && fs::equivalent(step_source, source, same_ec)) {
    CheckResult w;
    w.name = "pruned.weights";
    w.relation = "==";
    w.threshold = 0;
    w.status = Status::Fail;
    w.figure = 1;
    w.where = "source";
    w.reason = "the record's head_k_dim is its source's dk";
    w.message = rec_path.string() + ": head_k_dim " + std::to_string(rec_dk) + ", but its source " + source +
                " (the record's own source.checkpoint) has dk " + std::to_string(src_dk);
    out.push_back(std::move(w));
    out.push_back(skipped("pruned.certificate", "the record contradicts its source"));
    return;
  }
  if (rec.contains("original") && rec["original"].is_object() && rec["original"].contains("layers")) {
    try {
      if (src_dk != rec.value("head_k_dim", int64_t{-1}) && src_dk == rec["original"].value("head_k_dim", int64_t{-1})) {
        std::map<int, std::vector<std::vector<int64_t>>> original;
        for (const auto& l : rec["original"]["layers"])
          original[l.at("layer").get<int>()] = l.at("keep").get<std::vector<std::vector<int64_t>>>();
        keep = std::move(original);
        composed = true;
        source_note += " (keep sets composed over " + std::to_string(rec["original"].value("steps", 2)) +
                       " pruning steps back to this source)";
      }
    } catch (const std::exception&) {  // not the first source after all: the step's own selection applies
    }
  }
  std::string convs_unchecked;  // a chain of two or more rotations: why its conv filters are not compared
  if (!composed && rec.contains("original") && rec["original"].is_null() && src_dk > 0 &&
      src_dk != rec.value("head_k_dim", int64_t{-1})) {
    // A step of a chain with a rotation (pca, "original": null) checked against an earlier source: its keep sets
    // index a dk-head_k_dim model, not this source. Subsets and one rotation compose to one rotation Q = S₂·T·S₁ with
    // orthonormal rows, whose conv filters are (Q∘Q)·C (a subset's S∘S is S), so the chain is checked as a rotation
    // of this source. Two rotations do not compose so: (T₂∘T₂)(T₁∘T₁) is not (T₂T₁)∘(T₂T₁).
    const ChainRotations chain = chain_rotations(rec);
    if (chain.rotations == 0) {  // "original": null without a rotating step: an edited record, nothing to compose
      const std::string why = "statecut.json has \"original\": null (a rotation in its chain) but none of its steps "
                              "rotated, and " + source + " has dk " + std::to_string(src_dk) + ", not the step's " +
                              std::to_string(rec.value("head_k_dim", int64_t{-1})) + ": give --source " + step_source;
      out.push_back(skipped("pruned.weights", why));
      out.push_back(skipped("pruned.certificate", why));
      return;
    }
    keep.clear();
    for (const auto& L : sm.layers) keep[L.layer] = {};
    rotation = composed = true;
    if (chain.rotations == 1) {
      source_note += " (" + std::to_string(chain.steps) + " pruning steps, one a rotation (" + chain.rotated_step +
                     "): their q/k rows checked as one rotation of this source)";
    } else {  // the q/k rows still are Q·W with Q = T₂T₁… orthonormal; only the convs are out of reach
      convs_unchecked = std::to_string(chain.rotations) + " steps of the chain rotated channels (pca): their q/k rows " +
                        "are checked as one rotation of " + source + ", their conv filters follow no one rotation of " +
                        "it (give --source " + step_source + " to check this step's)";
    }
  }
  // Fine-tunes after the surgery — this checkpoint's, and when composed back to the first source every earlier step's:
  // the tensors they changed (statecut.json "changed_tensors") are held to shape only, every other one bit for bit.
  std::set<std::string> tuned;
  RecoveredRotations recovered;  // a rotation's T̂ per head, from the weights row to the certificate
  bool tuned_known = true, any_tune = false;
  const auto take = [&](const json& ft) {
    any_tune = true;
    if (ft.is_object() && ft.contains("changed_tensors") && ft["changed_tensors"].is_array()) {
      for (const auto& n : ft["changed_tensors"])
        if (n.is_string()) tuned.insert(n.get<std::string>());
    } else {
      tuned_known = false;  // a record written before the names were kept
    }
  };
  const auto take_all = [&](const json& r) {
    if (r.contains("finetune")) take(r["finetune"]);
    if (r.contains("finetune_previous") && r["finetune_previous"].is_array())
      for (const auto& f : r["finetune_previous"]) take(f);
  };
  take_all(rec);
  if (composed && rec.contains("history") && rec["history"].is_array())
    for (const auto& h : rec["history"])
      if (h.is_object()) take_all(h);
  if (any_tune && !tuned_known) {
    out.push_back(skipped("pruned.weights", "fine-tuned after pruning (statecut.json \"finetune\"" +
                                                std::string(composed ? ", in an earlier step" : "") +
                                                ", without the names of the tensors it changed): the record and the "
                                                "shapes are checked"));
  } else if (!ctx.weights) {
    out.push_back(skipped("pruned.weights", "the weights do not open: " + ctx.load_error));
  } else {
    ctx.say("pruned: weights against " + source + source_note);
    CheckResult w =
        weights_row(ctx, sm, WeightSource::open_dir(source), keep, rotation, tuned, &recovered, convs_unchecked);
    w.message += source_note;
    out.push_back(std::move(w));
  }
  if (composed) {
    out.push_back(skipped("pruned.certificate",
                          "the certificate belongs to the last step: give --source its own source (" + step_source + ")"));
    return;
  }
  check_certificate(ctx, rec, source, out, rotation ? &recovered : nullptr);
}

}  // namespace statecut::verify
