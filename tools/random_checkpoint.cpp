// statecut-random-checkpoint: writes an fla `delta_net` or `gated_deltanet` checkpoint, a transformers
// Qwen3.5-style hybrid (`--family qwen3_5`: qwen3_5_text, every 4th layer full attention) or a transformers Mamba-2
// (`--family mamba2`) (config.json + model.safetensors, bf16) with random weights, by our own safetensors writer.
// Default shapes are the 1.3B models of fla-hub: delta_net-1.3B-100B (hidden 2048, 16 heads, dk = dv = 128, 24
// layers, MLP 5632, vocab 32000 → 339 tensors, 1,365,677,056 parameters, 2.73 GB) and, with --family
// gated_deltanet, gated_deltanet-1.3B (hidden 2048, 6 heads, head_dim 256, expand_v 2 so dv = 512, 21 layers, MLP
// 5632, vocab 32000); with --family mamba2 the shape of state-spaces/mamba2-1.3b (hidden 2048, 48 layers, expand 2,
// 64 heads of 64, state 128, one group, conv 4, vocab 50288; lm_head written untied). Smaller shapes serve the
// local rehearsal of bench/torch_prune_gpu.sh.
//
// Weights: linear and conv weights are slices of one pool of N(0, 0.02²)-like values (uniform with that std,
// seeded by --seed / STATECUT_SEED; each tensor starts at its own pool offset, so memory stays one largest
// tensor), norm weights are 1. Only the shapes and a finite forward matter: the GPU prune benchmark times
// calibration + selection + surgery, whose cost does not depend on the values.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "optimized/io/safetensors.h"

namespace fs = std::filesystem;
namespace io = statecut::io;

namespace {

struct Sizes {
  bool gated = false;  // gated_deltanet instead of delta_net
  bool qwen = false;   // the transformers Qwen3.5 hybrid (qwen3_5_text)
  bool mamba = false;  // transformers Mamba-2: `heads` heads of head_dim = 2 · hidden / heads, `state` B/C channels
  int64_t hidden = 2048, heads = 16, layers = 24, intermediate = 5632, vocab = 32000, conv = 4;
  int64_t head_dim = 0, expand_v = 1;  // gated_deltanet: dk = head_dim, dv = head_dim * expand_v
  // qwen3_5: linear-attention heads (Hk key heads of dk, Hv value heads of dv = dk · expand_v) and, every 4th layer,
  // full attention with `attn_heads` query heads (and as many output-gate rows), 2 KV heads of head 256
  int64_t value_heads = 32, attn_heads = 16, kv_heads = 2, attn_head_dim = 256;
  int64_t state = 128;  // mamba2: state_size (one group)
  int64_t dk() const { return gated || qwen ? head_dim : hidden / heads; }
  int64_t dv() const { return dk() * expand_v; }
};

struct Spec {
  std::string name;
  std::vector<int64_t> shape;
  bool ones = false;  // norm weight
};

std::vector<Spec> delta_net_tensors(const Sizes& s) {
  const int64_t H = s.hidden, K = s.heads * s.dk(), V = s.heads * s.dv();
  std::vector<Spec> t = {{"model.embeddings.weight", {s.vocab, H}},
                         {"model.norm.weight", {H}, true},
                         {"lm_head.weight", {s.vocab, H}}};
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "attn_norm.weight", {H}, true});
    t.push_back({p + "attn.q_proj.weight", {K, H}});
    t.push_back({p + "attn.k_proj.weight", {K, H}});
    t.push_back({p + "attn.v_proj.weight", {V, H}});
    t.push_back({p + "attn.b_proj.weight", {s.heads, H}});
    if (s.gated) {
      t.push_back({p + "attn.a_proj.weight", {s.heads, H}});
      t.push_back({p + "attn.A_log", {s.heads}});
      t.push_back({p + "attn.dt_bias", {s.heads}});
      t.push_back({p + "attn.g_proj.weight", {V, H}});
    }
    t.push_back({p + "attn.q_conv1d.weight", {K, 1, s.conv}});
    t.push_back({p + "attn.k_conv1d.weight", {K, 1, s.conv}});
    t.push_back({p + "attn.v_conv1d.weight", {V, 1, s.conv}});
    t.push_back({p + "attn.o_norm.weight", {s.dv()}, true});
    t.push_back({p + "attn.o_proj.weight", {H, V}});
    t.push_back({p + "mlp_norm.weight", {H}, true});
    t.push_back({p + "mlp.gate_proj.weight", {s.intermediate, H}});
    t.push_back({p + "mlp.up_proj.weight", {s.intermediate, H}});
    t.push_back({p + "mlp.down_proj.weight", {H, s.intermediate}});
  }
  return t;
}

