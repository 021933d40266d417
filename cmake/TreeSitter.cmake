# Obtains tree-sitter's C core and the tree-sitter-python grammar from their
# PyPI source distributions (pinned, hash-checked) and builds them as one static
# library, dolsot_tree_sitter. Nothing third-party is committed: the sdists are
# fetched once into DOLSOT_DEPS_DIR (default: <source>/.deps) and reused offline;
# dolsot's own sdist carries the two archives there, so building it fetches
# nothing.

# The pins (version and SHA-256 of each sdist) live in one place, the
# hash-checking requirements file pip reads too.
set(DOLSOT_TREE_SITTER_REQUIREMENTS "${PROJECT_SOURCE_DIR}/requirements/tree-sitter-sdists.txt")
# tree-sitter-python 0.23.6 is the newest grammar whose sdist ships scanner.c.
# It is generated for ABI 14, the core 0.24's own ABI; its sdist omits
# src/tree_sitter/*.h, which are the core's lib/src/{parser,array,alloc}.h of
# the same ABI, so the build exposes those under tree_sitter/ (below).

set(DOLSOT_DEPS_DIR "${PROJECT_SOURCE_DIR}/.deps" CACHE PATH
    "Where registry source distributions are cached (an sdist of dolsot carries them there)")

# dolsot_pinned_sdist(<pypi-name> <version-var> <sha256-var>): the pin of
# <pypi-name> in DOLSOT_TREE_SITTER_REQUIREMENTS.
function(dolsot_pinned_sdist name version_var sha256_var)
  file(STRINGS "${DOLSOT_TREE_SITTER_REQUIREMENTS}" lines
       REGEX "^${name}==[^ ]+ --hash=sha256:[0-9a-f]+$")
  list(LENGTH lines count)
  if(NOT count EQUAL 1)
    message(FATAL_ERROR "dolsot: no single pin of ${name} in ${DOLSOT_TREE_SITTER_REQUIREMENTS}")
  endif()
  string(REGEX MATCH "==([^ ]+) --hash=sha256:([0-9a-f]+)" _ "${lines}")
  set(${version_var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  set(${sha256_var} "${CMAKE_MATCH_2}" PARENT_SCOPE)
endfunction()

# dolsot_fetch_sdist(<pypi-name> <archive-basename> <out-dir-var>): the
# extracted sdist, fetched (all pins at once) when not in DOLSOT_DEPS_DIR yet.
function(dolsot_fetch_sdist name archive out_var)
  dolsot_pinned_sdist(${name} version sha256)
  set(archive_path "${DOLSOT_DEPS_DIR}/${archive}-${version}.tar.gz")
  set(extract_dir "${DOLSOT_DEPS_DIR}/${archive}-${version}")
  if(NOT EXISTS "${archive_path}")
    if(NOT Python_EXECUTABLE)
      find_package(Python 3.10 REQUIRED COMPONENTS Interpreter)
    endif()
    file(MAKE_DIRECTORY "${DOLSOT_DEPS_DIR}")
    message(STATUS "dolsot: fetching ${name}==${version} (sdist) from PyPI")
    execute_process(
      COMMAND "${Python_EXECUTABLE}" -m pip download --quiet --no-deps --disable-pip-version-check
              --no-binary :all: --require-hashes -r "${DOLSOT_TREE_SITTER_REQUIREMENTS}"
              -d "${DOLSOT_DEPS_DIR}"
      RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0 OR NOT EXISTS "${archive_path}")
      message(FATAL_ERROR
        "dolsot: could not download the ${name}==${version} source distribution "
        "into ${DOLSOT_DEPS_DIR}. Run scripts/setup.sh (it fetches it with pip), "
        "or place ${archive}-${version}.tar.gz there by hand.")
    endif()
  endif()
  file(SHA256 "${archive_path}" actual)
  if(NOT actual STREQUAL sha256)
    message(FATAL_ERROR "dolsot: ${archive_path} has SHA256 ${actual}, expected ${sha256}")
  endif()
  if(NOT EXISTS "${extract_dir}/.extracted")
    file(ARCHIVE_EXTRACT INPUT "${archive_path}" DESTINATION "${DOLSOT_DEPS_DIR}")
    file(TOUCH "${extract_dir}/.extracted")
  endif()
  set(${out_var} "${extract_dir}" PARENT_SCOPE)
endfunction()

dolsot_fetch_sdist(tree-sitter tree-sitter TS_CORE_DIR)
dolsot_fetch_sdist(tree-sitter-python tree_sitter_python TS_PYTHON_DIR)

set(TS_LIB_DIR "${TS_CORE_DIR}/tree_sitter/core/lib")
add_library(dolsot_tree_sitter STATIC
  "${TS_LIB_DIR}/src/lib.c"
  "${TS_PYTHON_DIR}/src/parser.c"
  "${TS_PYTHON_DIR}/src/scanner.c")
set_target_properties(dolsot_tree_sitter PROPERTIES
  C_STANDARD 11 POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
target_compile_definitions(dolsot_tree_sitter PRIVATE _POSIX_C_SOURCE=200112L _DEFAULT_SOURCE)
set(TS_GRAMMAR_HEADERS "${CMAKE_CURRENT_BINARY_DIR}/ts_grammar_include")
foreach(h parser.h array.h alloc.h)
  configure_file("${TS_LIB_DIR}/src/${h}" "${TS_GRAMMAR_HEADERS}/tree_sitter/${h}" COPYONLY)
endforeach()
target_include_directories(dolsot_tree_sitter PRIVATE
  "${TS_LIB_DIR}/src" "${TS_LIB_DIR}/src/wasm" "${TS_GRAMMAR_HEADERS}")
# Consumers see only the public API header; the grammar entry point is declared
# by sandbox/ itself (const TSLanguage *tree_sitter_python(void)).
target_include_directories(dolsot_tree_sitter SYSTEM PUBLIC
  "$<BUILD_INTERFACE:${TS_LIB_DIR}/include>")
target_compile_options(dolsot_tree_sitter PRIVATE -w)
