// The sanitizer runtimes' default options for the programs of REMAT_SANITIZE_TARGETS
// (cmake/RematSanitize.cmake): every report is fatal, leaks are reported except the ones
// scripts/lsan.supp explains (inside third-party libraries). ASAN_OPTIONS, LSAN_OPTIONS and
// UBSAN_OPTIONS, when set, override them. The runtimes call these functions before main.

extern "C" {
const char* __asan_default_options();  // NOLINT: the names the runtimes look for
const char* __lsan_default_options();
const char* __ubsan_default_options();

const char* __asan_default_options() { return "detect_leaks=1:abort_on_error=1"; }
const char* __lsan_default_options() {
  return "suppressions=" REMAT_LSAN_SUPPRESSIONS ":print_suppressions=0";
}
const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1"; }
}
