// Input files named on the command line (input_file.h).
#include "optimized/io/input_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace statecut::io {

std::string input_file_problem(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
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