/// The Qwen3.5 text model's names (transformers' Qwen3_5ForCausalLM, as the hf_qwen3_5 fixture): layer i is full
/// attention when i % 4 == 3, linear attention (Gated DeltaNet with packed q|k|v, separate z, b, a) otherwise.
std::vector<Spec> qwen3_5_tensors(const Sizes& s) {
  const int64_t H = s.hidden, K = s.heads * s.dk(), V = s.value_heads * s.dv();
  std::vector<Spec> t = {{"model.embed_tokens.weight", {s.vocab, H}},
                         {"model.norm.weight", {H}, true},
                         {"lm_head.weight", {s.vocab, H}}};
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm.weight", {H}, true});
    if (i % 4 == 3) {
      const int64_t Q = s.attn_heads * s.attn_head_dim, KV = s.kv_heads * s.attn_head_dim;
      t.push_back({p + "self_attn.q_proj.weight", {2 * Q, H}});  // queries and the output gate
      t.push_back({p + "self_attn.k_proj.weight", {KV, H}});
      t.push_back({p + "self_attn.v_proj.weight", {KV, H}});
      t.push_back({p + "self_attn.o_proj.weight", {H, Q}});
      t.push_back({p + "self_attn.q_norm.weight", {s.attn_head_dim}, true});
      t.push_back({p + "self_attn.k_norm.weight", {s.attn_head_dim}, true});
    } else {
      const std::string a = p + "linear_attn.";
      t.push_back({a + "in_proj_qkv.weight", {2 * K + V, H}});
      t.push_back({a + "in_proj_z.weight", {V, H}});
      t.push_back({a + "in_proj_b.weight", {s.value_heads, H}});
      t.push_back({a + "in_proj_a.weight", {s.value_heads, H}});
      t.push_back({a + "conv1d.weight", {2 * K + V, 1, s.conv}});
      t.push_back({a + "A_log", {s.value_heads}});
      t.push_back({a + "dt_bias", {s.value_heads}});
      t.push_back({a + "norm.weight", {s.dv()}, true});
      t.push_back({a + "out_proj.weight", {H, V}});
    }
    t.push_back({p + "post_attention_layernorm.weight", {H}, true});
    t.push_back({p + "mlp.gate_proj.weight", {s.intermediate, H}});
    t.push_back({p + "mlp.up_proj.weight", {s.intermediate, H}});
    t.push_back({p + "mlp.down_proj.weight", {H, s.intermediate}});
  }
  return t;
}

