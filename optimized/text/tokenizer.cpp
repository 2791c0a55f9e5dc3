// SentencePiece runs in a helper process (tools/spm_main.cpp, `statecut-spm`), never in this one: Debian's
// libsentencepiece exports its own bundled protobuf-lite, which collides with the libprotobuf LibTorch loads (the
// dynamic linker binds both libraries' google::protobuf symbols to one copy; statecut crashed before main). A
// separate process shares no symbols, survives a crash of the helper as a one-line error, and needs nothing of
// the LibTorch build (the dlmopen alternative would load a second libc/libstdc++ into a private namespace, with
// glibc's small static-TLS reserve and no sanitizer support). The cost is one process per load and per encode.
#include "optimized/text/tokenizer.h"
#include "optimized/text/utf8.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "optimized/io/checkpoint.h"
#ifdef STATECUT_HAVE_BPE_TOKENIZER
#include "optimized/text/bpe_tokenizer.h"
#include "optimized/text/transformers_class.h"
#endif

extern char** environ;

namespace statecut {
namespace fs = std::filesystem;

namespace {

/// $STATECUT_SPM, else statecut-spm next to the running executable.
std::string find_spm_helper() {
  if (const char* e = std::getenv("STATECUT_SPM"); e && *e) return e;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const fs::path c = self.parent_path() / "statecut-spm";
  return fs::exists(c, ec) ? c.string() : std::string();
}

struct ProcessResult {
  int status = 0;  // waitpid status
  std::string out, err;
};

/// Runs argv with `input` on its stdin; collects stdout and stderr. stdin is a socket so that a helper that exits
/// early gives EPIPE (send with MSG_NOSIGNAL), not a SIGPIPE that would kill statecut.
ProcessResult run_process(const std::vector<std::string>& argv, const std::string& input) {
  int in_sock[2], out_pipe[2], err_pipe[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_sock) != 0) throw std::runtime_error(std::strerror(errno));
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_sock[1], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in_sock[1]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(in_sock[0]);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw std::runtime_error("cannot run " + argv[0] + ": " + std::strerror(rc));
  }
  ProcessResult r;
  std::size_t sent = 0;
  int in_fd = in_sock[0];
  if (input.empty()) {
    ::close(in_fd);
    in_fd = -1;
  }
  int open_outputs = 2;
  char buf[1 << 16];
  while (open_outputs > 0 || in_fd >= 0) {
    pollfd p[3];
    int n = 0;
    if (in_fd >= 0) p[n++] = {in_fd, POLLOUT, 0};
    if (out_pipe[0] >= 0) p[n++] = {out_pipe[0], POLLIN, 0};
    if (err_pipe[0] >= 0) p[n++] = {err_pipe[0], POLLIN, 0};
    if (::poll(p, n, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (!p[i].revents) continue;
      if (p[i].fd == in_fd) {
        const ssize_t w = ::send(in_fd, input.data() + sent, std::min<std::size_t>(input.size() - sent, 1 << 16),
                                 MSG_NOSIGNAL);
        if (w > 0) sent += static_cast<std::size_t>(w);
        if (w < 0 && errno != EINTR && errno != EAGAIN) sent = input.size();  // helper stopped reading
        if (sent == input.size()) {
          ::close(in_fd);
          in_fd = -1;
        }
      } else {
        int& fd = p[i].fd == out_pipe[0] ? out_pipe[0] : err_pipe[0];
        const ssize_t got = ::read(fd, buf, sizeof buf);
        if (got > 0) (&fd == &out_pipe[0] ? r.out : r.err).append(buf, static_cast<std::size_t>(got));
        else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          ::close(fd);
          fd = -1;
          --open_outputs;
        }
      }
    }
  }
  if (in_fd >= 0) ::close(in_fd);
  while (::waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
  }
  return r;
}

std::string first_line(const std::string& s) {
  const auto e = s.find('\n');
  return s.substr(0, e);
}

}  // namespace

struct Tokenizer::Impl {
  std::string unavailable;  // non-empty: no tokenizer for this checkpoint, and why
  std::string model_path;  // SentencePiece model; empty (and no bpe) = byte-level
#ifdef STATECUT_HAVE_BPE_TOKENIZER
  std::shared_ptr<const BpeTokenizer> bpe;  // tokenizer.json
#endif
  std::string bpe_path;
  std::string pipeline;    // the transformers class whose pipeline replaced the json's ("" when the json's own)
  std::string helper;      // statecut-spm
  std::vector<int64_t> piece_bytes;  // per id, read once at load
  std::vector<uint8_t> byte_piece;   // per id: a byte-fallback piece (<0xHH>), decoded only with its whole run

