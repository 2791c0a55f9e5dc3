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

# statecut_add_tests_in(DIR <dir> LIBS <libs...> [LABELS ...]): one test executable per <dir>/*.cpp,
# named after the file. New test files are picked up on the next configure without editing CMake.
function(statecut_add_tests_in)
  cmake_parse_arguments(T "" "DIR;PREFIX" "LIBS;LABELS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${T_DIR}/*.cpp)
  foreach(_src IN LISTS _srcs)
    get_filename_component(_name ${_src} NAME_WE)
    statecut_add_test(NAME ${T_PREFIX}${_name} SOURCES ${_src} LIBS ${T_LIBS} LABELS ${T_LABELS})
  endforeach()
endfunction()