/// transformers' Mamba2ForCausalLM names (as the hf_mamba2 fixture): in_proj packs z | x | B | C | dt, the conv runs
/// over x | B | C with a bias, expand 2 so inner = 2 · hidden = heads · head_dim.
std::vector<Spec> mamba2_tensors(const Sizes& s) {
  const int64_t H = s.hidden, inner = 2 * s.hidden, conv = inner + 2 * s.state;
  std::vector<Spec> t = {{"backbone.embeddings.weight", {s.vocab, H}},
                         {"backbone.norm_f.weight", {H}, true},
                         {"lm_head.weight", {s.vocab, H}}};
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = "backbone.layers." + std::to_string(i) + ".";
    t.push_back({p + "norm.weight", {H}, true});
    t.push_back({p + "mixer.in_proj.weight", {inner + conv + s.heads, H}});
    t.push_back({p + "mixer.conv1d.weight", {conv, 1, s.conv}});
    t.push_back({p + "mixer.conv1d.bias", {conv}});
    t.push_back({p + "mixer.dt_bias", {s.heads}});
    t.push_back({p + "mixer.A_log", {s.heads}});
    t.push_back({p + "mixer.D", {s.heads}});
    t.push_back({p + "mixer.norm.weight", {inner}, true});
    t.push_back({p + "mixer.out_proj.weight", {H, inner}});
  }
  return t;
}

nlohmann::json mamba2_config(const Sizes& s) {
  return {{"architectures", {"Mamba2ForCausalLM"}},
          {"model_type", "mamba2"},
          {"hidden_size", s.hidden},
          {"num_hidden_layers", s.layers},
          {"expand", 2},
          {"num_heads", s.heads},
          {"head_dim", 2 * s.hidden / s.heads},
          {"state_size", s.state},
          {"n_groups", 1},
          {"conv_kernel", s.conv},
          {"chunk_size", 256},
          {"hidden_act", "silu"},
          {"layer_norm_epsilon", 1e-05},
          {"norm_before_gate", false},
          {"residual_in_fp32", true},
          {"rms_norm", true},
          {"time_step_limit", {0.0, {{"__float__", "Infinity"}}}},
          {"use_bias", false},
          {"use_conv_bias", true},
          {"tie_word_embeddings", false},
          {"dtype", "bfloat16"},
          {"bos_token_id", 0},
          {"eos_token_id", 0},
          {"pad_token_id", 0},
          {"use_cache", true},
          {"vocab_size", s.vocab}};
}

nlohmann::json qwen3_5_config(const Sizes& s) {
  std::vector<std::string> types;
  for (int64_t i = 0; i < s.layers; ++i) types.push_back(i % 4 == 3 ? "full_attention" : "linear_attention");
  return {{"architectures", {"Qwen3_5ForCausalLM"}},
          {"model_type", "qwen3_5_text"},
          {"attention_bias", false},
          {"dtype", "bfloat16"},
          {"head_dim", s.attn_head_dim},
          {"hidden_act", "silu"},
          {"hidden_size", s.hidden},
          {"intermediate_size", s.intermediate},
          {"layer_types", types},
          {"linear_conv_kernel_dim", s.conv},
          {"linear_key_head_dim", s.dk()},
          {"linear_num_key_heads", s.heads},
          {"linear_num_value_heads", s.value_heads},
          {"linear_value_head_dim", s.dv()},
          {"max_position_embeddings", 32768},
          {"num_attention_heads", s.attn_heads},
          {"num_hidden_layers", s.layers},
          {"num_key_value_heads", s.kv_heads},
          {"partial_rotary_factor", 0.25},
          {"rms_norm_eps", 1e-06},
          {"rope_parameters", {{"partial_rotary_factor", 0.25}, {"rope_theta", 10000000.0}, {"rope_type", "default"}}},
          {"tie_word_embeddings", false},
          {"use_cache", true},
          {"vocab_size", s.vocab}};
}