  /// Runs the helper; throws "<model>: <problem>" on any failure.
  std::string call(const std::string& mode, const std::string& input) const {
    ProcessResult r;
    try {
      r = run_process({helper, model_path, mode}, input);
    } catch (const std::exception& e) {
      throw std::runtime_error(model_path + ": " + e.what());
    }
    if (WIFSIGNALED(r.status))
      throw std::runtime_error(model_path + ": " + helper + " died with signal " + std::to_string(WTERMSIG(r.status)));
    if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
      const std::string msg = first_line(r.err);
      // The helper's own messages already name the model file.
      throw std::runtime_error(msg.rfind(model_path, 0) == 0 ? msg : model_path + ": " + (msg.empty() ? "statecut-spm failed" : msg));
    }
    return std::move(r.out);
  }
};

namespace {

/// Whether a file starts like a tiktoken rank file: lines "<base64> <decimal rank>".
bool looks_like_tiktoken(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  int lines = 0;
  for (; lines < 3 && std::getline(in, line); ++lines) {
    const size_t sp = line.find(' ');
    if (sp == 0 || sp == std::string::npos || sp + 1 == line.size()) return false;
    for (size_t i = 0; i < sp; ++i)
      if (!std::isalnum(static_cast<unsigned char>(line[i])) && line[i] != '+' && line[i] != '/' && line[i] != '=')
        return false;
    for (size_t i = sp + 1; i < line.size(); ++i)
      if (!std::isdigit(static_cast<unsigned char>(line[i]))) return false;
  }
  return lines == 3;
}

/// Tokenizer files of formats statecut does not read (slow-tokenizer vocabularies, tiktoken, Mistral's tekken,
/// SentencePiece models under other names): the first one a folder holds, "" when none.
std::string unread_tokenizer_file(const std::string& dir) {
  for (const char* name : {"vocab.json", "merges.txt", "vocab.txt", "spiece.model", "sentencepiece.bpe.model",
                           "tokenizer.tiktoken", "qwen.tiktoken", "tekken.json"}) {
    std::error_code ec;
    if (fs::exists(fs::path(dir) / name, ec)) return name;
  }
  return "";
}

}  // namespace

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::bytes() { return Tokenizer(); }

Tokenizer Tokenizer::for_tokenizer_json(const std::string& path) {
#ifdef STATECUT_HAVE_BPE_TOKENIZER
  // The folder's tokenizer_config.json and config.json decide the class transformers picks, which may build its own
  // pipeline from the json (transformers_class.h).
  const TransformersClass cls = read_transformers_class(fs::path(path).parent_path().string());
  Tokenizer t;
  t.impl_->bpe = std::make_shared<const BpeTokenizer>(BpeTokenizer::from_file(path, &cls));
  t.impl_->bpe_path = path;
  t.impl_->pipeline = describe_pipeline(cls);
  const BpeTokenizer& b = *t.impl_->bpe;
  for (int64_t i = 0; i < b.vocab_size(); ++i) {
    t.impl_->piece_bytes.push_back(static_cast<int64_t>(b.token_bytes(i).size()));
    t.impl_->byte_piece.push_back(b.byte_fallback_token(i));
  }
  return t;
#else
  throw std::runtime_error(path + ": tokenizer.json needs PCRE2, which this build of statecut lacks (libpcre2-dev)");
#endif
}

