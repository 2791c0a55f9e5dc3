# statecut_add_test(NAME <name> SOURCES <files...> [LIBS <libs...>] [LABELS <labels...>] [TIMEOUT <s>])
# One gtest executable; every TEST inside is registered with CTest under its gtest name
# (gtest_discover_tests), carrying the given labels (default L0).
function(statecut_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_LABELS)
    set(T_LABELS L0)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  if(CMAKE_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # In a batch a test file is no longer the main file: GCC then warns on every TEST_F whose fixture sits in an
    # anonymous namespace (the tests' normal form).
    target_compile_options(${T_NAME} PRIVATE -Wno-subobject-linkage)
  endif()
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${T_NAME} PRIVATE
    STATECUT_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    STATECUT_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # Tests of the LibTorch path share one precompiled header (tests/CMakeLists.txt makes statecut_test_pch).
  if(TARGET statecut_test_pch AND "statecut_opt" IN_LIST T_LIBS)
    target_precompile_headers(${T_NAME} REUSE_FROM statecut_test_pch)
    # GCC rejects a PCH built with other code-model flags (-Winvalid-pch, then parses LibTorch again): with the
    # project-wide POSITION_INDEPENDENT_CODE the object library gets -fPIC and an executable -fPIE, so both drop it
    # (GCC's default, PIE on Debian, is then the same for both).
    set_target_properties(${T_NAME} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  endif()
  gtest_discover_tests(${T_NAME}
    PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    DISCOVERY_TIMEOUT 120)
endfunction()

# statecut_add_tests_in(DIR <dir> LIBS <libs...> [LABELS ...] [PREFIX p] [TARGETS <out var>]): one test executable
# per <dir>/*.cpp, named after the file; TARGETS receives the executables made. New test files are picked up on the next configure without editing CMake.
# Under CMAKE_UNITY_BUILD (the CI build, ci/test.sh) the folder is ONE executable, <PREFIX><folder>_tests, compiled in
# unity batches: a LibTorch or RapidCheck test file spends most of its ~25 s compile on headers and on instantiating
# the same templates, which a batch does once. CTest still lists every gtest test on its own, so labels, filters and
# parallelism are unchanged. statecut_test_target(<file stem> OUT) names the executable a file ended up in.
function(statecut_add_tests_in)
  cmake_parse_arguments(T "" "DIR;PREFIX;TARGETS" "LIBS;LABELS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${T_DIR}/*.cpp)
  set(_made)
  if(CMAKE_UNITY_BUILD)
    get_filename_component(_folder ${T_DIR} NAME)
    set(_target ${T_PREFIX}${_folder}_tests)
    if(_srcs)
      statecut_add_test(NAME ${_target} SOURCES ${_srcs} LIBS ${T_LIBS} LABELS ${T_LABELS})
      list(APPEND _made ${_target})
    endif()
    foreach(_src IN LISTS _srcs)
      get_filename_component(_name ${_src} NAME_WE)
      set_property(GLOBAL PROPERTY STATECUT_TEST_TARGET_${_name} ${_target})
    endforeach()
  else()
    foreach(_src IN LISTS _srcs)
      get_filename_component(_name ${_src} NAME_WE)
      statecut_add_test(NAME ${T_PREFIX}${_name} SOURCES ${_src} LIBS ${T_LIBS} LABELS ${T_LABELS})
      set_property(GLOBAL PROPERTY STATECUT_TEST_TARGET_${_name} ${T_PREFIX}${_name})
      list(APPEND _made ${T_PREFIX}${_name})
    endforeach()
  endif()
  if(T_TARGETS)
    set(${T_TARGETS} ${_made} PARENT_SCOPE)
  endif()
endfunction()

# statecut_test_target(<file stem> <out var>): the test executable that tests/<folder>/<file stem>.cpp is built into
# (itself, or its folder's under CMAKE_UNITY_BUILD); empty when that file is not built.
function(statecut_test_target name out)
  get_property(_t GLOBAL PROPERTY STATECUT_TEST_TARGET_${name})
  set(${out} "${_t}" PARENT_SCOPE)
endfunction()
