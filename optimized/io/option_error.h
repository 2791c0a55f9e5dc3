// The one error type for a command line that asks for something impossible, as opposed to an input that is wrong.
//
// README "The command line": exit 1 is a failure (a file that cannot be read, a checkpoint that does not load, bad
// contents), exit 2 a usage error. A value outside an option's range (--ratio 0, --keep 0, --top-p 2), options that
// exclude each other (--ratio with --keep) and a required option left out are usage errors wherever they are checked:
// in a CLI11 validator at parse time or in the library once the options are known, so the library throws this type
// and main() gives it exit 2 with the same "usage:" line as a parse error. Problems with what a file holds stay
// std::runtime_error (exit 1), even when a file's contents make an option impossible (--keep 200 for dk = 128).
#pragma once
#include <stdexcept>

namespace statecut {

/// "--name: what is wrong" about the options alone; main() prints "statecut <cmd>: usage: <what>; see ..." and exits 2.
struct OptionError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

}  // namespace statecut