Tokenizer Tokenizer::for_checkpoint(const std::string& dir, TokenizerChoice choice) {
  Tokenizer t;
  if (choice == TokenizerChoice::Bytes) return t;
  const std::string path = (fs::path(dir) / "tokenizer.model").string();
  const std::string json_path = (fs::path(dir) / "tokenizer.json").string();
  for (const std::string& p : {path, json_path}) {  // one line naming it, not a stream error or a helper's abort
    std::error_code ec;
    if (fs::exists(p, ec) && !fs::is_regular_file(p, ec))
      throw std::runtime_error(p + ": not a regular file (a directory?); expected the tokenizer file");
  }
  const bool has_json = fs::exists(json_path);
#ifdef STATECUT_HAVE_BPE_TOKENIZER
  // A tokenizer that is the checkpoint's own code: neither file read as it is gives its ids (transformers_class.h).
  if (has_json || fs::exists(path)) {
    t.impl_->unavailable = remote_tokenizer_code(dir);
    if (!t.impl_->unavailable.empty()) return t;
  }
#endif
  // tokenizer.json is what transformers' fast tokenizer reads, so it decides whenever it is there, beside a
  // tokenizer.model too: SentencePiece's own ids differ from the json's (a dummy "▁" before a leading space, special
  // tokens read as text: 84 of 639 texts on Mistral's), so a json statecut cannot read is an error naming it, never a
  // silent switch to the model (audit 26 D3).
  if (has_json) {
#ifdef STATECUT_HAVE_BPE_TOKENIZER
    try {
      return for_tokenizer_json(json_path);
    } catch (const std::exception& e) {
      if (!fs::exists(path)) throw;
      throw std::runtime_error(std::string(e.what()) +
                               "; statecut does not fall back to the tokenizer.model beside it, whose SentencePiece ids "
                               "differ from transformers' (move the json away to use the model)");
    }
#else
    throw std::runtime_error(json_path + ": tokenizer.json needs PCRE2, which this build of statecut lacks (libpcre2-dev)");
#endif
  }
  if (!fs::exists(path)) {
    // A tokenizer in a format statecut does not read: text cannot be read, whatever the vocabulary.
    const std::string unread = unread_tokenizer_file(dir);
    if (!unread.empty()) {
      t.impl_->unavailable = (fs::path(dir) / unread).string() +
                             ": a tokenizer file statecut does not read (it reads tokenizer.json and tokenizer.model; "
                             "transformers' save_pretrained of the fast tokenizer writes tokenizer.json)";
      return t;
    }
    // Byte-level only when the checkpoint says so: any other vocabulary read as raw bytes gives meaningless ids.
    const int64_t vocab = io::config_vocab_size(io::read_config(dir));
    if (vocab == 256) return t;
    // Token files still work; text is refused when it is read (encode, bytes_of), naming the folder.
    t.impl_->unavailable = dir + ": no tokenizer.model or tokenizer.json, and vocab_size " +
                           (vocab < 0 ? std::string("(none)") : std::to_string(vocab)) + " is not byte-level (256)";
    return t;
  }
  return for_checkpoint_sentencepiece(path);
}

Tokenizer Tokenizer::for_checkpoint_sentencepiece(const std::string& path) {
  // Meta's original Llama 3/4 folders name a tiktoken rank file tokenizer.model ("<base64 token> <rank>" lines):
  // named as such rather than as a protobuf SentencePiece could not parse.
  if (looks_like_tiktoken(path))
    throw std::runtime_error(path + ": a tiktoken rank file (Meta's original Llama 3 format), not a SentencePiece "
                             "model; statecut reads the Hugging Face conversion's tokenizer.json");
  Tokenizer t;
  t.impl_->helper = find_spm_helper();
  if (t.impl_->helper.empty())
    throw std::runtime_error(path + ": SentencePiece helper statecut-spm not found next to the statecut binary (set STATECUT_SPM)");
  t.impl_->model_path = path;
  std::istringstream in(t.impl_->call("info", {}));
  std::string word;
  int64_t n = -1;
  if (!(in >> word >> n) || word != "vocab" || n < 1)
    throw std::runtime_error(path + ": statecut-spm gave no vocabulary size");
  t.impl_->piece_bytes.resize(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = -1, b = -1;
    std::string kind;
    if (!(in >> id >> b >> kind) || id != i || b < 0)
      throw std::runtime_error(path + ": statecut-spm gave malformed piece " + std::to_string(i));
    t.impl_->piece_bytes[static_cast<std::size_t>(i)] = b;
    t.impl_->byte_piece.push_back(kind == "byte");
  }
  return t;
}

bool Tokenizer::available() const { return impl_->unavailable.empty(); }
std::string Tokenizer::unavailable_reason() const {
  return impl_->unavailable.empty() ? std::string()
                                    : impl_->unavailable + ": give pre-tokenised .safetensors/.bin files, or --tokenizer bytes";
}
const std::string& Tokenizer::unavailable_fact() const { return impl_->unavailable; }

std::string Tokenizer::file() const {
  return !impl_->bpe_path.empty() ? impl_->bpe_path : impl_->model_path;
}

bool Tokenizer::byte_level() const { return available() && impl_->model_path.empty() && impl_->bpe_path.empty(); }

std::string Tokenizer::describe() const {
  if (!available()) return "none";
  if (!impl_->bpe_path.empty())
    return "bpe:" + impl_->bpe_path + (impl_->pipeline.empty() ? "" : " as transformers' " + impl_->pipeline);
  return byte_level() ? std::string("bytes") : "sentencepiece:" + impl_->model_path;
}

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  if (!available()) throw std::runtime_error(unavailable_reason());
  std::vector<int64_t> ids;
  if (byte_level()) {
    ids.reserve(text.size());
    for (unsigned char c : text) ids.push_back(static_cast<int64_t>(c));
    return ids;
  }
