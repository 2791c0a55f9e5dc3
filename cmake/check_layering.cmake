# The dependency arrows of the source tree (README "Layout"), checked on every #include "<folder>/...":
# a folder may include itself and the folders it points to, nothing else. Run as the L0 test Layout_DependencyArrows:
#   cmake -DROOT=<source dir> -P cmake/check_layering.cmake
# Folders are matched longest first (optimized/models before optimized). tests/, properties/, bench/, fuzz/ and
# tools/ may include anything and are not checked.
set(_layers
  "reference|reference"
  "kernels|kernels reference"
  "optimized/io|optimized/io"
  "optimized/models|optimized/models optimized/io kernels"
  "optimized/text|optimized/text optimized/io"
  "optimized/prune|optimized/prune optimized/models optimized/text optimized/io reference"
  "optimized/analysis|optimized/analysis optimized/prune optimized/models optimized/text optimized/io reference"
  "optimized/verify|optimized/verify optimized/analysis optimized/prune optimized/models optimized/text optimized/io reference kernels"
  "optimized/train|optimized/train optimized/analysis optimized/prune optimized/models optimized/text optimized/io reference"
  "optimized/generate|optimized/generate optimized/models optimized/text optimized/io kernels"
  "optimized|optimized"
  "cli|cli optimized/verify optimized/train optimized/generate optimized/analysis optimized/prune optimized/models optimized/text optimized/io reference kernels")
if(NOT ROOT)
  message(FATAL_ERROR "check_layering: pass -DROOT=<source dir>")
endif()
set(_known_targets reference kernels optimized/io optimized/models optimized/text optimized/prune optimized/analysis
    optimized/verify optimized/train optimized/generate optimized cli tests properties bench fuzz tools)
set(_violations 0)
set(_checked 0)
foreach(_layer IN LISTS _layers)
  string(REPLACE "|" ";" _pair "${_layer}")
  list(GET _pair 0 _dir)
  list(GET _pair 1 _allowed)
  string(REPLACE " " ";" _allowed "${_allowed}")
  file(GLOB _files "${ROOT}/${_dir}/*.h" "${ROOT}/${_dir}/*.cpp" "${ROOT}/${_dir}/*.cu" "${ROOT}/${_dir}/*.cuh"
       "${ROOT}/${_dir}/*/*.h" "${ROOT}/${_dir}/*/*.cpp")
  foreach(_f IN LISTS _files)
    file(RELATIVE_PATH _rel "${ROOT}" "${_f}")
    # the owning layer of this file: the longest listed folder that is a prefix (optimized/models/families → models)
    set(_owner "")
    foreach(_cand IN LISTS _layers)
      string(REPLACE "|" ";" _cp "${_cand}")
      list(GET _cp 0 _cd)
      string(FIND "${_rel}" "${_cd}/" _at)
      string(LENGTH "${_cd}" _cl)
      string(LENGTH "${_owner}" _ol)
      if(_at EQUAL 0 AND _cl GREATER _ol)
        set(_owner "${_cd}")
      endif()
    endforeach()
    if(NOT _owner STREQUAL _dir)
      continue()
    endif()
    math(EXPR _checked "${_checked} + 1")
    file(STRINGS "${_f}" _incs REGEX "^[ \t]*#[ \t]*include[ \t]+\"")
    foreach(_inc IN LISTS _incs)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^\"]+)\".*" "\\1" _path "${_inc}")
      if(NOT _path MATCHES "/")
        continue()  # a sibling file or a generated .inc next to it
      endif()
      set(_target "")
      foreach(_k IN LISTS _known_targets)
        string(FIND "${_path}" "${_k}/" _at)
        string(LENGTH "${_k}" _kl)
        string(LENGTH "${_target}" _tl)
        if(_at EQUAL 0 AND _kl GREATER _tl)
          set(_target "${_k}")
        endif()
      endforeach()
      if(_target STREQUAL "")
        continue()  # a system or third-party header with a slash (torch/torch.h, CLI/CLI.hpp)
      endif()
      list(FIND _allowed "${_target}" _ok)
      if(_ok EQUAL -1)
        message(SEVERE_WARNING "${_rel}: includes \"${_path}\": ${_dir} may include only: ${_allowed}")
        math(EXPR _violations "${_violations} + 1")
      endif()
    endforeach()
  endforeach()
endforeach()
if(_violations GREATER 0)
  message(FATAL_ERROR "check_layering: ${_violations} include(s) against the dependency arrows (${_checked} files checked)")
endif()
if(_checked LESS 50)
  message(FATAL_ERROR "check_layering: only ${_checked} files checked: is ROOT right?")
endif()
message(STATUS "check_layering: ${_checked} files, every include follows the arrows")
