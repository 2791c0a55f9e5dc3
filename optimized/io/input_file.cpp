// Input files named on the command line (input_file.h).
#include "optimized/io/input_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace statecut::io {

std::string broken_link_problem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec, lec;
  const auto st = fs::status(path, ec);
  if (ec == std::errc::too_many_symbolic_link_levels) return "a symbolic link loop (too many levels of links)";
  if (st.type() != fs::file_type::not_found && st.type() != fs::file_type::none) return "";
  if (!fs::is_symlink(fs::symlink_status(path, lec))) return "";
  const fs::path target = fs::read_symlink(path, lec);
  return "a symbolic link to " + (lec ? std::string("a target") : "'" + target.string() + "'") + ", which does not exist";
}

std::string input_file_problem(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (const std::string link = broken_link_problem(path); !link.empty()) return link;
  if (st.type() == std::filesystem::file_type::not_found || st.type() == std::filesystem::file_type::none)
    return "no such file";
  if (st.type() == std::filesystem::file_type::directory) return "is a directory, not a file";
  return "";
}

std::string read_input_file(const std::string& path) {
  if (const std::string why = input_file_problem(path); !why.empty()) throw std::runtime_error(path + ": " + why);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path + ": cannot open for reading");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw std::runtime_error(path + ": read error");
  return ss.str();
}

}  // namespace statecut::io
