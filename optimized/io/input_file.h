/// A file named on the command line as input (text to tokenise, a prompt, calibration or training text): what is wrong
/// with the path, said the same way by every command, and its bytes.
///   input_file_problem(p) = "no such file" | broken_link_problem(p) | "is a directory, not a file" | "" (a regular
///                           file, or another non-directory that can be read, such as a pipe)
///   read_input_file(p)    = the file's bytes; std::runtime_error "<p>: <problem>" (or "cannot open for reading",
///                           "read error"): a directory is never read as empty text
#pragma once
#include <string>

namespace statecut::io {

/// "a symbolic link to '<target>', which does not exist" | "a symbolic link loop (...)" | "" (anything else): why a
/// path that is a link reads as missing, so a broken link is not called an absent file.
std::string broken_link_problem(const std::string& path);
std::string input_file_problem(const std::string& path);
std::string read_input_file(const std::string& path);

}  // namespace statecut::io