/// fla's DeltaNetConfig as fla-hub/delta_net-1.3B-100B writes it, or (gated) its GatedDeltaNetConfig as
/// fla-hub/gated_deltanet-1.3B does (head_dim and expand_v carry dk and dv there).
nlohmann::json fla_config(const Sizes& s) {
  nlohmann::json c = {{"attn", nullptr},
                      {"attn_mode", "chunk"},
                      {"hidden_size", s.hidden},
                      {"num_heads", s.heads},
                      {"num_hidden_layers", s.layers},
                      {"hidden_ratio", 4},
                      {"intermediate_size", s.intermediate},
                      {"max_position_embeddings", 2048},
                      {"vocab_size", s.vocab},
                      {"conv_size", s.conv},
                      {"use_short_conv", true},
                      {"hidden_act", "swish"},
                      {"norm_eps", 1e-06},
                      {"bos_token_id", 1},
                      {"eos_token_id", 2},
                      {"fuse_cross_entropy", true},
                      {"initializer_range", 0.02},
                      {"tie_word_embeddings", false},
                      {"torch_dtype", "bfloat16"},
                      {"use_cache", true}};
  if (s.gated) {
    c.update({{"architectures", {"GatedDeltaNetForCausalLM"}},
              {"model_type", "gated_deltanet"},
              {"head_dim", s.head_dim},
              {"expand_v", s.expand_v},
              {"use_gate", true},
              {"allow_neg_eigval", false}});
  } else {
    c.update({{"architectures", {"DeltaNetForCausalLM"}},
              {"model_type", "delta_net"},
              {"expand_k", 1},
              {"expand_v", 1},
              {"use_beta", true},
              {"use_gate", false},
              {"use_output_norm", true},
              {"qk_activation", "silu"},
              {"qk_norm", "l2"},
              {"norm_first", false},
              {"pad_token_id", 2}});
  }
  return c;
}