#ifdef STATECUT_HAVE_BPE_TOKENIZER
  if (impl_->bpe) return impl_->bpe->encode(text);
#endif
  if (text.empty()) return ids;
  const std::string out = impl_->call("encode", text);
  const char* p = out.c_str();
  char* end = nullptr;
  const int64_t n = static_cast<int64_t>(impl_->piece_bytes.size());
  for (;;) {
    while (*p == ' ') ++p;
    if (*p == '\n' || *p == '\0') break;
    errno = 0;
    const long long v = std::strtoll(p, &end, 10);
    if (end == p || errno != 0 || v < 0 || v >= n)
      throw std::runtime_error(impl_->model_path + ": statecut-spm gave a malformed id");
    ids.push_back(static_cast<int64_t>(v));
    p = end;
  }
  return ids;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const { return decode_batch({ids}).front(); }

std::vector<std::string> Tokenizer::decode_batch(const std::vector<std::vector<int64_t>>& seqs) const {
  if (!available()) throw std::runtime_error(unavailable_reason());
  std::vector<std::string> out;
  out.reserve(seqs.size());
  if (byte_level()) {
    for (const auto& ids : seqs) {
      std::string s;
      s.reserve(ids.size());
      for (int64_t id : ids) {
        if (id < 0 || id > 255) throw std::runtime_error("token id " + std::to_string(id) + " is not a byte (byte-level tokenizer)");
        s.push_back(static_cast<char>(static_cast<unsigned char>(id)));
      }
      out.push_back(std::move(s));
    }
    return out;
  }
#ifdef STATECUT_HAVE_BPE_TOKENIZER
  if (impl_->bpe) {
    for (const auto& ids : seqs) out.push_back(impl_->bpe->decode(ids));
    return out;
  }
#endif
  // SentencePiece: one line of ids per sequence; the helper answers "<n>\n<n bytes>" per line.
  const int64_t n = static_cast<int64_t>(impl_->piece_bytes.size());
  std::string input;
  for (const auto& ids : seqs) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= n)
        throw std::runtime_error(impl_->model_path + ": token id " + std::to_string(ids[i]) + " is outside the vocabulary [0, " +
                                 std::to_string(n) + ")");
      if (i) input += ' ';
      input += std::to_string(ids[i]);
    }
    input += '\n';
  }
  const std::string reply = impl_->call("decode", input);
  size_t p = 0;
  for (size_t k = 0; k < seqs.size(); ++k) {
    const size_t nl = reply.find('\n', p);
    char* end = nullptr;
    const unsigned long long len = nl == std::string::npos ? 0 : std::strtoull(reply.c_str() + p, &end, 10);
    if (nl == std::string::npos || end != reply.c_str() + nl || nl + 1 + len > reply.size())
      throw std::runtime_error(impl_->model_path + ": statecut-spm gave a malformed decode reply");
    out.push_back(reply.substr(nl + 1, len));
    p = nl + 1 + len;
  }
  return out;
}

bool Tokenizer::byte_piece(int64_t id) const {
  return id >= 0 && id < static_cast<int64_t>(impl_->byte_piece.size()) && impl_->byte_piece[static_cast<std::size_t>(id)];
}

int64_t Tokenizer::bytes_of(int64_t id) const {
  if (!available()) throw std::runtime_error(unavailable_reason());
  if (byte_level()) return 1;
  if (id < 0 || id >= static_cast<int64_t>(impl_->piece_bytes.size())) return 0;
  return impl_->piece_bytes[static_cast<std::size_t>(id)];
}

int64_t Tokenizer::vocab_size() const {
  if (!available()) return -1;
  return byte_level() ? 256 : static_cast<int64_t>(impl_->piece_bytes.size());
}

std::vector<std::string> tokenizer_formats(std::string* spm_helper) {
  std::vector<std::string> f{"bytes"};
#ifdef STATECUT_HAVE_BPE_TOKENIZER
  f.push_back("tokenizer.json");
#endif
  const std::string helper = find_spm_helper();
  if (!helper.empty()) f.push_back("tokenizer.model");
  if (spm_helper) *spm_helper = helper;
  return f;
}

void require_valid_utf8(const Tokenizer& tok, const std::string& text, const std::string& where) {
  if (!tok.available() || tok.byte_level()) return;
  if (const size_t bad = utf8::first_invalid(text); bad != std::string::npos)
    throw std::runtime_error(where + ": invalid UTF-8 at byte " + std::to_string(bad) +
                             ": the tokenizer would read its repair (U+FFFD), not these bytes (only a byte-level model "
                             "reads any bytes)");
}

}  // namespace statecut
