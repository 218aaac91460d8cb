# Helpers shared by every module's CMakeLists.txt.

# Header visibility. include/tessera/ holds what is installed (status.h,
# frontier.h, rt.h); every library exports it. A module's interface to the
# rest of the tree is the headers it names INTERFACE (region/region.h,
# lease/lease.h, mig/mig.h), which the modules linking it include as
# "<module>/x.h"; the modules that SHARE_HEADERS (base, proto, device: the
# project's internal toolkit) export every header of theirs. A module's
# other headers (mig/internal.h, daemon/config.h, region/layout.h, ...) are
# reachable from its own sources and from tests that name the module in
# WHITEBOX, nowhere else: each module's folder is seen through its own view
# directory, build/private/<module>/<module> -> src/<module>, and its
# interface through build/interface/<module>/<module>/, which links to the
# INTERFACE headers alone.
function(tsr_private_view module out_var)
  set(view ${CMAKE_BINARY_DIR}/private/${module})
  if(NOT EXISTS ${view}/${module})
    file(MAKE_DIRECTORY ${view})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/src/${module} ${view}/${module} SYMBOLIC)
  endif()
  set(${out_var} ${view} PARENT_SCOPE)
endfunction()

# tsr_library(NAME <module> SOURCES ... [DEPS ...] [SHARE_HEADERS] [INTERFACE header ...])
# Declares static library tessera_<module> (see "Header visibility" above).
function(tsr_library)
  cmake_parse_arguments(A "SHARE_HEADERS" "NAME" "SOURCES;DEPS;INTERFACE" ${ARGN})
  add_library(tessera_${A_NAME} STATIC ${A_SOURCES})
  tsr_private_view(${A_NAME} view)
  target_include_directories(tessera_${A_NAME} PUBLIC ${CMAKE_SOURCE_DIR}/include)
  if(A_SHARE_HEADERS)
    target_include_directories(tessera_${A_NAME} PUBLIC ${view})
  else()
    target_include_directories(tessera_${A_NAME} PRIVATE ${view})
  endif()
  if(A_INTERFACE)
    set(iface ${CMAKE_BINARY_DIR}/interface/${A_NAME})
    file(MAKE_DIRECTORY ${iface}/${A_NAME})
    foreach(h ${A_INTERFACE})
      if(NOT EXISTS ${CMAKE_SOURCE_DIR}/src/${A_NAME}/${h})
        message(FATAL_ERROR "tsr_library(${A_NAME}): no src/${A_NAME}/${h} to name INTERFACE")
      endif()
      if(NOT EXISTS ${iface}/${A_NAME}/${h})
        file(CREATE_LINK ${CMAKE_SOURCE_DIR}/src/${A_NAME}/${h} ${iface}/${A_NAME}/${h} SYMBOLIC)
      endif()
    endforeach()
    target_include_directories(tessera_${A_NAME} PUBLIC ${iface})
  endif()
  set_target_properties(tessera_${A_NAME} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(A_DEPS)
    target_link_libraries(tessera_${A_NAME} PUBLIC ${A_DEPS})
  endif()
endfunction()

# tsr_whitebox(TARGET <target> MODULES ...): lets a test (or a module's own
# executable) include the private headers of MODULES.
function(tsr_whitebox target)
  foreach(m ${ARGN})
    tsr_private_view(${m} view)
    target_include_directories(${target} PRIVATE ${view})
  endforeach()
endfunction()

# tsr_unit_test(NAME <name> SOURCES ... [DEPS ...] [LABELS ...] [WHITEBOX modules...])
# A Criterion test program registered with ctest as unit.<name>; WHITEBOX
# modules' private headers are visible to it.
function(tsr_unit_test)
  cmake_parse_arguments(A "" "NAME;PREFIX" "SOURCES;DEPS;LABELS;WHITEBOX" ${ARGN})
  if(NOT A_PREFIX)
    set(A_PREFIX unit)
  endif()
  set(exe test_${A_PREFIX}_${A_NAME})
  if(TESSERA_SANITIZE MATCHES "thread")
    # Criterion aborts at start-up under ThreadSanitizer ("Could not initialize
    # inheritable arena", Snaipe/Criterion#274): register the program as a
    # skipped test that says so. Threaded code is tested under TSan by plain
    # programs (e.g. tests/unit/frontier/test_threads.c).
    add_test(NAME ${A_PREFIX}.${A_NAME}
      COMMAND sh -c "echo 'skipped: Criterion cannot start under ThreadSanitizer (Snaipe/Criterion#274)'; exit 77")
    set_tests_properties(${A_PREFIX}.${A_NAME} PROPERTIES LABELS "${A_PREFIX};${A_LABELS}" SKIP_RETURN_CODE 77)
    return()
  endif()
  add_executable(${exe} ${A_SOURCES})
  target_link_libraries(${exe} PRIVATE ${A_DEPS} PkgConfig::CRITERION)
  if(A_WHITEBOX)
    tsr_whitebox(${exe} ${A_WHITEBOX})
  endif()
  set_target_properties(${exe} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${A_PREFIX}.${A_NAME} COMMAND ${exe} --jobs 2)
  set_tests_properties(${A_PREFIX}.${A_NAME} PROPERTIES LABELS "${A_PREFIX};${A_LABELS}"
    ENVIRONMENT "TESSERA_BIN_DIR=${CMAKE_BINARY_DIR}/bin;TESSERA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endfunction()

# tsr_script_test(NAME <name> SCRIPT <file> [LABELS ...] [TIMEOUT s])
# A bash script driving the real binaries, registered as integration.<name>.
# Exit 0 = pass, 77 = skipped (the script prints why).
function(tsr_script_test)
  cmake_parse_arguments(A "" "NAME;SCRIPT;TIMEOUT;PREFIX" "LABELS" ${ARGN})
  if(NOT A_PREFIX)
    set(A_PREFIX integration)
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 120)
  endif()
  add_test(NAME ${A_PREFIX}.${A_NAME} COMMAND bash ${A_SCRIPT})
  set_tests_properties(${A_PREFIX}.${A_NAME} PROPERTIES LABELS "${A_PREFIX};${A_LABELS}"
    SKIP_RETURN_CODE 77 TIMEOUT ${A_TIMEOUT}
    ENVIRONMENT "TESSERA_BIN_DIR=${CMAKE_BINARY_DIR}/bin;TESSERA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endfunction()

# tsr_bench(NAME <name> SOURCES ... [DEPS ...])
# A benchmark program built into <build>/bench/bench_<name>; `make bench` runs
# every program there. Benchmarks print a table that puts tessera beside its
# baseline measured in the same run.
function(tsr_bench)
  cmake_parse_arguments(A "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_executable(bench_${A_NAME} ${A_SOURCES})
  target_link_libraries(bench_${A_NAME} PRIVATE ${A_DEPS})
  set_target_properties(bench_${A_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endfunction()

# tsr_find_torch_python(VAR): the first python3 that imports torch (Debian's
# python3-torch is for /usr/bin/python3, which may not be the first python3
# on PATH), or "" when none does.
function(tsr_find_torch_python VAR)
  set(found "")
  foreach(py python3 /usr/bin/python3)
    execute_process(COMMAND ${py} -c "import torch" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(rc EQUAL 0)
      set(found ${py})
      break()
    endif()
  endforeach()
  set(${VAR} "${found}" PARENT_SCOPE)
endfunction()