uint16_t to_bf16(float f) {  // round to nearest even
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t x : s) n *= x;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"write an fla delta_net or gated_deltanet, a Qwen3.5-style or a Mamba-2 checkpoint with random bf16 "
               "weights (default: the 1.3B shapes)"};
  Sizes s;
  std::string out;
  const char* env_seed = std::getenv("STATECUT_SEED");
  uint64_t seed = env_seed ? std::strtoull(env_seed, nullptr, 10) : 20260204ULL;
  std::string family = "delta_net";
  app.add_option("--out", out, "output folder (created; must not hold a checkpoint yet)")->required();
  app.add_option("--family", family, "delta_net, gated_deltanet, qwen3_5 (a Qwen3.5-style hybrid: hidden 2048, 24 "
                                     "layers of which every 4th full attention, 16 key heads of 128, 32 value heads "
                                     "of 128, MLP 6144, vocabulary 151936) or mamba2 (mamba2-1.3b: hidden 2048, 48 "
                                     "layers, 64 heads of 64, state 128, vocabulary 50288)")
      ->capture_default_str();
  app.add_option("--hidden", s.hidden, "hidden size")->capture_default_str();
  auto* heads = app.add_option("--heads", s.heads, "heads (delta_net: head dim = hidden / heads; gated_deltanet: 6; "
                                                   "mamba2: 64, head dim = 2 * hidden / heads)");
  auto* layers = app.add_option("--layers", s.layers, "layers (delta_net 24, gated_deltanet 21, mamba2 48)");
  auto* state = app.add_option("--state", s.state, "mamba2: state_size (default 128)");
  auto* head_dim = app.add_option("--head-dim", s.head_dim, "gated_deltanet: key head dim (default 256)");
  app.add_option("--expand-v", s.expand_v, "gated_deltanet: dv = head_dim * expand_v (default 2)");
  app.add_option("--intermediate", s.intermediate, "MLP size")->capture_default_str();
  app.add_option("--vocab", s.vocab, "vocabulary")->capture_default_str();
  app.add_option("--seed", seed, "pool seed (default STATECUT_SEED or 20260204)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (family != "delta_net" && family != "gated_deltanet" && family != "qwen3_5" && family != "mamba2")
      throw std::runtime_error("--family: expected delta_net, gated_deltanet, qwen3_5 or mamba2, got '" + family + "'");
    s.gated = family == "gated_deltanet";
    s.qwen = family == "qwen3_5";
    s.mamba = family == "mamba2";
    if (state->count() != 0 && !s.mamba) throw std::runtime_error("--state is a mamba2 option");
    if (head_dim->count() != 0 && s.head_dim < 1) throw std::runtime_error("--head-dim must be positive");
    if (s.mamba) {  // state-spaces/mamba2-1.3b unless given
      if (heads->count() == 0) s.heads = 64;
      if (layers->count() == 0) s.layers = 48;
      if (app.count("--vocab") == 0) s.vocab = 50288;
      if (s.head_dim != 0 || app.count("--expand-v") != 0 || app.count("--intermediate") != 0)
        throw std::runtime_error("--head-dim, --expand-v and --intermediate are not mamba2 options");
      if (s.state < 1 || s.heads < 1 || (2 * s.hidden) % s.heads != 0)
        throw std::runtime_error("mamba2: --state must be positive and 2 * hidden divisible by heads");
    } else if (s.qwen) {
      if (s.head_dim == 0) s.head_dim = 128;
      if (app.count("--intermediate") == 0) s.intermediate = 6144;
      if (app.count("--vocab") == 0) s.vocab = 151936;
    } else if (s.gated) {  // fla-hub/gated_deltanet-1.3B unless given
      if (heads->count() == 0) s.heads = 6;
      if (layers->count() == 0) s.layers = 21;
      if (s.head_dim == 0) s.head_dim = 256;
      if (app.count("--expand-v") == 0) s.expand_v = 2;
    } else if (s.head_dim != 0 || app.count("--expand-v") != 0) {
      throw std::runtime_error("--head-dim and --expand-v are gated_deltanet options (delta_net: dk = dv = hidden / heads)");
    }
    if (s.hidden < 1 || s.heads < 1 || s.layers < 1 || s.intermediate < 1 || s.vocab < 1 || s.expand_v < 1 ||
        (s.gated || s.qwen ? s.head_dim < 1 : !s.mamba && s.hidden % s.heads != 0))
      throw std::runtime_error("sizes must be positive and (delta_net) hidden divisible by heads");
    if (fs::exists(fs::path(out) / "model.safetensors"))
      throw std::runtime_error(out + ": already holds model.safetensors");
    fs::create_directories(out);
    const auto specs = s.mamba ? mamba2_tensors(s) : s.qwen ? qwen3_5_tensors(s) : delta_net_tensors(s);
    int64_t largest = 0, total = 0;
    for (const auto& t : specs) largest = std::max(largest, numel(t.shape)), total += numel(t.shape);
    const int64_t spread = 4096;
    std::vector<uint16_t> pool(static_cast<std::size_t>(largest + spread));
    std::mt19937_64 rng(seed);
    const float a = 0.02f * std::sqrt(3.0f);  // uniform(-a, a) has std 0.02
    std::uniform_real_distribution<float> u(-a, a);
    for (auto& b : pool) b = to_bf16(u(rng));
    std::vector<uint16_t> ones(static_cast<std::size_t>(std::max({2 * s.hidden, s.dv(), s.attn_head_dim})), to_bf16(1.0f));
    io::SafetensorsWriter w;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const auto& t = specs[i];
      const std::size_t nbytes = static_cast<std::size_t>(numel(t.shape)) * 2;
      const uint16_t* data = t.ones ? ones.data() : pool.data() + (i * 97) % spread;
      w.add_borrowed(t.name, io::DType::BF16, t.shape, data, nbytes);
    }
    w.set_metadata({{"format", "pt"}});
    w.write((fs::path(out) / "model.safetensors").string());
    std::ofstream cfg(fs::path(out) / "config.json");
    cfg << (s.mamba ? mamba2_config(s) : s.qwen ? qwen3_5_config(s) : fla_config(s)).dump(2) << "\n";
    if (!cfg) throw std::runtime_error(out + "/config.json: cannot write");
    std::printf("wrote %s: %zu tensors, %lld parameters (bf16), seed %llu\n", out.c_str(), specs.size(),
                static_cast<long long>(total), static_cast<unsigned long long>(seed));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "statecut-random-checkpoint: %s\n", e.what());
    return 1;
  }
  return 0;
}
